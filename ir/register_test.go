package ir

import (
	"strings"
	"testing"
)

// A top-level register gives the root's children in registration order,
// as a container's does: PyTorch's order where forward calls them in
// another (a model whose forward runs a later-registered module first).
func TestRootRegister(t *testing.T) {
	const head = `
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = 2
[[module]]
name = "proj"
kind = "linear"
in = 8
out = 8
[[module]]
name = "embed"
kind = "embedding"
num = 16
dim = 8
inputs = []
`
	m, err := Load("root.toml", []byte(`register = ["embed", "proj"]`+head))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range m.Modules[0].Registered {
		got = append(got, m.Modules[c].Name)
	}
	if strings.Join(got, " ") != "embed proj" {
		t.Errorf("root registered %v, want [embed proj]", got)
	}
	for _, c := range []struct{ reg, want string }{
		{`register = ["embed"]`, `"proj" is missing`},
		{`register = ["embed", "proj", "head"]`, `"head", which is not a child`},
	} {
		_, err := Load("root.toml", []byte(c.reg+head))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.reg, err, c.want)
		}
	}
}
