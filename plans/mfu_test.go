package plans_test

import "testing"

// TestFLOPsPerToken checks MFU's FLOPs per token against torchtitan's
// formula worked by hand from each model's published shape: 6N with N the
// parameters less the embeddings' (a MoE's routed experts at top_k/experts),
// plus 12·L·H·Q·T.
func TestFLOPsPerToken(t *testing.T) {
	cases := []struct {
		name   string
		params float64 // N of 6N
		attn   float64 // 12·L·H·Q·T
	}{
		// 8,030,261,248 parameters less the 128,256 × 4,096 token embedding.
		{"llama3-8b", 8030261248 - 128256*4096, 12 * 32 * 32 * 128 * 8192},
		{"llama3-8b-torchtitan", 8030261248 - 128256*4096, 12 * 32 * 32 * 128 * 8192},
		{"llama3-70b", 70553706496 - 128256*8192, 12 * 80 * 64 * 128 * 8192},
		// GPT-2 ties the head to wte, so both embeddings (wte 50,257 × 768,
		// wpe 1,024 × 768) leave and the head goes with wte.
		{"gpt2-124m", 124439808 - 50257*768 - 1024*768, 12 * 12 * 12 * 64 * 1024},
		// Mixtral: a token runs through 2 of each layer's 8 experts of
		// 3 × 4096 × 14336 parameters.
		{"mixtral-8x7b", 46702792704 - 32000*4096 - 32*6*3*4096*14336, 12 * 32 * 32 * 128 * 8192},
	}
	for _, c := range cases {
		m := load(t, c.name)
		if m.MFU.Params != c.params {
			t.Errorf("%s: N = %.0f, want %.0f", c.name, m.MFU.Params, c.params)
		}
		want := 6*c.params + c.attn
		if got := m.FLOPsPerToken(); got != want {
			t.Errorf("%s: %.0f FLOPs per token, want %.0f", c.name, got, want)
		}
	}
}
