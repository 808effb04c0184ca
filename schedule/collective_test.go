package schedule

import (
	"math"
	"testing"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
)

// h100Nodes is a cluster of 8-GPU H100 nodes, one 400 Gb/s NIC per GPU.
func h100Nodes() *Model {
	return &Model{HW: Hardware{HBMBandwidth: 3.35e12, IntraNodeBandwidth: 450e9, InterNodeBandwidth: 50e9, GPUsPerNode: 8},
		Cal: hardware.DefaultCalibration}
}

// TestAllReduceRespectsBound: no all-reduce beats nccl-tests' bound,
// 2(n-1)/n of the buffer through each rank's link (the tree too), and a
// large one grows with the group towards it, where the earlier tree
// moved S/bw and did not grow.
func TestAllReduceRespectsBound(t *testing.T) {
	m := h100Nodes()
	const S = 1 << 30
	prev := 0.0
	for _, n := range []int{2, 4, 8, 16, 64, 256} {
		g := m.group(n, 8)
		bound := 2 * float64(n-1) / float64(n) * S / g.bw
		got := m.AllReduce(S, n, 8)
		if got < bound {
			t.Errorf("all-reduce of 1 GiB over %d nodes: %.3f ms, below the bound %.3f ms", n, got*1e3, bound*1e3)
		}
		if got <= prev {
			t.Errorf("all-reduce over %d nodes (%.3f ms) is not slower than over fewer (%.3f ms)", n, got*1e3, prev*1e3)
		}
		prev = got
	}
}

// TestProtocolBySize: NCCL's choice, as the model makes it: a small
// all-gather costs LL's latency (base and steps), far below Simple's; a
// large one runs at the link's full bus bandwidth plus Simple's latency.
func TestProtocolBySize(t *testing.T) {
	m := h100Nodes()
	ll, simple := hardware.NCCLProtocols[0], hardware.NCCLProtocols[2]
	small, _ := m.collective(OpAllGather, 1024, 8, 1)
	if want := ll.RingBase + 7*ll.Ring.NVLink; small > want*1.01 {
		t.Errorf("1 KiB all-gather over 8: %.2f µs, want LL's %.2f µs", small*1e6, want*1e6)
	}
	const S = 436224000
	large, lat := m.collective(OpAllGather, S, 8, 1)
	wantLat := simple.RingBase + 7*m.Cal.AlphaIntra
	if math.Abs(lat-wantLat) > 1e-12 || math.Abs(large-(wantLat+7.0/8*S/(450e9*0.8))) > 1e-12 {
		t.Errorf("416 MiB all-gather over 8: %.2f µs with %.2f µs latency, want Simple's %.2f µs latency", large*1e6, lat*1e6, wantLat*1e6)
	}
	// Across 16 nodes only the 15 inter-node steps pay the network, and
	// with 127 steps LL128's lower latencies outweigh its 0.92 of the
	// bandwidth: 287 µs of latency, where Simple's would be 599.
	ll128 := hardware.NCCLProtocols[1]
	_, lat = m.collective(OpAllGather, S, 128, 1)
	if want := ll128.RingBase + 112*ll128.Ring.NVLink + 15*ll128.Ring.Net; math.Abs(lat-want) > 1e-12 {
		t.Errorf("latency over 128 ranks on 16 nodes %.1f µs, want LL128's %.1f µs", lat*1e6, want*1e6)
	}
}

// TestGroupPlacement: where a group's ranks sit decides its bandwidth.
func TestGroupPlacement(t *testing.T) {
	m := h100Nodes()
	nic := 50e9 * m.Cal.NICEfficiency
	nvl := 450e9 * m.Cal.BusEfficiency
	for _, c := range []struct {
		n, stride, nodes, perNode int
		bw                        float64
	}{
		{8, 1, 1, 8, nvl},                   // one node
		{16, 1, 2, 8, math.Min(nvl, 8*nic)}, // consecutive ranks: the node's NICs, bounded by NVLink
		{4, 8, 4, 1, nic},                   // HSDP replicate: one rank per node, its own NIC
		{4, 4, 2, 2, math.Min(nvl, 2*nic)},  // two ranks per node: 2 of the 8 NICs
	} {
		g := m.group(c.n, c.stride)
		if g.nodes != c.nodes || g.perNode != c.perNode || math.Abs(g.bw-c.bw) > 1 {
			t.Errorf("group(%d, %d) = %d nodes × %d at %.1f GB/s, want %d × %d at %.1f", c.n, c.stride, g.nodes, g.perNode, g.bw/1e9, c.nodes, c.perNode, c.bw/1e9)
		}
	}
}

// TestRingLatencyFromProfile: a profile's ring_latency_inter (a slower
// fabric's network step) reaches the cost model and moves every
// protocol's network step, so a small all-gather across nodes, which
// runs LL, slows by the difference on each of its inter-node steps.
func TestRingLatencyFromProfile(t *testing.T) {
	m := h100Nodes()
	before := m.AllGather(1<<10, 128, 1)
	if err := ApplyProfile(&m.Cal, []ir.ProfileValue{{Name: hardware.KeyRingLatencyInter, Value: 114e-6}}); err != nil {
		t.Fatal(err)
	}
	after := m.AllGather(1<<10, 128, 1)
	if d := after - before; math.Abs(d-15*100e-6) > 1e-9 {
		t.Errorf("1 KiB all-gather over 16 nodes: %.1f µs → %.1f µs, want 15 inter-node steps × 100 µs more", before*1e6, after*1e6)
	}
}
