package ir

import (
	"fmt"
	"strings"
	"testing"
)

// TestAttentionQLast: q_last registers k, v, then q (fairseq's order,
// which BART's and OPT's attention keep), changing no cost; with
// fused_qkv it is refused.
func TestAttentionQLast(t *testing.T) {
	load := func(attrs string) (*Model, error) {
		src := fmt.Sprintf("[train]\nseq_len = 128\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 8\n[[module]]\nname = \"a\"\nkind = \"attention\"\ndim = 64\nheads = 4\n%s\n", attrs)
		return Load("a.toml", []byte(src))
	}
	names := `names = {q = "q_proj", k = "k_proj", v = "v_proj", o = "out_proj"}`
	plain, err := load(names)
	if err != nil {
		t.Fatal(err)
	}
	last, err := load("q_last = true\n" + names)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range last.Params {
		got = append(got, p.Name)
	}
	if want := "a.k_proj.weight a.v_proj.weight a.q_proj.weight a.out_proj.weight"; strings.Join(got, " ") != want {
		t.Errorf("parameters %s, want %s", strings.Join(got, " "), want)
	}
	if p, l := plain.Modules[1].Cost, last.Modules[1].Cost; p.FlopsFwd != l.FlopsFwd || p.FlopsBwd != l.FlopsBwd || p.ActivationBytes != l.ActivationBytes {
		t.Errorf("q_last changed the cost: %+v, want %+v", l, p)
	}
	if _, err := load("q_last = true\nfused_qkv = true"); err == nil || !strings.Contains(err.Error(), "q_last") {
		t.Errorf("q_last with fused_qkv: %v, want a refusal naming q_last", err)
	}
}
