package ir

import (
	"strings"
	"testing"
)

// TestBiasTiedTo: bias_tied_to makes a kind module's bias the same tensor
// as another parameter (BERT's masked-LM head, whose decoder.bias is
// cls.predictions.bias), counted once; a module without a kind or without
// a bias is refused by name.
func TestBiasTiedTo(t *testing.T) {
	m := mustLoad(t, `
[[module]]
name = "head"

[[module.param]]
name = "bias"
shape = [16]

[[module.module]]
name = "decoder"
kind = "linear"
in = 8
out = 16
bias = true
bias_tied_to = "head.bias"
`)
	dec := m.Modules[mustID(t, m, "head.decoder")]
	var bias *Param
	for _, pid := range dec.Params {
		if p := &m.Params[pid]; p.Local == "bias" {
			bias = p
		}
	}
	if bias == nil || bias.TiedTo == NoParam || m.Params[bias.TiedTo].Name != "head.bias" {
		t.Fatalf("head.decoder.bias not tied: %+v", bias)
	}
	if s := m.Stats(); s.Params != 16+16*8 || s.Tensors != 2 {
		t.Errorf("tied bias counted twice: %d params, %d tensors", s.Params, s.Tensors)
	}
	for _, tc := range []struct{ src, want string }{
		{"[[module]]\nname = \"a\"\nbias_tied_to = \"b.bias\"\n", "only modules of a kind"},
		{"[[module]]\nname = \"b\"\nkind = \"linear\"\nin = 4\nout = 4\nbias = true\n[[module]]\nname = \"a\"\nkind = \"linear\"\nin = 4\nout = 4\nbias_tied_to = \"b.bias\"\n", "has no bias to tie"},
	} {
		_, err := Load("m.toml", []byte("[train]\nseq_len = 16\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 1\n"+tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.src, err, tc.want)
		}
	}
}
