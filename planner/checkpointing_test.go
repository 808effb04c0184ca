package planner

import (
	"strings"
	"testing"
)

// TestCheckpointingMatchesNoModule: a plan whose checkpointing mode makes
// no region says so among its warnings (DeepSeek's layers written one by
// one once saved every activation under "full"); a repeat makes regions
// and no warning.
func TestCheckpointingMatchesNoModule(t *testing.T) {
	const flat = `
[train]
seq_len = 64
checkpointing = "full"
[cluster]
gpu = "h100-sxm"
world_size = 8
[policy]
units = ["layers.*"]
[[module]]
name = "layers"
[[module.module]]
name = "0"
kind = "mlp"
dim = 64
hidden = 256
[[module.module]]
name = "1"
kind = "mlp"
dim = 64
hidden = 256
`
	repeated := strings.Replace(flat, "[[module.module]]\nname = \"0\"", "repeat = 2\nblock = \"b\"\n[block.b]\n[[block.b.module]]\nname = \"mlp\"", 1)
	repeated = strings.Replace(repeated, "[[module.module]]\nname = \"1\"\nkind = \"mlp\"\ndim = 64\nhidden = 256\n", "", 1)
	for _, tc := range []struct {
		name, src string
		warn      bool
	}{{"flat", flat, true}, {"repeated", repeated, false}} {
		p, err := Plan(mustLoadText(t, tc.name+".toml", tc.src), Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		found := false
		for _, w := range p.Warnings {
			found = found || strings.Contains(w, `train.checkpointing = "full" matches no module`)
		}
		if found != tc.warn {
			t.Errorf("%s: warned %v, want %v: %q", tc.name, found, tc.warn, p.Warnings)
		}
	}
}
