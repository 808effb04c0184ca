package schedule_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// convergenceCases are the zoo and synthetic communication-bound plans:
// a stack of linears whose collectives overlap on one link class, with
// every rank on its own node (inter-node ring) or eight to a node, HSDP.
func convergenceCases(t *testing.T) map[string]*schedule.Plan {
	t.Helper()
	out := map[string]*schedule.Plan{}
	for _, name := range plans.Names() {
		src, file, _ := plans.Source(name)
		m, err := ir.Load(file, src)
		if err != nil {
			t.Fatal(err)
		}
		p, err := planner.Plan(m, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	synthetic := []struct {
		name                 string
		layers, width, seq   int
		world, gpusPerNode   int
		mesh, reshard, rsBuf string
	}{
		{"ring-across-nodes", 8, 8192, 1, 8, 1, "", "true", "1"},
		{"ring-across-nodes-2rs", 8, 8192, 64, 16, 1, "", "true", "2"},
		{"hsdp-64", 16, 4096, 512, 64, 8, "mesh = { replicate = 8, shard = 8 }\n", "false", "2"},
		{"fsdp-64-noreshard", 16, 4096, 256, 64, 8, "", "false", "1"},
		// Shard and replicate groups both cross nodes: HSDP's all-reduce
		// shares the NICs with the shard group's collectives (one
		// communicator's own collectives never overlap).
		{"hsdp-both-across-nodes", 8, 8192, 64, 16, 4, "mesh = { replicate = 2, shard = 8 }\n", "true", "1"},
	}
	for _, c := range synthetic {
		src := fmt.Sprintf(`
[train]
micro_batch = 1
seq_len = %d
[cluster]
gpu = "h100-sxm"
world_size = %d
gpus_per_node = %d
%s[policy]
param_dtype = "bf16"
reduce_dtype = "fp32"
reshard_after_forward = %s
reduce_scatter_buffers = %s
[[module]]
name = "layers"
repeat = %d
[[module.module]]
name = "ff"
kind = "linear"
in = %d
out = %d
`, c.seq, c.world, c.gpusPerNode, c.mesh, c.reshard, c.rsBuf, c.layers, c.width, c.width)
		m, err := ir.Load(c.name+".toml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p, err := planner.Plan(m, planner.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		out[c.name] = p
	}
	return out
}

// TestLinkSharingConverges: the simulation's figures do not move when link
// sharing is solved far tighter and given far more rounds.
func TestLinkSharingConverges(t *testing.T) {
	for name, p := range convergenceCases(t) {
		t.Run(name, func(t *testing.T) {
			m := schedule.NewModel(p)
			got, rounds, err := schedule.SimulateRounds(p, m, 1e-6, 400)
			if err != nil {
				t.Fatal(err)
			}
			tight, tightRounds, err := schedule.SimulateRounds(p, m, 1e-12, 100000)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("step %.6g s, exposed %.6g s after %d rounds (%d at 1e-12)", got.StepTime, got.ExposedComm, rounds, tightRounds)
			for _, f := range []struct {
				what      string
				got, want float64
			}{
				{"step time", got.StepTime, tight.StepTime},
				{"exposed communication", got.ExposedComm, tight.ExposedComm},
				{"CPU time", got.CPUTime, tight.CPUTime},
			} {
				if math.Abs(f.got-f.want) > 1e-5*math.Max(f.want, 1e-9) {
					t.Errorf("%s %.9g s at tolerance 1e-6, %.9g s at 1e-12", f.what, f.got, f.want)
				}
			}
			if got.PeakReserved != tight.PeakReserved {
				t.Errorf("peak %d bytes at 1e-6, %d at 1e-12", got.PeakReserved, tight.PeakReserved)
			}
		})
	}
}

// TestLinkSharingBound: a plan that needs rounds to settle is an error
// when it is not given them, never a figure.
func TestLinkSharingBound(t *testing.T) {
	p := convergenceCases(t)["hsdp-both-across-nodes"]
	m := schedule.NewModel(p)
	_, rounds, err := schedule.SimulateRounds(p, m, 1e-6, 400)
	if err != nil || rounds < 2 {
		t.Fatalf("%d rounds, %v: want a plan that needs rounds", rounds, err)
	}
	if _, _, err := schedule.SimulateRounds(p, m, 1e-6, 1); err == nil {
		t.Fatal("one round settled a plan that needs several")
	}
}

// TestLinkSharingSkipsIdleRounds: plans whose collectives never share a
// link settle without a round of sharing, and their figures are those of
// the plain run.
func TestLinkSharingSkipsIdleRounds(t *testing.T) {
	cases := convergenceCases(t)
	for _, name := range []string{"llama3-8b-lora", "fsdp-64-noreshard"} {
		p := cases[name]
		sim, rounds, err := schedule.SimulateRounds(p, schedule.NewModel(p), 1e-6, 0)
		if err != nil || rounds != 0 {
			t.Errorf("%s: %d rounds, %v; want none", name, rounds, err)
			continue
		}
		if sim.LinkShareRounds != 0 {
			t.Errorf("%s: the simulation says %d rounds", name, sim.LinkShareRounds)
		}
	}
}

// TestKernelByKind: a compute op's GEMMs, attention core and element-wise
// traffic are charged at their own rates, one after the other: forward
// element-wise kernels and a backward's recompute at the forward share,
// gradient kernels at the backward share.
func TestKernelByKind(t *testing.T) {
	m := &schedule.Model{Cal: hardware.DefaultCalibration}
	m.Cal.Launch, m.Cal.HalfEfficiencyTime = 0, 0
	m.Cal.ElementwiseEfficiency = 0.5 // below the copies', so neither share is capped
	m.HW.PeakFLOPS = make([]float64, int(ir.BF16)+1)
	m.HW.PeakFLOPS[ir.BF16] = 1e15
	m.HW.HBMBandwidth = 2e12
	fwd, bwd := m.Cal.ElementwiseShares()
	if !(fwd > 0.5 && bwd < 0.5) {
		t.Fatalf("element-wise shares %g forward, %g backward around 0.5", fwd, bwd)
	}
	o := schedule.Op{Kind: schedule.OpForward, DType: ir.BF16, FLOPs: 3e12, AttnFLOPs: 1e12, ElemBytes: 4e9}
	want := 2e12/(1e15*m.Cal.MaxEfficiency) + 1e12/(1e15*m.Cal.AttentionForward) + 4e9/(2e12*fwd)
	if got := m.Kernel(&o, nil, 0); math.Abs(got-want) > 1e-12 {
		t.Errorf("forward %g s, want %g", got, want)
	}
	o.Kind = schedule.OpBackward
	want = 2e12/(1e15*m.Cal.MaxEfficiency) + 1e12/(1e15*m.Cal.AttentionBackward) + 4e9/(2e12*bwd)
	if got := m.Kernel(&o, nil, 0); math.Abs(got-want) > 1e-12 {
		t.Errorf("backward %g s, want %g", got, want)
	}
	want = 2e12/(1e15*m.Cal.MaxEfficiency) + 1e12/(1e15*m.Cal.AttentionBackward) + 1e9/(2e12*fwd) + 3e9/(2e12*bwd)
	if got := m.Kernel(&o, nil, 1e9); math.Abs(got-want) > 1e-12 {
		t.Errorf("backward recomputing 1 GB %g s, want %g", got, want)
	}
}

// TestCommunicatorRunsInLaunchOrder: NCCL runs one communicator's
// operations one at a time in launch order, whatever streams they were
// launched on, so in the simulated timeline the collectives of one process
// group never overlap and start in program order (a backward prefetch
// queues behind the reduce-scatter launched before it).
func TestCommunicatorRunsInLaunchOrder(t *testing.T) {
	overlapped := 0
	for name, p := range convergenceCases(t) {
		sim, err := schedule.Simulate(p, schedule.NewModel(p))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		last := map[schedule.ProcessGroup]int{}
		for i := range p.Ops {
			o := &p.Ops[i]
			if (o.Kind != schedule.OpAllGather && o.Kind != schedule.OpReduceScatter && o.Kind != schedule.OpAllReduce) || o.PGSize < 2 {
				continue
			}
			if j, ok := last[o.PG]; ok && sim.Ops[i].Start < sim.Ops[j].End {
				overlapped++
				if overlapped <= 3 {
					t.Errorf("%s: op %d (%s) starts at %.6f s, before op %d (%s) on the same communicator ends at %.6f s",
						name, i, o.Kind, sim.Ops[i].Start, j, p.Ops[j].Kind, sim.Ops[j].End)
				}
			}
			last[o.PG] = i
		}
	}
}
