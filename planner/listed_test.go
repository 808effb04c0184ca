package planner

import (
	"slices"
	"strings"
	"testing"
)

const listedModel = `
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = 2
[policy]
units = UNITS
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
`

// TestListedGroups: an array inside policy.units is one unit of every
// module it matches, fully_shard([norm, output]) as accelerate calls it,
// with the parameters of both in one group; misuse is refused by name.
func TestListedGroups(t *testing.T) {
	for _, tc := range []struct {
		units string
		want  [][]string // each group's modules
		err   string
	}{
		{units: `["layers.*", "emb", ["norm", "output"]]`, want: [][]string{{""}, {"emb"}, {"layers.0"}, {"layers.1"}, {"norm", "output"}}},
		{units: `[["emb", "layers.*"]]`, want: [][]string{{""}, {"emb", "layers.0", "layers.1"}}},
		{units: `[["norm", "output"], ["output"]]`, err: `module "output" is in two groups`},
		{units: `[["layers", "layers.0"]]`, err: `holds "layers" and "layers.0"`},
		{units: `[[""]]`, err: "cannot hold the root"},
	} {
		m := mustLoadText(t, "m.toml", strings.Replace(listedModel, "UNITS", tc.units, 1))
		p, err := Plan(m, Options{CheckEveryPass: true})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want an error with %q", tc.units, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.units, err)
		}
		var got [][]string
		for _, g := range p.Groups {
			got = append(got, g.Modules)
		}
		slices.SortFunc(got, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: groups %q, want %q", tc.units, got, tc.want)
		}
		if tc.units[1] == '"' {
			last := p.Groups[len(p.Groups)-1]
			if len(last.Params) != 2 { // norm.weight, output.weight
				t.Errorf("%s: the listed group has %d parameters, want 2", tc.units, len(last.Params))
			}
		}
	}
}
