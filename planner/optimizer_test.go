package planner

import (
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestOptimizerTraffic: the fused AdamW step moves 3 parameter-sized and
// 2 state-sized accesses per sharded element, the foreach one the 6 and
// 14 of its eight passes (optimizerTraffic): 28 and 80 B with fp32
// parameters and states. The plan records which it priced
// (Train.OptimizerImplementation), for the trainer that applies it.
func TestOptimizerTraffic(t *testing.T) {
	for _, c := range []struct {
		name    string
		replace []string
		perElem int64
		impl    string
	}{
		{"fused (default)", nil, 28, "fused"},
		{"foreach", []string{"[train]\n", "[train]\noptimizer_implementation = \"foreach\"\n"}, 80, "foreach"},
		{"foreach, bf16 states", []string{"[train]\n", "[train]\noptimizer_implementation = \"foreach\"\noptimizer_state_bytes = 4\n"}, 6*4 + 7*4, "foreach"},
		// Clipping adds its norm pass and its multiply: 3 gradient-sized
		// accesses, 12 B an fp32 element (clipTraffic).
		{"fused, clipped", []string{"[train]\n", "[train]\nmax_grad_norm = 1.0\n"}, 28 + 12, "fused"},
		{"foreach, clipped", []string{"[train]\n", "[train]\noptimizer_implementation = \"foreach\"\nmax_grad_norm = 1.0\n"}, 80 + 12, "foreach"},
		{"clipping off", []string{"[train]\n", "[train]\nmax_grad_norm = 0\n"}, 28, "fused"},
		{"HSDP, clipped", []string{"[train]\n", "[train]\nmax_grad_norm = 1.0\n", "world_size = 8\n", "world_size = 8\nmesh = { replicate = 2, shard = 4 }\n"}, 28 + 12, "fused"},
		{"accumulating unsharded, clipped", []string{"[train]\n", "[train]\nmax_grad_norm = 1.0\naccumulate = \"unsharded\"\n"}, 28 + 12, "fused"},
	} {
		file, text := zooText("gpt2-124m", c.replace...)(t)
		p := mustPlan(t, mustLoadText(t, file, text))
		if p.Train.OptimizerImplementation != c.impl {
			t.Errorf("%s: the plan records %q, want %q", c.name, p.Train.OptimizerImplementation, c.impl)
		}
		n := 0
		for i := range p.Ops {
			o := &p.Ops[i]
			if o.Kind != schedule.OpOptimizer {
				continue
			}
			g := &p.Groups[o.Group]
			if g.Policy.Orig.Size() != 4 {
				t.Fatalf("%s: group %s keeps %s parameters; the test assumes fp32", c.name, g.Name, g.Policy.Orig)
			}
			if want := g.GradShardNumel * c.perElem; o.Bytes != want {
				t.Errorf("%s: group %s optimizer moves %d B, want %d (%d B × %d elements)", c.name, g.Name, o.Bytes, want, c.perElem, g.GradShardNumel)
			}
			n++
		}
		if n == 0 {
			t.Fatalf("%s: no optimizer step", c.name)
		}
	}
}

// TestClipTraffic: clipping reads every sharded gradient element once for
// the norm and reads and writes it for the multiply, in the gradients'
// dtype, whatever the threshold; 0 clips nothing.
func TestClipTraffic(t *testing.T) {
	for _, c := range []struct {
		name      string
		elems     int64
		gradSize  int64
		threshold float64
		want      int64
	}{
		{"fp32", 1000, 4, 1.0, 12000},
		{"bf16 (bf16 master weights)", 1000, 2, 1.0, 6000},
		{"fp64", 10, 8, 1.0, 240},
		{"any threshold", 1000, 4, 1e-3, 12000},
		{"off", 1000, 4, 0, 0},
		{"no elements", 0, 4, 1.0, 0},
	} {
		if got := clipTraffic(c.elems, c.gradSize, ir.Train{MaxGradNorm: c.threshold}); got != c.want {
			t.Errorf("%s: clipTraffic = %d B, want %d", c.name, got, c.want)
		}
	}
}
