package hardware

// Calibration holds the cost model's constants (docs/cost-model.md states
// the equations they enter and where each comes from); a chip's profile
// (profiles.go) or a fitted profile file replaces some of them.
type Calibration struct {
	// MaxEfficiency is the fraction of peak FLOP/s that large, dense
	// matmuls reach; HalfEfficiencyTime is the amount of work, in seconds at
	// peak, at which a kernel reaches half of that (small kernels cannot
	// fill the GPU).
	MaxEfficiency      float64
	HalfEfficiencyTime float64
	// AttentionForward and AttentionBackward are the fractions of peak
	// FLOP/s the fused attention core (FlashAttention-class kernels)
	// reaches in forward and backward.
	AttentionForward, AttentionBackward float64
	// MemoryEfficiency is the fraction of HBM bandwidth copies and
	// memory-bound kernels reach.
	MemoryEfficiency float64
	// ElementwiseEfficiency is the fraction of HBM bandwidth the
	// element-wise kernels between the matmuls (norms, RoPE, activations,
	// residual adds; the plan's ElemBytes) reach, forward and backward:
	// launched one per operation and each a short pass over a tensor of
	// a few tens of MB, they reach less of it than a large copy does, and
	// less on HBM3 than on HBM2e (profiles.go). It is the share of a
	// forward and backward pass together; ElementwiseShares splits it
	// into forward kernels' and gradient kernels' (elementwise.go).
	ElementwiseEfficiency float64
	// Launch is the fixed GPU-side cost of a kernel.
	Launch float64
	// AlphaIntra and AlphaInter are the latency of one step of NCCL's
	// Simple-protocol ring within a node (NVLink) and across nodes;
	// NCCLProtocols holds LL's and LL128's and the fixed latencies.
	// BusEfficiency is the fraction of link bandwidth a collective's bus
	// bandwidth reaches (nccl-tests conventions).
	AlphaIntra, AlphaInter float64
	BusEfficiency          float64
	// AlphaOnly prices a collective as a ring of AlphaIntra or AlphaInter
	// per step at the link's bus bandwidth, with none of NCCL's protocols
	// and fixed latencies: a rehearsal's virtual ranks on one GPU
	// (executor/gpu), not NCCL over a network.
	AlphaOnly bool
	// NICEfficiency is the fraction of a NIC's line rate NCCL reaches
	// across nodes.
	NICEfficiency float64
	// Overlap is how much slower compute runs while a collective runs
	// beside it (NCCL kernels take SMs and memory bandwidth).
	Overlap float64
	// IssueKernel and IssueOther are the CPU's cost of issuing an
	// operation: a kernel or collective, and bookkeeping (alloc, free,
	// events).
	IssueKernel, IssueOther float64
	// HostOptimizer is the CPU's optimizer throughput, bytes/s.
	HostOptimizer float64
	// ClockRatio is the SM clock the GPU sustains (under its power limit)
	// over the clock its dense peak assumes ([cluster] sm_clock_mhz); it
	// scales every FLOP/s figure. 0 means 1.
	ClockRatio float64
}

// DefaultCalibration holds figures typical of Hopper-class systems with
// NCCL 2.2x; see docs/cost-model.md.
var DefaultCalibration = Calibration{
	MaxEfficiency:      0.75,
	HalfEfficiencyTime: 10e-6,
	AttentionForward:   0.35,
	AttentionBackward:  0.30,
	MemoryEfficiency:   0.8,
	// No measurement for the chips without a profile figure: the copies'.
	ElementwiseEfficiency: 0.8,
	Launch:                4e-6,
	AlphaIntra:            3.4e-6,
	AlphaInter:            14e-6,
	BusEfficiency:         0.8,
	NICEfficiency:         0.92,
	Overlap:               0.189,
	IssueKernel:           8e-6,
	IssueOther:            1e-6,
	HostOptimizer:         20e9,
}

// GEMMTile is the output tile one SM computes per wave: cuBLAS's most
// efficient tiles are 256×128 and 128×256, and with them "one thread
// block per SM" runs, so a wave is as many tiles as the GPU has SMs
// (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001,
// sections 2.3 "Typical Tile Dimensions in cuBLAS and Performance" and
// 3.2 "Wave Quantization"). On Hopper, CUTLASS's bf16 kernels use the
// same 128×256 tile area.
var GEMMTile = [2]int64{256, 128}
