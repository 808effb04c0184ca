package ir

import (
	"reflect"
	"strings"
	"testing"
)

// header is the smallest [train]/[cluster] a test model needs.
const header = `
[train]
micro_batch = 2
seq_len = 8
[cluster]
gpu = "h100-sxm"
world_size = 4
`

func mustLoad(t *testing.T, body string) *Model {
	t.Helper()
	m, err := Load("test.toml", []byte(header+body))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func forwardNames(m *Model) string {
	var names []string
	for _, id := range m.Forward {
		names = append(names, m.Modules[id].Name)
	}
	return strings.Join(names, " ")
}

func inputNames(m *Model, name string) string {
	id, err := m.ModuleByName(name)
	if err != nil {
		return err.Error()
	}
	var names []string
	for _, in := range m.Modules[id].Inputs {
		names = append(names, m.Modules[in].Name)
	}
	return strings.Join(names, " ")
}

func TestForwardOrder(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		forward string
		inputs  map[string]string
	}{
		{
			name: "declaration order is forward order",
			body: `
[[module]]
name = "a"
kind = "linear"
in = 4
out = 4
[[module]]
name = "blk"
repeat = 2
[[module.module]]
name = "x"
kind = "linear"
in = 4
out = 4
[[module.module]]
name = "y"
kind = "linear"
in = 4
out = 4
`,
			forward: "a blk.0.x blk.0.y blk.1.x blk.1.y",
			inputs:  map[string]string{"a": "", "blk.0.x": "a", "blk.1.x": "blk.0.y", "blk.1.y": "blk.1.x"},
		},
		{
			name: "inputs naming a later module reorder",
			body: `
[[module]]
name = "a"
kind = "norm"
dim = 4
[[module]]
name = "b"
kind = "norm"
dim = 4
inputs = ["c"]
[[module]]
name = "c"
kind = "norm"
dim = 4
inputs = ["a"]
[[module]]
name = "d"
kind = "norm"
dim = 4
inputs = ["b", "a"]
`,
			forward: "a c b d",
			inputs:  map[string]string{"b": "c", "c": "a", "d": "b a"},
		},
		{
			name: "parallel branches both feed the next block",
			body: `
[[module]]
name = "blk"
repeat = 2
[[module.module]]
name = "norm"
kind = "norm"
dim = 4
[[module.module]]
name = "attn"
kind = "linear"
in = 4
out = 4
[[module.module]]
name = "mlp"
kind = "linear"
in = 4
out = 4
inputs = ["norm"]
`,
			forward: "blk.0.norm blk.0.attn blk.0.mlp blk.1.norm blk.1.attn blk.1.mlp",
			inputs:  map[string]string{"blk.1.norm": "blk.0.attn blk.0.mlp", "blk.0.mlp": "blk.0.norm"},
		},
		{
			// GPT-NeoX's parallel residual: the second norm reads the
			// layer's own input, the previous layer's output (the first
			// layer's: the embedding), as naming it would in each layer.
			name: "\"..\" reads the container's input",
			body: `
[[module]]
name = "emb"
kind = "embedding"
num = 10
dim = 4
[[module]]
name = "layers"
repeat = 3
[[module.module]]
name = "ln1"
kind = "norm"
dim = 4
[[module.module]]
name = "attn"
kind = "linear"
in = 4
out = 4
[[module.module]]
name = "ln2"
kind = "norm"
dim = 4
inputs = [".."]
[[module.module]]
name = "mlp"
kind = "linear"
in = 4
out = 4
[[module]]
name = "head"
kind = "linear"
in = 4
out = 4
inputs = ["..", "emb"]
`,
			forward: "emb layers.0.ln1 layers.0.attn layers.0.ln2 layers.0.mlp layers.1.ln1 layers.1.attn layers.1.ln2 layers.1.mlp layers.2.ln1 layers.2.attn layers.2.ln2 layers.2.mlp head",
			inputs: map[string]string{
				"layers.0.ln2": "emb", "layers.1.ln1": "layers.0.attn layers.0.mlp",
				"layers.1.ln2": "layers.0.attn layers.0.mlp", "layers.2.ln2": "layers.1.attn layers.1.mlp",
				"head": "emb", // ".." at the top: the model's input, no module
			},
		},
		{
			name: "encoder-decoder reads the encoder's output",
			body: `
[[module]]
name = "enc"
repeat = 2
[[module.module]]
name = "ff"
kind = "linear"
in = 4
out = 4
[[module]]
name = "emb"
kind = "embedding"
num = 10
dim = 4
inputs = []
[[module]]
name = "dec"
repeat = 2
[[module.module]]
name = "self"
kind = "linear"
in = 4
out = 4
[[module.module]]
name = "cross"
kind = "attention"
dim = 4
heads = 2
kv_seq_len = 8
inputs = ["self", "enc"]
`,
			forward: "enc.0.ff enc.1.ff emb dec.0.self dec.0.cross dec.1.self dec.1.cross",
			inputs:  map[string]string{"emb": "", "dec.0.self": "emb", "dec.1.cross": "dec.1.self enc.1.ff"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustLoad(t, tt.body)
			if got := forwardNames(m); got != tt.forward {
				t.Errorf("forward = %q\nwant      %q", got, tt.forward)
			}
			for name, want := range tt.inputs {
				if got := inputNames(m, name); got != want {
					t.Errorf("inputs of %s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestCycleNamesWholeCycle(t *testing.T) {
	_, err := Load("cyc.toml", []byte(header+`
[[module]]
name = "a"
kind = "norm"
dim = 4
inputs = ["c"]
[[module]]
name = "b"
kind = "norm"
dim = 4
[[module]]
name = "c"
kind = "norm"
dim = 4
`))
	if err == nil {
		t.Fatal("cycle accepted")
	}
	if !strings.Contains(err.Error(), "a -> b -> c -> a") {
		t.Errorf("error does not name the cycle in order: %v", err)
	}
	if !strings.Contains(err.Error(), "cyc.toml:") {
		t.Errorf("error has no file name: %v", err)
	}
}

func TestRequiresGradFlow(t *testing.T) {
	// A frozen embedding feeding a frozen linear: nothing upstream of the
	// LoRA adapter needs a gradient, so the frozen modules have no backward.
	m := mustLoad(t, `
[[module]]
name = "emb"
kind = "embedding"
num = 16
dim = 4
requires_grad = false
[[module]]
name = "frozen"
kind = "linear"
in = 4
out = 4
requires_grad = false
[[module]]
name = "adapted"
kind = "linear"
in = 4
out = 4
lora_rank = 2
requires_grad = false
[[module]]
name = "head"
kind = "linear"
in = 4
out = 4
requires_grad = false
`)
	get := func(name string) *Module {
		id, err := m.ModuleByName(name)
		if err != nil {
			t.Fatal(err)
		}
		return &m.Modules[id]
	}
	T := 16.0 // 2 × 8 tokens
	for _, tt := range []struct {
		name            string
		inGrad, outGrad bool
		bwd             float64
	}{
		{"emb", false, false, 0},
		{"frozen", false, false, 0},
		// The base matmul needs no gradient (frozen weight, input without
		// gradient); lora_A needs its weight gradient only; lora_B both.
		{"adapted", false, true, 2*T*4*2 /*A dW*/ + 2*T*2*4*2 /*B dX+dW*/},
		// The frozen head still passes gradients back: dX only.
		{"head", true, true, 2 * T * 4 * 4},
	} {
		mod := get(tt.name)
		if mod.InputsRequireGrad != tt.inGrad || mod.OutputRequiresGrad != tt.outGrad {
			t.Errorf("%s: inputs/output require grad = %v/%v, want %v/%v", tt.name, mod.InputsRequireGrad, mod.OutputRequiresGrad, tt.inGrad, tt.outGrad)
		}
		if mod.Cost.FlopsBwd != tt.bwd {
			t.Errorf("%s: backward FLOPs = %g, want %g", tt.name, mod.Cost.FlopsBwd, tt.bwd)
		}
	}
	s := m.Stats()
	if s.Trainable != 2*4*2 || s.Frozen != 16*4+3*16 {
		t.Errorf("trainable %d frozen %d", s.Trainable, s.Frozen)
	}
}

func TestKindCosts(t *testing.T) {
	// Tokens T = 2 × 8 = 16, bf16 activations (param_dtype).
	m := mustLoad(t, `
[policy]
param_dtype = "bf16"
[[module]]
name = "attn"
kind = "attention"
dim = 8
heads = 4
kv_heads = 2
[[module]]
name = "mlp"
kind = "mlp"
dim = 8
hidden = 16
[[module]]
name = "conv"
kind = "conv"
in = 3
out = 8
kernel = 4
stride = 4
input_size = [8, 8]
inputs = []
`)
	const T, b = 16.0, 2.0
	cases := map[string]struct {
		fwd, bwd float64
		act      int64
	}{
		// q 2·T·8·8, k and v 2·T·8·4 each, o 2·T·8·8; causal core
		// 4·B·heads·(S(S+1)/2)·head_dim = 4·2·4·36·2.
		"attn": {
			fwd: 2*T*8*8 + 2*2*T*8*4 + 2*T*8*8 + 4*2*4*36*2,
			// No gradient flows in (the model input), so the q/k/v input
			// gradients are skipped: dW for all four, dX for o, 2.5× core.
			bwd: (2*T*8*8 + 2*2*T*8*4 + 2*T*8*8) + 2*T*8*8 + 2.5*(4*2*4*36*2),
			// Saved: input, q, k, v, core output, lse; eager, k and v
			// as repeat_kv expands them to all 4 heads (2·T·(8−4)·b more).
			act: int64(T*8*b + T*8*b + 2*T*4*b + T*8*b + T*4*4 + 2*T*4*b),
		},
		// SwiGLU: gate and up 2·T·8·16, down 2·T·16·8.
		// Eager saves the input and four hidden-wide tensors: gate, silu(gate), up, product.
		"mlp": {fwd: 3 * 2 * T * 8 * 16, bwd: 2 * 3 * 2 * T * 8 * 16, act: int64(T*8*b + 4*T*16*b)},
		// 2×2 output positions per image, 2 images: 2·(2·4)·8·3·16.
		"conv": {fwd: 2 * 8 * 8 * 3 * 16, bwd: 2 * 8 * 8 * 3 * 16, act: int64(2 * 3 * 64 * b)},
	}
	for name, want := range cases {
		id, _ := m.ModuleByName(name)
		c := m.Modules[id].Cost
		if c.FlopsFwd != want.fwd || c.FlopsBwd != want.bwd || c.ActivationBytes != want.act {
			t.Errorf("%s: fwd %g bwd %g act %d; want %g %g %d", name, c.FlopsFwd, c.FlopsBwd, c.ActivationBytes, want.fwd, want.bwd, want.act)
		}
	}
	if p := m.Params[m.Modules[mustID(t, m, "conv")].Params[0]]; !equalShape(p.Shape, []int64{8, 3, 4, 4}) {
		t.Errorf("conv weight shape %v", p.Shape)
	}
}

func mustID(t *testing.T, m *Model, name string) ModuleID {
	t.Helper()
	id, err := m.ModuleByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestCheckpointing(t *testing.T) {
	body := `
[[module]]
name = "emb"
kind = "embedding"
num = 16
dim = 8
[[module]]
name = "layers"
repeat = 2
[[module.module]]
name = "norm"
kind = "norm"
dim = 8
[[module.module]]
name = "mlp"
kind = "mlp"
dim = 8
hidden = 16
`
	load := func(mode string) *Model {
		m, err := Load("ckpt.toml", []byte(strings.Replace(header, "seq_len = 8", "seq_len = 8\ncheckpointing = \""+mode+"\"", 1)+body))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	none, full, sel := load("none"), load("full"), load("selective-op")
	const T, b = 16, 4 // fp32 activations: no param_dtype
	layer := func(m *Model) Cost { return m.Modules[mustID(t, m, "layers.0")].Cost }

	normSaved := int64(T*8*b + T*4 + T*8*4) // eager: the fp32 copy and the cast back, not x
	mlpSaved := int64(T*8*b + 4*T*16*b)     // eager: gate, silu(gate), up, product
	if got := layer(none).ActivationBytes; got != normSaved+mlpSaved {
		t.Errorf("none: layer saves %d, want %d", got, normSaved+mlpSaved)
	}
	// Full: the region keeps only its input and recomputes its forward.
	if got := layer(full).ActivationBytes; got != T*8*b {
		t.Errorf("full: layer saves %d, want its input %d", got, T*8*b)
	}
	if got, want := layer(full).FlopsRecompute, layer(none).FlopsFwd; got != want {
		t.Errorf("full: recompute %g, want the forward %g", got, want)
	}
	if got, want := layer(full).FlopsBwd, layer(none).FlopsBwd+layer(none).FlopsFwd; got != want {
		t.Errorf("full: backward %g, want %g", got, want)
	}
	if got := layer(full).RecomputeBytes; got != normSaved+mlpSaved {
		t.Errorf("full: recompute bytes %d, want %d", got, normSaved+mlpSaved)
	}
	// Selective-op, torchtitan's policy: the region keeps its input and
	// the outputs of its 1st and 3rd matmuls (w1, w2), and recomputes the
	// 2nd (w3) and the norm; the count starts again in each region.
	for _, name := range []string{"layers.0", "layers.1"} {
		c := sel.Modules[mustID(t, sel, name)].Cost
		if got, want := c.ActivationBytes, int64(T*8*b+T*16*b+T*8*b); got != want {
			t.Errorf("selective-op: %s saves %d, want %d", name, got, want)
		}
		if got, want := c.FlopsRecompute, float64(2*T*8*16); got != want {
			t.Errorf("selective-op: %s recomputes %g FLOPs, want w3's %g", name, got, want)
		}
		if got, want := c.RecomputeBytes, normSaved+mlpSaved-c.ActivationBytes; got != want {
			t.Errorf("selective-op: %s recompute bytes %d, want %d", name, got, want)
		}
	}
	// Outside the repeated block nothing is checkpointed.
	emb := func(m *Model) Cost { return m.Modules[mustID(t, m, "emb")].Cost }
	if !reflect.DeepEqual(emb(full), emb(none)) {
		t.Errorf("the embedding is not in a region but its cost changed: %+v vs %+v", emb(full), emb(none))
	}
	if !full.Modules[mustID(t, full, "layers.1")].Checkpoint || none.Modules[mustID(t, none, "layers.1")].Checkpoint {
		t.Error("checkpoint regions are wrong")
	}
}

func TestTiedParameters(t *testing.T) {
	m := mustLoad(t, `
[[module]]
name = "emb"
kind = "embedding"
num = 16
dim = 8
[[module]]
name = "head"
kind = "linear"
in = 8
out = 16
tied_to = "emb.weight"
`)
	head := m.Params[m.Modules[mustID(t, m, "head")].Params[0]]
	if head.TiedTo == NoParam || m.Params[head.TiedTo].Name != "emb.weight" {
		t.Fatalf("head.weight not tied: %+v", head)
	}
	if s := m.Stats(); s.Params != 16*8 || s.Tensors != 1 {
		t.Errorf("tied weight counted twice: %d params, %d tensors", s.Params, s.Tensors)
	}
}

// TestSelectiveOpLlamaBlock: in a Llama block the multiplies run wq, wk,
// wv, wo, w1, w3, w2; torchtitan's per-op policy keeps wq, wv, w1 and w2's
// outputs and the attention core's output and log-sum-exp, and recomputes
// wk, wo and w3 (not the core).
func TestSelectiveOpLlamaBlock(t *testing.T) {
	body := `
[[module]]
name = "layers"
repeat = 2
[[module.module]]
name = "attention_norm"
kind = "norm"
dim = 8
[[module.module]]
name = "attention"
kind = "attention"
dim = 8
heads = 2
kv_heads = 1
[[module.module]]
name = "ffn_norm"
kind = "norm"
dim = 8
[[module.module]]
name = "feed_forward"
kind = "mlp"
dim = 8
hidden = 16
`
	m, err := Load("sac.toml", []byte(strings.Replace(header, "seq_len = 8", "seq_len = 8\ncheckpointing = \"selective-op\"", 1)+body))
	if err != nil {
		t.Fatal(err)
	}
	const T, b = 16, 4
	c := m.Modules[mustID(t, m, "layers.1")].Cost
	// input, wq, wv, core output, lse (2 heads, fp32), w1, w2
	if got, want := c.ActivationBytes, int64(T*8*b+T*8*b+T*4*b+T*8*b+T*2*4+T*16*b+T*8*b); got != want {
		t.Errorf("saves %d, want %d", got, want)
	}
	if got, want := c.FlopsRecompute, float64(2*T*8*4+2*T*8*8+2*T*8*16); got != want {
		t.Errorf("recomputes %g FLOPs, want wk, wo and w3's %g", got, want)
	}
	// Compiled, the partitioner keeps only what backward reads: w2's
	// output goes into the residual stream, read by nothing in the
	// block, so it is not kept (bench/torchmem/blockmem.py); what is
	// recomputed is the same.
	mc, err := Load("sac.toml", []byte(strings.Replace(header, "seq_len = 8", "seq_len = 8\ncheckpointing = \"selective-op\"\ncompile = true", 1)+body))
	if err != nil {
		t.Fatal(err)
	}
	cc := mc.Modules[mustID(t, mc, "layers.1")].Cost
	if got, want := cc.ActivationBytes, c.ActivationBytes-T*8*b; got != want {
		t.Errorf("compiled: saves %d, want %d (eager's %d less w2's output)", got, want, c.ActivationBytes)
	}
	if cc.FlopsRecompute != c.FlopsRecompute {
		t.Errorf("compiled: recomputes %g FLOPs, eager %g; want the same", cc.FlopsRecompute, c.FlopsRecompute)
	}
}
