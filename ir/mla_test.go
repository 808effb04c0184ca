package ir

import (
	"fmt"
	"testing"
)

// TestNewKindsCosts: multi-head latent attention, q/k norms and a fused
// gate_up projection declare FLOPs as the formulas in docs/model-format.md
// say: 2·T per weight of every projection, plus the attention core.
func TestNewKindsCosts(t *testing.T) {
	const B, S = 2, 8
	const T = B * S
	causalPairs := float64(S*(S+1)) / 2
	for _, c := range []struct {
		name, module string
		params       int64
		flops        float64
	}{
		{"mla with a query bottleneck", `kind = "mla"
dim = 64
heads = 4
q_lora_rank = 16
kv_lora_rank = 8
qk_nope_head_dim = 6
qk_rope_head_dim = 2
v_head_dim = 4`,
			// wq_a 64·16, q_norm 16, wq_b 16·4·8, wkv_a 64·10, kv_norm 8, wkv_b 8·4·10, wo 16·64
			64*16 + 16 + 16*32 + 64*10 + 8 + 8*40 + 16*64,
			2*T*float64(64*16+16*32+64*10+8*40+16*64) + 2*B*causalPairs*4*(8+4)},
		{"mla without one", `kind = "mla"
dim = 64
heads = 4
kv_lora_rank = 8
qk_nope_head_dim = 6
qk_rope_head_dim = 2
v_head_dim = 4
bias = true`,
			// wq 64·32, wkv_a 64·10 + 10, kv_norm 8, wkv_b 8·40, wo 16·64 + 64
			64*32 + 64*10 + 10 + 8 + 8*40 + 16*64 + 64,
			2*T*float64(64*32+64*10+8*40+16*64) + 2*B*causalPairs*4*(8+4)},
		{"attention with full q/k norms", `kind = "attention"
dim = 64
heads = 4
kv_heads = 2
qk_norm = "full"`,
			64*64 + 2*64*32 + 64*64 + 64 + 32,
			2*T*float64(64*64+2*64*32+64*64) + 4*B*causalPairs*4*16},
		{"fused gate_up", `kind = "mlp"
dim = 64
hidden = 96
fused_gate_up = true`,
			64*192 + 96*64,
			2 * T * float64(64*192+96*64)},
	} {
		src := fmt.Sprintf("[train]\nmicro_batch = %d\nseq_len = %d\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n[[module]]\nname = \"x\"\n%s\n", B, S, c.module)
		m, err := Load("k.toml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := m.Stats().Params; got != c.params {
			t.Errorf("%s: %d parameters, want %d", c.name, got, c.params)
		}
		if got := m.Modules[mustID(t, m, "x")].Cost.FlopsFwd; got != c.flops {
			t.Errorf("%s: forward FLOPs %g, want %g", c.name, got, c.flops)
		}
	}
	bad := "[train]\nmicro_batch = 1\nseq_len = 8\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n[[module]]\nname = \"x\"\nkind = \"mlp\"\ndim = 8\nhidden = 8\nactivation = \"gelu\"\nfused_gate_up = true\n"
	if _, err := Load("k.toml", []byte(bad)); err == nil {
		t.Error("fused_gate_up on an ungated MLP: no error")
	}
}
