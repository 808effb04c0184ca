package ir

import "testing"

// output = "own" marks containers whose forward returns a tensor of its
// own; on a block it applies to every module made from it, on a repeated
// module to each instance, and a module's own key wins over its block's.
func TestOwnOutput(t *testing.T) {
	src := `
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = 2
[block.b]
output = "own"
[[block.b.module]]
name = "norm"
kind = "norm"
dim = 8
[[module]]
name = "layers"
repeat = 2
block = "b"
[[module]]
name = "shared"
block = "b"
output = "child"
[[module]]
name = "seq"
output = "own"
[[module.module]]
name = "lin"
kind = "linear"
in = 8
out = 8
`
	m, err := Load("own.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"": false, "layers": false, "layers.0": true, "layers.1": true, "layers.0.norm": false,
		"shared": false, "seq": true, "seq.lin": false}
	for name, own := range want {
		id, err := m.ModuleByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Modules[id].OwnOutput; got != own {
			t.Errorf("%q: OwnOutput = %v, want %v", name, got, own)
		}
	}
}
