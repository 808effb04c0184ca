package ir

import (
	"fmt"
	"strings"
	"testing"
)

// TestKindHeldChildren: a module of a kind may declare children beside
// the ones its kind makes (T5's first attention holds
// relative_attention_bias): they register after the kind's, hold
// parameters only, and change neither the module's cost nor the
// dataflow; inputs, repeat, costs, checkpoint or output on them are
// refused, naming the child.
func TestKindHeldChildren(t *testing.T) {
	load := func(extra string) (*Model, error) {
		src := fmt.Sprintf(`[train]
seq_len = 128
[cluster]
gpu = "h100-sxm"
world_size = 8
[[module]]
name = "norm"
kind = "norm"
dim = 64
[[module]]
name = "SelfAttention"
kind = "attention"
dim = 64
heads = 4
causal = false
names = {q = "q", k = "k", v = "v", o = "o"}
%s
[[module]]
name = "out"
kind = "linear"
in = 64
out = 8
`, extra)
		return Load("a.toml", []byte(src))
	}
	plain, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	held, err := load(`[[module.module]]
name = "relative_attention_bias"
kind = "embedding"
num = 32
dim = 4`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range held.Params {
		names = append(names, fmt.Sprintf("%s %v", p.Name, p.Shape))
	}
	want := "norm.weight [64] SelfAttention.q.weight [64 64] SelfAttention.k.weight [64 64] SelfAttention.v.weight [64 64] " +
		"SelfAttention.o.weight [64 64] SelfAttention.relative_attention_bias.weight [32 4] out.weight [8 64]"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("parameters\n%s, want\n%s", got, want)
	}
	if d := held.Stats().Params - plain.Stats().Params; d != 32*4 {
		t.Errorf("the held embedding adds %d parameters, want 128", d)
	}
	cost := func(m *Model, name string) Cost {
		id, err := m.ModuleByName(name)
		if err != nil {
			t.Fatal(err)
		}
		mod := m.Modules[id]
		if name == "SelfAttention.relative_attention_bias" && mod.Compute {
			t.Errorf("%s is a compute module; it only holds parameters", name)
		}
		return mod.Cost
	}
	for _, name := range []string{"SelfAttention", "out"} {
		p, h := cost(plain, name), cost(held, name)
		if p.FlopsFwd != h.FlopsFwd || p.FlopsBwd != h.FlopsBwd || p.ActivationBytes != h.ActivationBytes {
			t.Errorf("%s: cost %v/%v/%v with the held child, %v/%v/%v without", name, h.FlopsFwd, h.FlopsBwd, h.ActivationBytes,
				p.FlopsFwd, p.FlopsBwd, p.ActivationBytes)
		}
	}
	cost(held, "SelfAttention.relative_attention_bias")
	for _, key := range []string{"inputs = [\"norm\"]", "repeat = 2", "flops_fwd = 10", "checkpoint = true", "output = \"own\""} {
		_, err := load("[[module.module]]\nname = \"relative_attention_bias\"\nkind = \"embedding\"\nnum = 32\ndim = 4\n" + key)
		if err == nil || !strings.Contains(err.Error(), `module "relative_attention_bias" inside module "SelfAttention" of kind attention`) {
			t.Errorf("%s on a held child: %v, want a refusal naming it", key, err)
		}
	}
	if _, err := load("[[module.module]]\nname = \"q\"\nkind = \"embedding\"\nnum = 32\ndim = 4"); err == nil || !strings.Contains(err.Error(), `"SelfAttention.q" is declared twice`) {
		t.Errorf("a held child named like the kind's: %v, want a refusal", err)
	}
}
