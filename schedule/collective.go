package schedule

import (
	"math"

	"github.com/fsdpc/fsdpc/hardware"
)

// Collectives as NCCL runs them (docs/cost-model.md, "Collectives"): for
// each call NCCL prices every algorithm (ring; tree for all-reduce) and
// protocol (LL, LL128, Simple) with a fixed latency, a latency per ring
// step or tree level by the link it crosses, and the protocol's share of
// the link's bus bandwidth, and runs the fastest. The figures are NCCL's
// own (hardware.NCCLProtocols); the bus bandwidth is the group's slowest
// link (group).

// group is where a process group of n ranks a stride apart sits: on how
// many nodes, how many ranks on each, and the bus bandwidth of its
// slowest link.
type group struct {
	n, nodes, perNode int
	bw                float64 // a ring's bus bandwidth, bytes/s: the slower of intra and inter
	intra, inter      float64 // the node's links and its share of the network (+Inf within a node)
	pci               bool    // the links inside a node are PCIe, not NVLink
}

// spansNodes reports whether a group of n consecutive ranks (stride 1) or
// of n ranks a stride apart leaves one node.
func (m *Model) spansNodes(n, stride int) bool {
	return n*stride > m.HW.GPUsPerNode || stride >= m.HW.GPUsPerNode && n > 1
}

// group places n ranks a stride apart. InterNodeBandwidth is each GPU's
// share of its node's NICs. A group of consecutive ranks that leaves the
// node holds every GPU of each node it touches: NCCL builds its rings so
// that each crosses between nodes on its own NIC (rail-optimised: GPU i
// of one node to GPU i of the next, through PXN when a GPU's own NIC is
// not on the rail), so a ring's inter-node hops run at the node's
// aggregate NIC bandwidth, bounded by NVLink inside the node. A group
// whose members sit on different nodes (HSDP's replicate group) is one of
// GPUsPerNode such groups running at once, each on its share of the
// NICs.
func (m *Model) group(n, stride int) group {
	gpn := max(m.HW.GPUsPerNode, 1)
	g := group{n: n, nodes: 1, perNode: n,
		intra: m.HW.IntraNodeBandwidth * m.Cal.BusEfficiency, inter: math.Inf(1),
		pci: m.HW.IntraNodeBandwidth <= pcieX16}
	if m.spansNodes(n, stride) {
		share := m.HW.InterNodeBandwidth * m.Cal.NICEfficiency
		switch {
		case stride >= gpn:
			g.nodes, g.perNode = n, 1
			g.inter = share
		default:
			g.nodes = (n*stride + gpn - 1) / gpn
			g.perNode = max(n/g.nodes, 1)
			g.inter = share * float64(gpn/stride)
		}
	}
	g.bw = math.Min(g.intra, g.inter)
	if g.perNode == 1 {
		// One rank per node: no link inside a node is crossed.
		g.bw = g.inter
	}
	return g
}

// pcieX16 is the fastest intra-node link NCCL treats as PCIe (a Gen5 x16
// link, hardware's "pcie5"): a node whose GPUs talk over nothing faster
// pays PCIe's step latencies.
var pcieX16, _ = hardware.Link("pcie5")

// AllGather moves (n-1)/n of the full buffer through each GPU's link in
// n-1 ring steps (nccl-tests: busbw = algbw·(n-1)/n).
func (m *Model) AllGather(bytes int64, n, stride int) float64 {
	if n <= 1 {
		return m.Copy(bytes / int64(max(n, 1)))
	}
	t, _ := m.collective(OpAllGather, bytes, n, stride)
	return t
}

// ReduceScatter costs as AllGather; the reduction runs at memory speed
// inside the copy.
func (m *Model) ReduceScatter(bytes int64, n, stride int) float64 {
	return m.AllGather(bytes, n, stride)
}

// AllReduce is the fastest of a ring (a reduce-scatter and an all-gather,
// 2(n-1) steps) and a tree (up and down, 2·log2 of the nodes levels
// across them), each in its fastest protocol.
func (m *Model) AllReduce(bytes int64, n, stride int) float64 {
	if n <= 1 {
		return 0
	}
	t, _ := m.collective(OpAllReduce, bytes, n, stride)
	return t
}

// collective is the time of an all-gather, reduce-scatter or all-reduce
// of bytes over n > 1 ranks a stride apart, and the part of it that is
// latency (what sharing a link does not stretch).
func (m *Model) collective(kind OpKind, bytes int64, n, stride int) (t, latency float64) {
	g := m.group(n, stride)
	steps, inter := n-1, g.nodes-1
	if kind == OpAllReduce {
		steps, inter = 2*steps, 2*inter
	}
	// The bytes through each rank's link: the bus-bandwidth convention.
	moved := float64(bytes) * float64(steps) / float64(n)
	if m.Cal.AlphaOnly {
		// One latency per ring step, the link at its bus bandwidth.
		alpha := m.Cal.AlphaIntra
		if g.nodes > 1 {
			alpha = m.Cal.AlphaInter
		}
		lat := float64(steps) * alpha
		return lat + moved/g.bw, lat
	}
	// The calibration's Simple steps are NCCL's by default; a profile
	// that gives its fabric's own moves every protocol's step by as much,
	// as NCCL adds a network's own latency to each protocol's.
	simple := hardware.NCCLProtocols[len(hardware.NCCLProtocols)-1]
	dIntra, dNet := m.Cal.AlphaIntra-simple.Ring.NVLink, m.Cal.AlphaInter-simple.Ring.Net
	t = math.Inf(1)
	for _, p := range hardware.NCCLProtocols {
		intra, net := math.Max(p.Ring.NVLink+dIntra, 0), math.Max(p.Ring.Net+dNet, 0)
		if g.pci {
			intra = p.Ring.PCI
		}
		if g.nodes > 1 {
			intra = math.Max(intra, p.NetOverhead)
		}
		lat := p.RingBase + float64(steps-inter)*intra + float64(inter)*net
		if kind == OpAllReduce && p.Name == "Simple" && g.nodes > 1 && float64(bytes)/float64(n) >= 64*maxChannels {
			lat *= hardware.RingPlateau
		}
		if x := lat + moved/capBW(g.bw*p.RingBW, p, g.nodes); x < t {
			t, latency = x, lat
		}
		if kind != OpAllReduce {
			continue
		}
		// Tree: each byte goes up the tree and down again through every
		// rank's link, at the protocol's tree share of the bandwidth.
		// Between two nodes one is the root and the other a leaf, and
		// each NIC carries the reduction up one way and the result down
		// the other at once: NCCL prices a two-node tree at its
		// intra-node graph's bandwidth (ncclTopoTuneModel: bwIntra for
		// up to 2 nodes), which is twice the network's for the same
		// bytes.
		share, bw := p.TreeBW, g.bw
		switch {
		case g.nodes == 1:
			share = p.TreeBWIntra
		case g.nodes == 2:
			bw = math.Min(g.intra, 2*g.inter)
		}
		ti := p.Tree.NVLink
		if g.pci {
			ti = p.Tree.PCI
		}
		lat = p.TreeBase + 2*(float64(g.perNode-1)*ti+float64(log2i(g.nodes))*p.Tree.Net)
		if x := lat + 2*float64(bytes)/capBW(bw*share, p, g.nodes); x < t {
			t, latency = x, lat
		}
	}
	return t, latency
}

// maxChannels is the channel count a large collective spreads over
// (NCCL's MAXCHANNELS, 32): NCCL's ring plateau applies once each rank's
// slice per channel reaches 64 bytes.
const maxChannels = 32

// capBW bounds a protocol's bus bandwidth by its ceiling for the node
// count (LL's llMaxBws: one node, two, more).
func capBW(bw float64, p hardware.Protocol, nodes int) float64 {
	c := p.MaxBW[min(nodes, 3)-1]
	if c > 0 && bw > c {
		return c
	}
	return bw
}

// log2i is floor(log2 n), NCCL's tree depth over n nodes.
func log2i(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// linkClass says which links a collective over n ranks a stride apart
// uses (1 within a node, 2 across nodes) and how much of its time is
// latency, which sharing the link does not stretch.
func (m *Model) linkClass(o *Op, stride int) (int, float64) {
	_, lat := m.collective(o.Kind, o.Bytes, int(o.PGSize), stride)
	if m.spansNodes(int(o.PGSize), stride) {
		return 2, lat
	}
	return 1, lat
}
