package torchgen

import (
	"slices"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/internal/zootest"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

func zooFullPlan(t *testing.T, name string, edits ...zootest.Edit) *schedule.Plan {
	t.Helper()
	file, text, err := zooText(name, edits...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m, err := ir.Load(file, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTorchtitanUnits applies torchtitan's grouping (TitanUnit's rules,
// docs/torchtitan.md) to the zoo's Llama plans. Every transformer block is
// the same unit, with the same reshard_after_forward, in both; the ends
// differ: torchtitan wraps tok_embeddings alone and norm with the output
// projection, where the zoo's plans keep what is not a block in the root
// (llama3-8b, 70b) or wrap tok_embeddings and output and keep norm in the
// root (405b). Planned with units = ["tok_embeddings", "layers.*"], the
// parameters fall into torchtitan's groups and the one difference left is
// that norm+output is the root: fsdpc has no unit of two sibling modules
// below the root (fully_shard([norm, output])).
func TestTorchtitanUnits(t *testing.T) {
	endsInRoot := []string{
		"torchtitan's unit tok_embeddings (tok_embeddings.weight) is no unit of the plan",
		"torchtitan's unit norm+output (norm.weight, output.weight) is no unit of the plan",
		"the plan's unit (root) (tok_embeddings.weight, norm.weight, output.weight) is no unit of torchtitan",
	}
	titanUnits := zootest.Policy("units", `["tok_embeddings", "layers.*"]`)
	// torchtitan's own grouping, written out: norm and output one unit
	// (a listed group, fully_shard([norm, output])), the root empty.
	titanGroups := zootest.Policy("units", `["tok_embeddings", "layers.*", ["norm", "output"]]`)
	// and, as torchtitan's "default" policy, norm+output kept gathered
	// after forward (backward needs it at once).
	titanLast := func(src string) string {
		return src + "\n[[policy.override]]\nmatch = \"norm\"\nreshard_after_forward = false\n"
	}
	for _, c := range []struct {
		model string
		edits []zootest.Edit
		want  []string
	}{
		{"llama3-8b", nil, endsInRoot},
		{"llama3-70b", nil, endsInRoot},
		{"llama3.1-405b", nil, []string{
			"torchtitan's unit norm+output (norm.weight, output.weight) is no unit of the plan",
			"the plan's unit (root) (norm.weight) is no unit of torchtitan",
			"the plan's unit output (output.weight) is no unit of torchtitan",
		}},
		{"llama3-8b", []zootest.Edit{titanUnits}, []string{"unit norm+output is the root in the plan only"}},
		{"llama3-8b", []zootest.Edit{titanGroups, titanLast}, nil},
		{"llama3-70b", []zootest.Edit{titanGroups, titanLast}, nil},
		{"llama3-70b", []zootest.Edit{titanUnits}, []string{"unit norm+output is the root in the plan only"}},
	} {
		p := zooFullPlan(t, c.model, c.edits...)
		units, err := TorchtitanUnits(p, "default")
		if err != nil {
			t.Fatal(err)
		}
		// The blocks: one unit each, the same parameters in the same
		// order, resharded after forward in both.
		blocks := 0
		for _, u := range units {
			if !strings.HasPrefix(u.Name, "layers.") {
				continue
			}
			blocks++
			i := slices.IndexFunc(p.Groups, func(g schedule.Group) bool { return g.Name == u.Name })
			if i < 0 {
				t.Errorf("%s: torchtitan's unit %s is no group of the plan", c.model, u.Name)
				continue
			}
			var names []string
			for _, gp := range p.Groups[i].Params {
				names = append(names, gp.Name)
			}
			if !slices.Equal(names, u.Params) || !u.Reshard || p.Groups[i].Policy.Reshard != schedule.ReshardTrue {
				t.Errorf("%s: block %s: torchtitan %v reshard %t, plan %v", c.model, u.Name, u.Params, u.Reshard, names)
			}
		}
		if want := strings.Count(strings.Join(p.Modules, " "), ".attention "); blocks == 0 || want > 0 && blocks != want {
			t.Errorf("%s: %d blocks among torchtitan's units, the plan has %d attention modules", c.model, blocks, want)
		}
		for _, pol := range []string{"default", "always"} {
			got, err := CompareTorchtitanUnits(p, pol)
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if pol == "always" && len(c.edits) > 0 {
				// Under "always" torchtitan reshards norm+output too; the
				// plan's root never reshards after forward.
				want = append(slices.Clone(want), "unit norm+output: reshard_after_forward false in the plan, true in torchtitan")
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s %v %s: differences\n  %s\nwant\n  %s", c.model, c.edits, pol, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		}
	}
}

func TestTorchtitanUnitsRefuse(t *testing.T) {
	p := zooFullPlan(t, "gpt2-124m")
	if _, err := TorchtitanUnits(p, "default"); err == nil || !strings.Contains(err.Error(), "not a torchtitan decoder") {
		t.Errorf("gpt2: %v", err)
	}
	if _, err := TorchtitanUnits(zooFullPlan(t, "llama3-8b"), "sometimes"); err == nil {
		t.Error("an unknown policy was accepted")
	}
}
