package planner

import (
	"testing"

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
