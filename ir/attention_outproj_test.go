package ir

import (
	"fmt"
	"strings"
	"testing"
)

// TestAttentionWithoutOutProj: out_proj = false (BERT's self-attention,
// whose output projection is a sibling module) makes q, k and v only and
// drops exactly the output projection's FLOPs; keys that name the missing
// projection are refused.
func TestAttentionWithoutOutProj(t *testing.T) {
	load := func(attrs string) (*Model, error) {
		src := fmt.Sprintf("[train]\nmicro_batch = 2\nseq_len = 512\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 8\n[[module]]\nname = \"a\"\nkind = \"attention\"\ndim = 768\nheads = 12\ncausal = false\nqkv_bias = true\n%s\n", attrs)
		return Load("a.toml", []byte(src))
	}
	cost := func(m *Model) Cost {
		id, err := m.ModuleByName("a")
		if err != nil {
			t.Fatal(err)
		}
		return m.Modules[id].Cost
	}
	full, err := load("out_bias = true")
	if err != nil {
		t.Fatal(err)
	}
	bert, err := load(`out_proj = false
names = {q = "query", k = "key", v = "value"}`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range bert.Params {
		names = append(names, fmt.Sprintf("%s %v", p.Name, p.Shape))
	}
	want := "a.query.weight [768 768] a.query.bias [768] a.key.weight [768 768] a.key.bias [768] a.value.weight [768 768] a.value.bias [768]"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("parameters %s, want %s", got, want)
	}
	// The output projection: 2·T·dim·dim forward, twice that backward.
	T := float64(2 * 512)
	o := 2 * T * 768 * 768
	f, b := cost(full), cost(bert)
	if f.FlopsFwd-b.FlopsFwd != o || f.FlopsBwd-b.FlopsBwd != 2*o {
		t.Errorf("out_proj = false drops %v/%v FLOPs, want the projection's %v/%v", f.FlopsFwd-b.FlopsFwd, f.FlopsBwd-b.FlopsBwd, o, 2*o)
	}
	if f.AttnFlopsFwd != b.AttnFlopsFwd {
		t.Errorf("the core changed: %v, want %v", b.AttnFlopsFwd, f.AttnFlopsFwd)
	}
	for _, attrs := range []string{
		"out_proj = false\nout_bias = true",
		"out_proj = false\nnames = {o = \"dense\"}",
		"out_proj = false\nlora_rank = 8\nlora_targets = [\"q\", \"o\"]",
	} {
		if _, err := load(attrs); err == nil || !strings.Contains(err.Error(), "out_proj = false") {
			t.Errorf("%q: %v, want a refusal naming out_proj = false", attrs, err)
		}
	}
}
