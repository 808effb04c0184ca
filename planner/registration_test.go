package planner

import (
	"strings"
	"testing"
)

// FSDP2's flat-buffer order is the module post-order over children() and
// named_parameters(recurse=False), both of which follow the order modules
// register in __init__, not the order forward calls them.
func TestParamOrderFollowsRegistration(t *testing.T) {
	cases := []struct {
		name, modules, want string
	}{{
		name: "torchtitan block and FeedForward",
		modules: `
[[module]]
name = "layers"
repeat = 1
block = "decoder"
[block.decoder]
register = ["attention", "feed_forward", "attention_norm", "ffn_norm"]
[[block.decoder.module]]
name = "attention_norm"
kind = "norm"
dim = 8
[[block.decoder.module]]
name = "attention"
kind = "attention"
dim = 8
heads = 2
[[block.decoder.module]]
name = "ffn_norm"
kind = "norm"
dim = 8
[[block.decoder.module]]
name = "feed_forward"
kind = "mlp"
dim = 8
hidden = 16
`,
		want: "layers.0.attention.wq.weight layers.0.attention.wk.weight layers.0.attention.wv.weight layers.0.attention.wo.weight " +
			"layers.0.feed_forward.w1.weight layers.0.feed_forward.w2.weight layers.0.feed_forward.w3.weight " +
			"layers.0.attention_norm.weight layers.0.ffn_norm.weight",
	}, {
		name: "Hugging Face LlamaMLP",
		modules: `
[[module]]
name = "layers"
repeat = 1
[[module.module]]
name = "mlp"
kind = "mlp"
dim = 8
hidden = 16
names = { gate = "gate_proj", up = "up_proj", down = "down_proj" }
`,
		want: "layers.0.mlp.gate_proj.weight layers.0.mlp.up_proj.weight layers.0.mlp.down_proj.weight",
	}, {
		name: "declaration order without register",
		modules: `
[[module]]
name = "layers"
repeat = 1
[[module.module]]
name = "norm"
kind = "norm"
dim = 8
[[module.module]]
name = "proj"
kind = "linear"
in = 8
out = 8
`,
		want: "layers.0.norm.weight layers.0.proj.weight",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustPlan(t, tinyModel(t, "world_size = 2", `units = "blocks"`, c.modules))
			var names []string
			for _, gp := range group(t, p, "layers.0").Params {
				names = append(names, gp.Name)
			}
			if got := strings.Join(names, " "); got != c.want {
				t.Errorf("order\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// Registration order changes where parameters sit, never the forward
// order: the norm still runs before the attention that reads it.
func TestRegisterKeepsForwardOrder(t *testing.T) {
	m := tinyModel(t, "world_size = 2", `units = "blocks"`, `
[[module]]
name = "layers"
repeat = 1
register = ["proj", "norm"]
[[module.module]]
name = "norm"
kind = "norm"
dim = 8
[[module.module]]
name = "proj"
kind = "linear"
in = 8
out = 8
`)
	var order []string
	for _, id := range m.Forward {
		order = append(order, m.Modules[id].Name)
	}
	if got := strings.Join(order, " "); !strings.Contains(got, "layers.0.norm layers.0.proj") {
		t.Errorf("forward order %q: norm must run before proj", got)
	}
}
