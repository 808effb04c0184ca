package ir

import (
	"fmt"
	"strings"
	"testing"
)

// TestAttentionPairs: the (query, key) pairs causal attention computes,
// counted by brute force over the mask, equal the closed forms.
func TestAttentionPairs(t *testing.T) {
	for _, seq := range []int64{1, 7, 8, 64, 100} {
		for _, w := range []int64{0, 1, 3, 8, 64, 200} {
			for _, chunk := range []bool{false, true} {
				var brute int64
				for i := range seq {
					for j := int64(0); j <= i; j++ {
						switch {
						case w == 0:
							brute++
						case chunk && i/w == j/w:
							brute++
						case !chunk && i-j < w:
							brute++
						}
					}
				}
				window, c := w, int64(0)
				if chunk {
					window, c = 0, w
				}
				if got := attentionPairs(seq, window, c); got != float64(brute) {
					t.Errorf("seq %d, window %d, chunk %d: %v pairs, the mask has %d", seq, window, c, got, brute)
				}
			}
		}
	}
}

// TestAttentionWindow: a sliding window or chunk shorter than the sequence
// cuts the attention core's FLOPs and nothing else; one at least as long
// changes nothing; nonsense is refused by name.
func TestAttentionWindow(t *testing.T) {
	load := func(attrs string) (*Model, error) {
		src := fmt.Sprintf("[train]\nmicro_batch = 1\nseq_len = 4096\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 8\n[[module]]\nname = \"a\"\nkind = \"attention\"\ndim = 1024\nheads = 8\n%s\n", attrs)
		return Load("w.toml", []byte(src))
	}
	full, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	fc := full.Modules[0].Cost
	for _, tc := range []struct {
		attrs string
		pairs float64 // of the full causal count
	}{
		{"window = 1024", (1024*1025/2 + 3072*1024) / (4096 * 4097 / 2.0)},
		{"chunk = 1024", 4 * (1024 * 1025 / 2) / (4096 * 4097 / 2.0)},
		{"window = 4096", 1},
		{"chunk = 8192", 1},
	} {
		m, err := load(tc.attrs)
		if err != nil {
			t.Fatalf("%s: %v", tc.attrs, err)
		}
		c := m.Modules[0].Cost
		if got := c.AttnFlopsFwd / fc.AttnFlopsFwd; got < tc.pairs*(1-1e-12) || got > tc.pairs*(1+1e-12) {
			t.Errorf("%s: attention core FLOPs ×%.6f, want ×%.6f", tc.attrs, got, tc.pairs)
		}
		if c.FlopsFwd-c.AttnFlopsFwd != fc.FlopsFwd-fc.AttnFlopsFwd || c.ActivationBytes != fc.ActivationBytes || m.MFU != full.MFU {
			t.Errorf("%s: changed more than the attention core", tc.attrs)
		}
	}
	for _, tc := range []struct{ attrs, want string }{
		{"window = 8\nchunk = 8", "cannot both be set"},
		{"window = 8\ncausal = false", "restrict causal self-attention"},
		{"chunk = 8\nkv_seq_len = 16", "restrict causal self-attention"},
		{"window = 0", "window"},
	} {
		if _, err := load(tc.attrs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.attrs, err, tc.want)
		}
	}
}

// TestUnfusedAttentionComputesEveryPair: an unfused core (flash = false:
// matmul, masked softmax, matmul) multiplies all S² pairs of causal
// self-attention, window or not, where a fused kernel computes the
// S·(S+1)/2 the mask keeps; without a causal mask both compute all. MLA
// alike.
func TestUnfusedAttentionComputesEveryPair(t *testing.T) {
	const S = 4096
	load := func(kind, attrs string) *Model {
		t.Helper()
		src := fmt.Sprintf("[train]\nmicro_batch = 1\nseq_len = %d\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 8\n[[module]]\nname = \"a\"\nkind = %q\n%s\n", S, kind, attrs)
		m, err := Load("w.toml", []byte(src))
		if err != nil {
			t.Fatalf("%s %s: %v", kind, attrs, err)
		}
		return m
	}
	const mha, mla = "dim = 1024\nheads = 8", "dim = 1024\nheads = 8\nkv_lora_rank = 64\nqk_nope_head_dim = 32\nqk_rope_head_dim = 16\nv_head_dim = 32"
	causalShare := S * (S + 1) / 2.0 / (S * S)
	for _, tc := range []struct {
		kind, attrs string
		ratio       float64 // unfused core FLOPs over fused
	}{
		{"attention", mha, 1 / causalShare},
		{"attention", mha + "\nwindow = 1024", (S * S) / (1024*1025/2.0 + (S-1024)*1024.0)},
		{"attention", mha + "\ncausal = false", 1},
		{"mla", mla, 1 / causalShare},
		{"mla", mla + "\ncausal = false", 1},
	} {
		fused, unfused := load(tc.kind, tc.attrs).Modules[0].Cost, load(tc.kind, tc.attrs+"\nflash = false").Modules[0].Cost
		if got := unfused.AttnFlopsFwd / fused.AttnFlopsFwd; got < tc.ratio*(1-1e-12) || got > tc.ratio*(1+1e-12) {
			t.Errorf("%s %q: unfused core ×%.6f of the fused one's FLOPs, want ×%.6f", tc.kind, tc.attrs, got, tc.ratio)
		}
		if unfused.FlopsFwd-unfused.AttnFlopsFwd != fused.FlopsFwd-fused.AttnFlopsFwd {
			t.Errorf("%s %q: flash = false changed FLOPs outside the core", tc.kind, tc.attrs)
		}
	}
}
