package hardware

// Protocol is one of NCCL's three wire protocols as NCCL's own tuning
// model prices it: a fixed latency per collective, a latency per step
// of a ring (or level of a tree) by the link the step crosses, and the
// share of the link's bus bandwidth the protocol carries data at. NCCL
// times every algorithm and protocol this way for each call and runs the
// fastest (ncclTopoGetAlgoTime), so small messages go LL, middling ones
// LL128 and large ones Simple.
//
// The figures are NCCL's, from src/graph/tuning.cc of NVIDIA/nccl 2.30.7
// (5067397, 2026-06; ncclTunerConstantsDefaults): baseLatencies (ring
// and tree), hwLatencies for NVLink, PCI and NET, and the "model
// refinements" of ncclTopoTuneModel for bandwidth. Latencies in seconds.
type Protocol struct {
	Name string
	// RingBase and TreeBase are the fixed latency of a ring collective
	// and of a tree all-reduce (baseLatencies).
	RingBase, TreeBase float64
	// Ring and Tree are the latency of one ring step and of one tree
	// level, by the link crossed (hwLatencies).
	Ring, Tree LinkLatency
	// RingBW and TreeBW are the fraction of the link's bus bandwidth the
	// protocol reaches in a ring and a multi-node tree; TreeBWIntra a
	// tree within one node. LL moves 8 bytes per 4 of data and a flag,
	// LL128 120 of every 128 bytes.
	RingBW, TreeBW, TreeBWIntra float64
	// MaxBW caps the protocol's bus bandwidth in bytes/s (LL's llMaxBws:
	// Hopper within a node, and Intel-CPU hosts across 2 and more nodes);
	// 0 is no cap.
	MaxBW [3]float64
	// NetOverhead is the host's cost of posting each network step
	// (getNetOverhead, Intel x86: 1 µs; Simple posts three), the least a
	// step inside a node of a multi-node ring costs.
	NetOverhead float64
}

// LinkLatency is a per-step latency by the link a step crosses.
type LinkLatency struct{ NVLink, PCI, Net float64 }

// NCCLProtocols are LL, LL128 and Simple with NCCL 2.30's figures.
// Simple's ring latencies are also the calibration's AlphaIntra (NVLink
// 3.4 µs) and AlphaInter (network 14 µs) defaults, which a profile may
// replace; the cost model takes Simple's from the calibration and LL's
// and LL128's from here.
var NCCLProtocols = []Protocol{
	{Name: "LL", RingBase: 6.6e-6, TreeBase: 6.8e-6,
		Ring: LinkLatency{0.6e-6, 1.0e-6, 2.7e-6}, Tree: LinkLatency{0.6e-6, 1.0e-6, 5.0e-6},
		RingBW: 0.5, TreeBW: 1 / 3.8, TreeBWIntra: 1 / 3.8,
		MaxBW: [3]float64{141e9, 39e9, 20.4e9}, NetOverhead: 1e-6},
	{Name: "LL128", RingBase: 14.0e-6, TreeBase: 14.0e-6,
		Ring: LinkLatency{1.9e-6, 2.5e-6, 4.0e-6}, Tree: LinkLatency{1.25e-6, 1.9e-6, 8.5e-6},
		RingBW: 0.92, TreeBW: 120.0 / 128, TreeBWIntra: 7.0 / 9, NetOverhead: 1e-6},
	{Name: "Simple", RingBase: 8.4e-6, TreeBase: 8.4e-6,
		Ring: LinkLatency{3.4e-6, 5.7e-6, 14.0e-6}, Tree: LinkLatency{4.0e-6, 4.0e-6, 14.0e-6},
		RingBW: 1, TreeBW: 0.92, TreeBWIntra: 0.92, NetOverhead: 3e-6},
}

// RingPlateau is the factor on a multi-node Simple ring all-reduce's
// latency once each rank's slice per channel is 64 bytes or more: "Plateau
// effect of ring", 1.4 on Ampere and later (ncclTopoGetAlgoTime).
const RingPlateau = 1.4
