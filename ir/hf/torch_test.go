package hf

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
)

// tinyDescription is what python -m fsdpc.importer writes for a model of
// a frozen embedding, two identical blocks (a linear, and a module of its
// own parameters the importer has no kind for), and a head tied to the
// embedding whose proposed kind is wrong (out 9, not 10).
const tinyDescription = `banner a native library printed
` + TorchMarker + `
{"format":"fsdpc-import-torch/1","source":{"factory":"tiny:build","class":"Tiny"},"micro_batch":2,"seq_len":16,"torch":"2.14",
"modules":[
{"name":"","type":"Tiny","params":[{"name":"scale","shape":[4],"dtype":"fp32","requires_grad":true}],"children":["emb","layers","head"],"calls":1,"reads":[],"forward":["emb","layers","head"],"flops_fwd":100,"flops_bwd":200,"activation_bytes":10},
{"name":"emb","type":"Embedding","params":[{"name":"weight","shape":[10,4],"dtype":"fp32","requires_grad":false}],"children":[],"kind":{"kind":"embedding","num":10,"dim":4},"calls":1,"reads":[],"forward":[],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"layers","type":"ModuleList","params":[],"children":["0","1"],"calls":0,"reads":["emb"],"forward":["0","1"],"flops_fwd":0,"flops_bwd":0,"activation_bytes":0},
{"name":"layers.0","type":"Block","params":[],"children":["proj","gate"],"calls":1,"own_output":true,"reads":["emb"],"forward":["gate","proj"],"flops_fwd":40,"flops_bwd":80,"activation_bytes":64},
{"name":"layers.0.proj","type":"Linear","params":[{"name":"weight","shape":[4,4],"dtype":"fp32","requires_grad":true}],"children":[],"kind":{"kind":"linear","in":4,"out":4,"bias":false},"calls":1,"reads":["layers.0.gate"],"forward":[],"flops_fwd":32,"flops_bwd":64,"activation_bytes":32},
{"name":"layers.0.gate","type":"Gate","params":[{"name":"w","shape":[4],"dtype":"bf16","requires_grad":true}],"children":[],"calls":1,"reads":["emb"],"forward":[],"flops_fwd":8,"flops_bwd":16,"activation_bytes":32},
{"name":"layers.1","type":"Block","params":[],"children":["proj","gate"],"calls":1,"own_output":true,"reads":["layers.0"],"forward":["gate","proj"],"flops_fwd":40,"flops_bwd":80,"activation_bytes":64},
{"name":"layers.1.proj","type":"Linear","params":[{"name":"weight","shape":[4,4],"dtype":"fp32","requires_grad":true}],"children":[],"kind":{"kind":"linear","in":4,"out":4,"bias":false},"calls":1,"reads":["layers.1.gate"],"forward":[],"flops_fwd":32,"flops_bwd":64,"activation_bytes":32},
{"name":"layers.1.gate","type":"Gate","params":[{"name":"w","shape":[4],"dtype":"bf16","requires_grad":true}],"children":[],"calls":1,"reads":["layers.0"],"forward":[],"flops_fwd":8,"flops_bwd":16,"activation_bytes":32},
{"name":"head","type":"Linear","params":[{"name":"weight","shape":[10,4],"dtype":"fp32","requires_grad":false,"tied_to":"emb.weight"}],"children":[],"kind":{"kind":"linear","in":4,"out":9,"bias":false},"calls":1,"reads":["layers.1"],"forward":[],"flops_fwd":20,"flops_bwd":40,"activation_bytes":8}
],"numel":84,
"problems":[{"module":"layers.1.gate","what":"calls a custom autograd Function"}]}
`

func TestConvertTorch(t *testing.T) {
	d, err := ParseTorchDescription([]byte(tinyDescription))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ConvertTorch(d, Options{WorldSize: 2, GPUsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	text := string(res.Text)
	m, err := ir.Load("tiny.toml", res.Text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	// Parameters in PyTorch's order, with the tie and the frozen embedding.
	var names []string
	for _, p := range m.Params {
		names = append(names, p.Name)
	}
	want := "scale emb.weight layers.0.gate.w layers.0.proj.weight layers.1.gate.w layers.1.proj.weight head.weight"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("parameters %s, want %s", got, want)
	}
	for _, p := range m.Params {
		switch p.Name {
		case "head.weight":
			if p.TiedTo == ir.NoParam || m.Params[p.TiedTo].Name != "emb.weight" {
				t.Errorf("head.weight is not tied to emb.weight")
			}
		case "emb.weight":
			if p.RequiresGrad {
				t.Errorf("emb.weight trains; PyTorch froze it")
			}
		case "layers.1.gate.w":
			if p.DType.String() != "bf16" {
				t.Errorf("layers.1.gate.w is %s, want bf16", p.DType)
			}
		}
	}
	for _, s := range []string{
		"repeat = 2",                  // identical blocks fold
		`output = "own"`,              // the blocks return tensors they make
		`register = ["proj", "gate"]`, // forward runs gate first
		`units = ["layers.*"]`,        // each layer a unit
		"flops_fwd = 8",               // the gate is measured
		"Measured, not recognised (3): layers.*.gate (2), head.",
		"head (linear: ", // the wrong kind was refused
		"layers.1.gate calls a custom autograd Function",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("the file lacks %q:\n%s", s, text)
		}
	}
	for _, name := range []string{"layers.0", "layers.1"} {
		if id, err := m.ModuleByName(name); err != nil || !m.Modules[id].OwnOutput {
			t.Errorf("%s does not return its own tensor in the file (%v)", name, err)
		}
	}
	if len(res.Dropped) != 1 || !strings.HasPrefix(res.Dropped[0], "head ") {
		t.Errorf("dropped kinds %v, want head's", res.Dropped)
	}
}

func TestParseTorchDescriptionRefuses(t *testing.T) {
	for _, c := range []struct{ name, edit, want string }{
		{"no marker", "MARKER", "no \"--- fsdpc import torch"},
		{"other format", `fsdpc-import-torch/1"`, "this fsdpc reads"},
		{"unknown key", `"calls":1,"reads":[],"forward":["emb"`, "unknown field"},
		{"scalar", `"shape":[4]`, "scalar"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := tinyDescription
			switch c.name {
			case "no marker":
				s = strings.Replace(s, TorchMarker, "", 1)
			case "other format":
				s = strings.Replace(s, c.edit, `fsdpc-import-torch/0"`, 1)
			case "unknown key":
				s = strings.Replace(s, `"calls":1,"reads":[]`, `"calls":1,"extra":1,"reads":[]`, 1)
			case "scalar":
				s = strings.Replace(s, c.edit, `"shape":[]`, 1)
			}
			_, err := ParseTorchDescription([]byte(s))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestConvertTorchRefusesNames(t *testing.T) {
	s := strings.Replace(tinyDescription, `"name":"head"`, `"name":"he ad"`, 1)
	s = strings.Replace(s, `"children":["emb","layers","head"]`, `"children":["emb","layers","he ad"]`, 1)
	s = strings.Replace(s, `"forward":["emb","layers","head"]`, `"forward":["emb","layers","he ad"]`, 1)
	d, err := ParseTorchDescription([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ConvertTorch(d, Options{})
	if err == nil || !strings.Contains(err.Error(), `module "he ad"`) {
		t.Fatalf("got %v, want an error naming module \"he ad\"", err)
	}
}

// layeredDescription is a description of n layers, each an attention
// whose mask is masks[i]: 'w' a sliding window of 8, 'c' chunks of 8,
// 'f' full causal attention.
func layeredDescription(masks string) *TorchDescription {
	d := &TorchDescription{Format: TorchFormat, Source: map[string]any{"factory": "m:build", "class": "M"}, MicroBatch: 1, SeqLen: 64}
	linear := func(name string, in, out int64) TorchModule {
		return TorchModule{Name: name, Type: "Linear", Calls: 1,
			Params: []TorchParam{{Name: "weight", Shape: []int64{out, in}, DType: "bf16", RequiresGrad: true}},
			Kind:   map[string]any{"kind": "linear", "in": float64(in), "out": float64(out), "bias": false}}
	}
	var layers []string
	for i := range masks {
		layers = append(layers, fmt.Sprint(i))
	}
	d.Modules = append(d.Modules,
		TorchModule{Name: "", Type: "M", Children: []string{"emb", "layers"}, Forward: []string{"emb", "layers"}, Calls: 1},
		TorchModule{Name: "emb", Type: "Embedding", Calls: 1, Params: []TorchParam{{Name: "weight", Shape: []int64{32, 16}, DType: "bf16", RequiresGrad: true}},
			Kind: map[string]any{"kind": "embedding", "num": 32.0, "dim": 16.0}},
		TorchModule{Name: "layers", Type: "ModuleList", Children: layers, Forward: layers})
	prev := "emb"
	for i, mask := range masks {
		l := fmt.Sprintf("layers.%d", i)
		kind := map[string]any{"kind": "attention", "dim": 16.0, "heads": 2.0, "kv_heads": 2.0, "head_dim": 8.0,
			"qkv_bias": false, "out_bias": false, "names": map[string]any{"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}}
		switch mask {
		case 'w':
			kind["window"] = 8.0
		case 'c':
			kind["chunk"] = 8.0
		}
		d.Modules = append(d.Modules,
			TorchModule{Name: l, Type: "Layer", Children: []string{"attn"}, Forward: []string{"attn"}, Calls: 1, Reads: []string{prev}, OwnOutput: true},
			TorchModule{Name: l + ".attn", Type: "Attention", Children: []string{"q_proj", "k_proj", "v_proj", "o_proj"}, Calls: 1, Reads: []string{prev}, Kind: kind},
			linear(l+".attn.q_proj", 16, 16), linear(l+".attn.k_proj", 16, 16), linear(l+".attn.v_proj", 16, 16), linear(l+".attn.o_proj", 16, 16))
		prev = l
	}
	for _, m := range d.Modules {
		for _, p := range m.Params {
			n := int64(1)
			for _, s := range p.Shape {
				n *= s
			}
			d.Numel += n
		}
	}
	return d
}

// TestConvertTorchMasks: layers that differ only in their attention's
// mask fold into one repeat whose blocks cycle, as import hf writes them
// (blocks named _sliding, _chunked); layers with no period are written
// one by one; either way each layer's attention keeps its window or
// chunk, which its core's FLOPs show.
func TestConvertTorchMasks(t *testing.T) {
	for _, c := range []struct {
		masks string
		want  []string
	}{
		{"wfwfw", []string{"repeat = 5", `blocks = ["Layer_sliding", "Layer"]`, "window = 8"}},
		{"cccfcccf", []string{"repeat = 8", `blocks = ["Layer_chunked", "Layer_chunked", "Layer_chunked", "Layer"]`, "chunk = 8"}},
		{"fff", []string{"repeat = 3", `block = "Layer"`}},
		{"ffw", []string{`block = "Layer_sliding"`, "window = 8"}},
	} {
		t.Run(c.masks, func(t *testing.T) {
			res, err := ConvertTorch(layeredDescription(c.masks), Options{WorldSize: 2, GPUsPerNode: 2})
			if err != nil {
				t.Fatal(err)
			}
			text := string(res.Text)
			for _, s := range c.want {
				if !strings.Contains(text, s) {
					t.Errorf("the file lacks %q:\n%s", s, text)
				}
			}
			if c.masks == "ffw" && strings.Contains(text, "repeat =") {
				t.Errorf("layers with no period folded:\n%s", text)
			}
			m, err := ir.Load("m.toml", res.Text)
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			// Causal over 64 tokens: 2080 (query, key) pairs; a window of
			// 8 keeps 36 + 56·8 = 484, chunks of 8 keep 8·36 = 288. The
			// core is 4·B·heads·pairs·head_dim.
			pairs := map[byte]float64{'f': 2080, 'w': 484, 'c': 288}
			for i := range c.masks {
				id, err := m.ModuleByName(fmt.Sprintf("layers.%d.attn", i))
				if err != nil {
					t.Fatal(err)
				}
				if got, want := m.Modules[id].Cost.AttnFlopsFwd, 4*2*pairs[c.masks[i]]*8; got != want {
					t.Errorf("layers.%d.attn (%c): core forward FLOPs %v, want %v", i, c.masks[i], got, want)
				}
			}
		})
	}
}

// TestConvertTorchConv: a conv kind as the importer proposes it (lists
// for kernel, stride, padding, input_size) is written and costed by the
// conv formula, 2·B·Π(out_size)·out·(in/groups)·Π(kernel): here the
// grouped conv of python/tests/test_conv.py, whose FlopCounterMode count
// that test checks against the same formula.
func TestConvertTorchConv(t *testing.T) {
	d := &TorchDescription{Format: TorchFormat, Source: map[string]any{"factory": "m:build", "class": "Net"}, MicroBatch: 2, SeqLen: 32,
		Modules: []TorchModule{
			{Name: "", Type: "Net", Children: []string{"grouped", "dilated"}, Forward: []string{"grouped", "dilated"}, Calls: 1},
			{Name: "grouped", Type: "Conv2d", Calls: 1, Params: []TorchParam{
				{Name: "weight", Shape: []int64{32, 4, 3, 5}, DType: "fp32", RequiresGrad: true},
				{Name: "bias", Shape: []int64{32}, DType: "fp32", RequiresGrad: true}},
				Kind: map[string]any{"kind": "conv", "in": 16.0, "out": 32.0, "kernel": []any{3.0, 5.0}, "stride": []any{1.0, 1.0},
					"padding": []any{1.0, 2.0}, "groups": 4.0, "bias": true, "input_size": []any{16.0, 16.0}}},
			{Name: "dilated", Type: "Conv2d", Calls: 1, FlopsFwd: 1000, FlopsBwd: 2000, Reads: []string{"grouped"},
				MeasuredBecause: "it has dilation [2, 2], which the conv kind does not describe",
				Params:          []TorchParam{{Name: "weight", Shape: []int64{4, 32, 3, 3}, DType: "fp32", RequiresGrad: true}}},
		},
		Numel: 32*4*3*5 + 32 + 4*32*3*3}
	res, err := ConvertTorch(d, Options{WorldSize: 2, GPUsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Measured) != 1 || len(res.Dropped) != 0 {
		t.Fatalf("measured %v, dropped %v:\n%s", res.Measured, res.Dropped, res.Text)
	}
	for _, s := range []string{"kernel = [3, 5]", "input_size = [16, 16]", "padding = [1, 2]", "groups = 4",
		"# Measured, not recognised (1): dilated.",
		"#   - dilated: measured because it has dilation [2, 2], which the conv kind"} {
		if !strings.Contains(string(res.Text), s) {
			t.Errorf("the file lacks %q:\n%s", s, res.Text)
		}
	}
	m, err := ir.Load("net.toml", res.Text)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Text)
	}
	id, _ := m.ModuleByName("grouped")
	if got, want := m.Modules[id].Cost.FlopsFwd, float64(2*2*16*16*32*(16/4)*3*5); got != want {
		t.Errorf("forward FLOPs %v, want %v", got, want)
	}
}

// TestConvertTorchKindNote: BLOOM's attention as the importer proposes it
// (fused query_key_value, then dense: fused_qkv with those names, an
// unfused core) is written with its kind and its note in the header, the
// layers' numbers folded; a kind that does not make the module's
// parameters is refused and its note goes with it.
func TestConvertTorchKindNote(t *testing.T) {
	const note = "ALiBi adds a per-head linear bias to every score"
	attn := func(layer string, width int64) []TorchModule {
		p := func(name string, shape ...int64) TorchParam {
			return TorchParam{Name: name, Shape: shape, DType: "fp32", RequiresGrad: true}
		}
		name := "h." + layer + ".self_attention"
		reads := []string{"h"}
		if layer == "1" {
			reads = []string{"h.0"}
		}
		return []TorchModule{
			{Name: "h." + layer, Type: "BloomBlock", Children: []string{"self_attention"}, Forward: []string{"self_attention"}, Calls: 1, Reads: reads},
			{Name: name, Type: "BloomAttention", Children: []string{"query_key_value", "dense"}, Forward: []string{"query_key_value", "dense"},
				Calls: 1, Reads: reads, KindNote: note,
				Kind: map[string]any{"kind": "attention", "dim": 8.0, "heads": 2.0, "kv_heads": 2.0, "head_dim": 4.0, "fused_qkv": true,
					"qkv_bias": true, "out_bias": true, "flash": false, "names": map[string]any{"qkv": "query_key_value", "o": "dense"}}},
			{Name: name + ".query_key_value", Type: "Linear", Calls: 1, Params: []TorchParam{p("weight", width, 8), p("bias", width)}},
			{Name: name + ".dense", Type: "Linear", Calls: 1, Params: []TorchParam{p("weight", 8, 8), p("bias", 8)}},
		}
	}
	for _, c := range []struct {
		name  string
		width int64 // query_key_value's rows: 24 is (2+2·2)·4, what the kind makes
		want  []string
		not   []string
	}{
		{"kind", 24, []string{"fused_qkv = true", "flash = false", `names = { o = "dense", qkv = "query_key_value" }`,
			"# Recognised, with what their kind's cost model leaves out:", "#   - h.*.self_attention (2): ALiBi adds a per-head linear bias to every\n#     score."}, nil},
		{"refused", 20, []string{"Kinds proposed and refused"}, []string{"ALiBi"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mods := []TorchModule{{Name: "", Type: "Net", Children: []string{"h"}, Forward: []string{"h"}, Calls: 1},
				{Name: "h", Type: "ModuleList", Children: []string{"0", "1"}, Forward: []string{"0", "1"}}}
			mods = append(append(mods, attn("0", c.width)...), attn("1", c.width)...)
			d := &TorchDescription{Format: TorchFormat, Source: map[string]any{"factory": "m:build", "class": "Net"}, MicroBatch: 1, SeqLen: 16,
				Modules: mods, Numel: 2 * (c.width*8 + c.width + 8*8 + 8)}
			res, err := ConvertTorch(d, Options{WorldSize: 2, GPUsPerNode: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.want {
				if !strings.Contains(string(res.Text), s) {
					t.Errorf("the file lacks %q:\n%s", s, res.Text)
				}
			}
			for _, s := range c.not {
				if strings.Contains(string(res.Text), s) {
					t.Errorf("the file has %q:\n%s", s, res.Text)
				}
			}
			if _, err := ir.Load("net.toml", res.Text); err != nil {
				t.Fatalf("%v\n%s", err, res.Text)
			}
		})
	}
}
