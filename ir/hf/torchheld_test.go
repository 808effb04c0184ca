package hf

import (
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
)

// heldDescription is T5's first attention as the importer describes it:
// the attention kind over q, k, v, o, and relative_attention_bias, an
// embedding the module holds beside them (held_children).
const heldDescription = TorchMarker + `
{"format":"fsdpc-import-torch/1","source":{"factory":"t:build","class":"T"},"micro_batch":1,"seq_len":16,"torch":"2.14",
"modules":[
{"name":"","type":"T","params":[],"children":["attn","head"],"calls":1,"reads":[],"forward":["attn","head"],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"attn","type":"T5Attention","params":[],"children":["q","k","v","o","relative_attention_bias"],"held_children":["relative_attention_bias"],
 "kind":{"kind":"attention","dim":8,"heads":2,"kv_heads":2,"head_dim":4,"qkv_bias":false,"out_bias":false,"causal":false,"flash":false,"names":{"q":"q","k":"k","v":"v","o":"o"}},
 "calls":1,"reads":[],"forward":["q","k","v","o","relative_attention_bias"],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"attn.q","type":"Linear","params":[{"name":"weight","shape":[8,8],"dtype":"fp32","requires_grad":true}],"children":[],"kind":{"kind":"linear","in":8,"out":8,"bias":false},"calls":1,"reads":[],"forward":[],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"attn.k","type":"Linear","params":[{"name":"weight","shape":[8,8],"dtype":"fp32","requires_grad":true}],"children":[],"kind":{"kind":"linear","in":8,"out":8,"bias":false},"calls":1,"reads":[],"forward":[],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"attn.v","type":"Linear","params":[{"name":"weight","shape":[8,8],"dtype":"fp32","requires_grad":true}],"children":[],"kind":{"kind":"linear","in":8,"out":8,"bias":false},"calls":1,"reads":[],"forward":[],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"attn.o","type":"Linear","params":[{"name":"weight","shape":[8,8],"dtype":"fp32","requires_grad":true}],"children":[],"kind":{"kind":"linear","in":8,"out":8,"bias":false},"calls":1,"reads":[],"forward":[],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"attn.relative_attention_bias","type":"Embedding","params":[{"name":"weight","shape":[32,2],"dtype":"fp32","requires_grad":true}],"children":[],"kind":{"kind":"embedding","num":32,"dim":2},"calls":1,"reads":[],"forward":[],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"head","type":"Linear","params":[{"name":"weight","shape":[4,8],"dtype":"fp32","requires_grad":true}],"children":[],"kind":{"kind":"linear","in":8,"out":4,"bias":false},"calls":1,"reads":["attn"],"forward":[],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0}
],"numel":352,"problems":[]}
`

// TestConvertTorchHeldChildren: a kind module's held child is written
// inside it, after the kind's children, as its own kind; the file keeps
// PyTorch's parameters and the module its kind. A held child that is not
// the module's last is refused.
func TestConvertTorchHeldChildren(t *testing.T) {
	d, err := ParseTorchDescription([]byte(heldDescription))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ConvertTorch(d, Options{WorldSize: 2, GPUsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ir.Load("t.toml", res.Text)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Text)
	}
	var names []string
	for _, p := range m.Params {
		names = append(names, p.Name)
	}
	if got, want := strings.Join(names, " "), "attn.q.weight attn.k.weight attn.v.weight attn.o.weight attn.relative_attention_bias.weight head.weight"; got != want {
		t.Errorf("parameters %s, want %s", got, want)
	}
	id, err := m.ModuleByName("attn")
	if err != nil {
		t.Fatal(err)
	}
	if k := m.Modules[id].Kind; k != ir.KindAttention || len(res.Dropped) > 0 || len(res.Measured) > 0 {
		t.Errorf("attn is %s (dropped %v, measured %v), want attention\n%s", k, res.Dropped, res.Measured, res.Text)
	}
	if !strings.Contains(string(res.Text), "[[module.module]]\nname = \"relative_attention_bias\"\nkind = \"embedding\"\nnum = 32\ndim = 2\n") {
		t.Errorf("the held embedding is not written inside attn:\n%s", res.Text)
	}

	bad := strings.Replace(heldDescription, `"held_children":["relative_attention_bias"]`, `"held_children":["q"]`, 1)
	if _, err := ParseTorchDescription([]byte(bad)); err == nil || !strings.Contains(err.Error(), "not its last children") {
		t.Errorf("a held child before the kind's: %v, want a refusal", err)
	}
}
