package planner

import (
	"slices"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// TestMergedUnitAtTheRootsTie: fully_shard([emb, output]) registers its
// post-backward only on emb's inputs (token ids), so it is deferred and
// reduces after the root in the final callback; at the output, where it
// and the root both end, its pre-backward fires first (inner first) and
// gathers it before the prefetch of the last layer. Both as FSDP2 2.14
// runs it (torchgen conformance case tied-merge-own-unit).
func TestMergedUnitAtTheRootsTie(t *testing.T) {
	m := mustLoadText(t, "m.toml", `
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = 2
[policy]
tied = "merge"
units = ["layers.*", "emb", "output"]
[[module]]
name = "emb"
kind = "embedding"
num = 33
dim = 8
[[module]]
name = "layers"
repeat = 2
kind = "linear"
in = 8
out = 8
[[module]]
name = "norm"
kind = "norm"
dim = 8
[[module]]
name = "output"
kind = "linear"
in = 8
out = 33
bias = false
tied_to = "emb.weight"
`)
	p, err := Plan(m, Options{CheckEveryPass: true})
	if err != nil {
		t.Fatal(err)
	}
	var gathers, reductions []string
	for _, o := range p.Ops {
		if o.Phase != schedule.PhaseBackward {
			continue
		}
		switch o.Kind {
		case schedule.OpAllGather:
			gathers = append(gathers, p.Groups[o.Group].Label())
		case schedule.OpReduceScatter:
			reductions = append(reductions, p.Groups[o.Group].Label())
		}
	}
	if want := []string{"emb", "layers.1", "layers.0"}; !slices.Equal(gathers, want) {
		t.Errorf("backward all-gathers %v, want %v", gathers, want)
	}
	if want := []string{"layers.1", "layers.0", "(root)", "emb"}; !slices.Equal(reductions, want) {
		t.Errorf("backward reduce-scatters %v, want %v", reductions, want)
	}
}
