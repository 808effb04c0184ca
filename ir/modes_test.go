package ir

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const modesBody = `
[[module]]
name = "layers"
repeat = 4
[[module.module]]
name = "norm"
kind = "norm"
dim = 8
[[module.module]]
name = "attn"
kind = "attention"
dim = 8
heads = 2
[[module.module]]
name = "mlp"
kind = "mlp"
dim = 8
hidden = 16
`

// modesCost loads modesBody's training file with train's lines added and
// body for its modules, and returns the named module's cost.
func modesCost(t *testing.T, train, body, module string) Cost {
	t.Helper()
	m, err := Load("modes.toml", []byte("[train]\nmicro_batch = 2\nseq_len = 8\n"+train+"\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n"+body))
	if err != nil {
		t.Fatal(err)
	}
	return m.Modules[mustID(t, m, module)].Cost
}

func loadTrain(t *testing.T, train string) (*Model, error) {
	t.Helper()
	return Load("modes.toml", []byte("[train]\nmicro_batch = 2\nseq_len = 8\n"+train+"\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n"+modesBody))
}

// TestSelectiveLayer: torchtitan's selective-layer checkpoints every
// interval-th block, counting from 1; the others keep everything.
func TestSelectiveLayer(t *testing.T) {
	for _, c := range []struct {
		train string
		want  []bool
	}{
		{`checkpointing = "selective-layer"`, []bool{false, true, false, true}},
		{"checkpointing = \"selective-layer\"\ncheckpoint_interval = 3", []bool{false, false, true, false}},
		{"checkpointing = \"selective-layer\"\ncheckpoint_interval = 1", []bool{true, true, true, true}},
		{`checkpointing = "full"`, []bool{true, true, true, true}},
	} {
		m, err := loadTrain(t, c.train)
		if err != nil {
			t.Fatalf("%s: %v", c.train, err)
		}
		for i, want := range c.want {
			id := mustID(t, m, "layers."+string(rune('0'+i)))
			if got := m.Modules[id].Checkpoint; got != want {
				t.Errorf("%q: layers.%d checkpointed = %v, want %v", c.train, i, got, want)
			}
		}
	}
	if _, err := loadTrain(t, "checkpointing = \"full\"\ncheckpoint_interval = 2"); err == nil || !strings.Contains(err.Error(), "checkpoint_interval applies to") {
		t.Errorf("checkpoint_interval with full: %v", err)
	}
}

// TestSelectiveRenamed: the old name still loads, as selective-op, with a
// warning.
func TestSelectiveRenamed(t *testing.T) {
	old, err := loadTrain(t, `checkpointing = "selective"`)
	if err != nil {
		t.Fatal(err)
	}
	if old.Train.Checkpointing != CheckpointSelective || old.Train.Checkpointing.String() != "selective-op" {
		t.Errorf("selective loads as %v", old.Train.Checkpointing)
	}
	if len(old.Warnings) == 0 || !strings.Contains(old.Warnings.Error(), "selective-op") {
		t.Errorf("no warning for the old name: %v", old.Warnings)
	}
	renamed, err := loadTrain(t, `checkpointing = "selective-op"`)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(renamed.Modules[0].Cost, old.Modules[0].Cost) {
		t.Error("selective and selective-op cost differently")
	}
}

// TestCompileFusesElementwise: torch.compile leaves the matmuls and the
// attention core alone and cuts the element-wise traffic.
func TestCompileFusesElementwise(t *testing.T) {
	eager, err := loadTrain(t, "")
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := loadTrain(t, "compile = true")
	if err != nil {
		t.Fatal(err)
	}
	e, c := eager.Modules[0].Cost, compiled.Modules[0].Cost
	if e.FlopsFwd != c.FlopsFwd || e.AttnFlopsFwd != c.AttnFlopsFwd || e.AttnFlopsFwd <= 0 {
		t.Errorf("compile changed the FLOPs: %+v vs %+v", e, c)
	}
	if !(c.ElemBytesFwd > 0 && c.ElemBytesFwd < e.ElemBytesFwd && c.ElemBytesBwd < e.ElemBytesBwd) {
		t.Errorf("element-wise bytes eager %d/%d, compiled %d/%d", e.ElemBytesFwd, e.ElemBytesBwd, c.ElemBytesFwd, c.ElemBytesBwd)
	}
	// Per layer, eager: norm T·8·(7b+28) with b = 4 (fp32 activations),
	// RoPE on q and k T·16·(2b+16) (a fused core's output needs no layout
	// copy), SwiGLU T·16·5b; T = 16 tokens.
	const T, b = 16, 4
	want := int64(T*8*(7*b+28) + T*16*(2*b+16) + T*16*5*b)
	if got := eager.Modules[mustID(t, eager, "layers.0")].Cost.ElemBytesFwd; got != want {
		t.Errorf("eager layer element-wise bytes %d, want %d", got, want)
	}
}

// TestCompileKeepsComplexRoPE: torchtitan's RoPE multiplies complex
// numbers, which Inductor runs as aten's kernel, so compiled it moves the
// eager bytes (T·16·(2b+16) per layer, q and k of width 8) where a real
// RoPE moves T·16·2b; nothing else changes, and eager forward is the
// same either way.
func TestCompileKeepsComplexRoPE(t *testing.T) {
	complexBody := strings.Replace(modesBody, "heads = 2\n", "heads = 2\nrope = \"complex\"\n", 1)
	load := func(train, body string) Cost { return modesCost(t, train, body, "layers.0") }
	const T, b = 16, 4
	real, cplx := load("compile = true", modesBody), load("compile = true", complexBody)
	if d := cplx.ElemBytesFwd - real.ElemBytesFwd; d != T*16*16 {
		t.Errorf("compiled complex RoPE moves %d bytes more than real, want %d", d, T*16*16)
	}
	if cplx.FlopsFwd != real.FlopsFwd || cplx.ActivationBytes != real.ActivationBytes {
		t.Errorf("rope changed more than the element-wise bytes: %+v vs %+v", cplx, real)
	}
	e, ec := load("", modesBody), load("", complexBody)
	if e.ElemBytesFwd != ec.ElemBytesFwd {
		t.Errorf("eager element-wise bytes %d (real) vs %d (complex), want equal", e.ElemBytesFwd, ec.ElemBytesFwd)
	}
	// Backward: complex RoPE's, and fused RoPE's, moves what its forward
	// does (derivatives.yaml's mul: the table needs no gradient); eager
	// rotate_half's twice.
	if d := e.ElemBytesBwd - ec.ElemBytesBwd; d != T*16*(2*b+16) {
		t.Errorf("eager real RoPE's backward moves %d bytes more than complex, want %d (once more)", d, T*16*(2*b+16))
	}
	if d := cplx.ElemBytesBwd - real.ElemBytesBwd; d != T*16*16 {
		t.Errorf("compiled complex RoPE's backward moves %d bytes more than real, want %d (each once)", d, T*16*16)
	}
}

// TestMatrixRoPE: ibm-fms's RoPE (a 2 × 2 rotation applied by
// broadcasting in fp32) moves T·16·(2b+32) per layer eager, forward and
// backward alike (one kernel per step each way), where rotate_half moves
// T·16·(2b+16) forward and twice that backward; compiled, both are real
// arithmetic that Inductor fuses, and cost the same.
func TestMatrixRoPE(t *testing.T) {
	matrixBody := strings.Replace(modesBody, "heads = 2\n", "heads = 2\nrope = \"matrix\"\n", 1)
	load := func(train, body string) Cost { return modesCost(t, train, body, "layers.0") }
	const T, b = 16, 4
	real, matrix := load("", modesBody), load("", matrixBody)
	if d := matrix.ElemBytesFwd - real.ElemBytesFwd; d != T*16*16 {
		t.Errorf("eager matrix RoPE moves %d bytes more forward than real, want %d", d, T*16*16)
	}
	if d := real.ElemBytesBwd - matrix.ElemBytesBwd; d != T*16*(2*(2*b+16)-(2*b+32)) {
		t.Errorf("eager real RoPE's backward moves %d bytes more than matrix, want %d", d, T*16*(2*(2*b+16)-(2*b+32)))
	}
	if matrix.FlopsFwd != real.FlopsFwd || matrix.ActivationBytes != real.ActivationBytes {
		t.Errorf("rope changed more than the element-wise bytes: %+v vs %+v", matrix, real)
	}
	cr, cm := load("compile = true", modesBody), load("compile = true", matrixBody)
	if !reflect.DeepEqual(cr, cm) {
		t.Errorf("compiled matrix RoPE costs %+v, real %+v, want equal", cm, cr)
	}
}

// TestLossKind: the loss keeps torchtitan's fp32 log-probabilities for
// backward and holds the logits' fp32 gradient and its cast while its
// backward runs; without the upcast everything stays in the activation
// dtype.
func TestLossKind(t *testing.T) {
	const T, V = 16, 1000
	for _, c := range []struct {
		upcast         string
		saved, scratch int64
	}{
		{"", T * V * 4, T * V * (4 + 4)}, // fp32 activations: b = 4
		{"upcast = false", T * V * 4, T * V * (4 + 4)},
	} {
		src := "[train]\nmicro_batch = 2\nseq_len = 8\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n" +
			"[[module]]\nname = \"output\"\nkind = \"linear\"\nin = 8\nout = 1000\n" +
			"[[module]]\nname = \"loss\"\nkind = \"loss\"\nvocab = 1000\n" + c.upcast + "\n"
		m, err := Load("loss.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		cost := m.Modules[mustID(t, m, "loss")].Cost
		if cost.ActivationBytes != c.saved || cost.ScratchBwd != c.scratch || cost.FlopsFwd != 0 || cost.ElemBytesFwd == 0 {
			t.Errorf("%q: saved %d, scratch %d, flops %g, element-wise %d; want saved %d, scratch %d, no FLOPs",
				c.upcast, cost.ActivationBytes, cost.ScratchBwd, cost.FlopsFwd, cost.ElemBytesFwd, c.saved, c.scratch)
		}
	}
	bf16 := "[train]\nmicro_batch = 2\nseq_len = 8\nactivation_dtype = \"bf16\"\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n" +
		"[[module]]\nname = \"output\"\nkind = \"linear\"\nin = 8\nout = 1000\n" +
		"[[module]]\nname = \"loss\"\nkind = \"loss\"\nvocab = 1000\n"
	for upcast, want := range map[string]int64{"": T * 1000 * 4, "upcast = false\n": T * 1000 * 2} {
		m, err := Load("loss.toml", []byte(bf16+upcast))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Modules[mustID(t, m, "loss")].Cost.ActivationBytes; got != want {
			t.Errorf("bf16 %q: saved %d, want %d", upcast, got, want)
		}
	}
}

// TestExpandableSegments: [train] expandable_segments is PyTorch's
// allocator setting, false unless the file sets it.
func TestExpandableSegments(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{{"", false}, {"expandable_segments = true", true}, {"expandable_segments = false", false}} {
		m, err := loadTrain(t, tc.line)
		if err != nil {
			t.Fatal(err)
		}
		if m.Train.ExpandableSegments != tc.want {
			t.Errorf("%q: expandable segments %t, want %t", tc.line, m.Train.ExpandableSegments, tc.want)
		}
	}
	if _, err := loadTrain(t, `expandable_segments = "yes"`); err == nil || !strings.Contains(err.Error(), "expandable_segments") {
		t.Errorf("a string: %v", err)
	}
}

// TestLossBackwardAndCompile: with bf16 activations the eager loss's
// backward holds two fp32 gradients (the log-probabilities' and the
// logits'); compiled, it keeps the bf16 logits and a per-token fp32
// log-sum-exp and writes a bf16 gradient. `compiled` defaults to
// [train] compile and can say otherwise (torchtitan compiled only the
// blocks before 2025-04).
func TestLossBackwardAndCompile(t *testing.T) {
	const T, V = 16, 1000
	for _, c := range []struct {
		train, loss    string
		saved, scratch int64
	}{
		{"", "", T * V * 4, T * V * 8},
		{"compile = true\n", "", T*V*2 + T*4, T * V * 2},
		{"compile = true\n", "compiled = false\n", T * V * 4, T * V * 8},
		{"", "compiled = true\n", T*V*2 + T*4, T * V * 2},
		{"", "upcast = false\n", T * V * 2, T * V * 4},
	} {
		src := "[train]\nmicro_batch = 2\nseq_len = 8\nactivation_dtype = \"bf16\"\n" + c.train +
			"[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n" +
			"[[module]]\nname = \"output\"\nkind = \"linear\"\nin = 8\nout = 1000\n" +
			"[[module]]\nname = \"loss\"\nkind = \"loss\"\nvocab = 1000\n" + c.loss
		m, err := Load("loss.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		cost := m.Modules[mustID(t, m, "loss")].Cost
		if cost.ActivationBytes != c.saved || cost.ScratchBwd != c.scratch {
			t.Errorf("%q %q: saved %d, scratch %d; want %d, %d", c.train, c.loss, cost.ActivationBytes, cost.ScratchBwd, c.saved, c.scratch)
		}
	}
}

// TestEagerSavedActivations: eager autograd keeps SiLU's output beside its
// input and an RMSNorm's fp32 copy and cast-back output in place of its
// input; compiled, Inductor folds both. Both keep repeat_kv's expanded keys
// and values (bench/torchmem/blockmem.py measured each).
func TestEagerSavedActivations(t *testing.T) {
	body := "[[module]]\nname = \"attn\"\nkind = \"attention\"\ndim = 8\nheads = 4\nkv_heads = 1\n" +
		"[[module]]\nname = \"mlp\"\nkind = \"mlp\"\ndim = 8\nhidden = 16\n" +
		"[[module]]\nname = \"rms\"\nkind = \"norm\"\ndim = 8\n" +
		"[[module]]\nname = \"ln\"\nkind = \"norm\"\nnorm = \"layer\"\ndim = 8\n"
	load := func(train string) *Model {
		m, err := Load("eager.toml", []byte("[train]\nmicro_batch = 2\nseq_len = 8\n"+train+"[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n"+body))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	eager, compiled := load(""), load("compile = true\n")
	const T, b = 16, 4 // fp32 activations
	for name, extra := range map[string]int64{
		"attn": 0,          // the expanded k and v either way
		"mlp":  T * 16 * b, // silu's output
		"rms":  T * 8 * 4,  // the fp32 copy and the cast back, not x
		"ln":   0,          // native_layer_norm keeps its input
	} {
		e := eager.Modules[mustID(t, eager, name)].Cost.ActivationBytes
		c := compiled.Modules[mustID(t, compiled, name)].Cost.ActivationBytes
		if e-c != extra {
			t.Errorf("%s: eager saves %d, compiled %d; want %d more eager", name, e, c, extra)
		}
	}
	// Input, q, k and v expanded to 4 heads of 2 (not the projections'
	// one), the core's output and log-sum-exp.
	attn := compiled.Modules[mustID(t, compiled, "attn")].Cost.ActivationBytes
	if want := int64(T*8*b + T*8*b + 2*T*8*b + T*8*b + T*4*4); attn != want {
		t.Errorf("attn: compiled saves %d, want %d", attn, want)
	}
}

// TestEagerLossBytes: the eager loss moves what its kernels move. Forward:
// the upcast (read b, write 4) when there is one, then log_softmax's
// three reads of a vocabulary-wide row and one write. Backward:
// nll_loss_backward's zero fill, _log_softmax_backward_data's two reads
// of the gradient, one of the output and a write, then the cast back; not
// twice the forward. T = 16 tokens, vocabulary 32, bf16 logits (b = 2).
func TestEagerLossBytes(t *testing.T) {
	const T, V, b = 16, 32, 2
	for _, c := range []struct {
		upcast   bool
		fwd, bwd int64
	}{
		{true, T * V * (b + 4 + 4*4), T * V * (5*4 + 4 + b)},
		{false, T * V * 4 * b, T * V * 5 * b},
	} {
		src := fmt.Sprintf("[model]\ndtype = \"bf16\"\n[train]\nmicro_batch = 2\nseq_len = 8\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n"+
			"[[module]]\nname = \"out\"\nkind = \"linear\"\nin = 8\nout = %d\n[[module]]\nname = \"loss\"\nkind = \"loss\"\nvocab = %d\nupcast = %t\n", V, V, c.upcast)
		m, err := Load("loss.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		got := m.Modules[mustID(t, m, "loss")].Cost
		if got.ElemBytesFwd != c.fwd || got.ElemBytesBwd != c.bwd {
			t.Errorf("upcast %t: loss element-wise bytes %d/%d, want %d/%d", c.upcast, got.ElemBytesFwd, got.ElemBytesBwd, c.fwd, c.bwd)
		}
	}
}

// TestRecomputeStartsAtRegionInput: a checkpointed block's backward reruns
// its forward's element-wise kernels from the block's input, so its first
// norm reruns without the residual add fsdpc counts with it (that sum is
// the previous block's output, kept as the region's input), eager and
// compiled, under full and per-op checkpointing; the block's other norm
// (mlp_norm here, after the attention's add) reruns whole.
func TestRecomputeStartsAtRegionInput(t *testing.T) {
	body := strings.Replace(modesBody, "[[module.module]]\nname = \"mlp\"\n",
		"[[module.module]]\nname = \"mlp_norm\"\nkind = \"norm\"\ndim = 8\n[[module.module]]\nname = \"mlp\"\n", 1)
	const T, b = 16, 4 // fp32 activations (the model's default dtype)
	for _, tc := range []struct {
		train string
		add   int64 // the residual add's bytes per element of dim
	}{
		{"checkpointing = \"full\"", 3 * b},
		{"checkpointing = \"selective-op\"", 3 * b},
		{"checkpointing = \"full\"\ncompile = true", 2 * b},
		{"checkpointing = \"selective-op\"\ncompile = true", 2 * b},
	} {
		t.Run(tc.train, func(t *testing.T) {
			m, err := Load("modes.toml", []byte("[train]\nmicro_batch = 2\nseq_len = 8\n"+tc.train+"\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n"+body))
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"layers.0", "layers.2"} {
				first := m.Modules[mustID(t, m, name+".norm")].Cost
				if got, want := first.ElemBytesRecompute, first.ElemBytesFwd-T*8*tc.add; got != want {
					t.Errorf("%s.norm reruns %d element-wise bytes, want %d (forward %d less the add)", name, got, want, first.ElemBytesFwd)
				}
				second := m.Modules[mustID(t, m, name+".mlp_norm")].Cost
				if second.ElemBytesRecompute != second.ElemBytesFwd || second.ElemBytesFwd == 0 {
					t.Errorf("%s.mlp_norm reruns %d of its %d forward bytes, want all", name, second.ElemBytesRecompute, second.ElemBytesFwd)
				}
				layer := m.Modules[mustID(t, m, name)].Cost
				if got, want := layer.ElemBytesRecompute, layer.ElemBytesFwd-T*8*tc.add; got != want {
					t.Errorf("%s reruns %d element-wise bytes, want %d", name, got, want)
				}
			}
		})
	}
	// Without checkpointing nothing reruns.
	m, err := Load("modes.toml", []byte("[train]\nmicro_batch = 2\nseq_len = 8\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n"+body))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Modules[0].Cost.ElemBytesRecompute; got != 0 {
		t.Errorf("no checkpointing reruns %d bytes, want 0", got)
	}
}

// TestUnfusedCoreCopiesItsOutput: only an unfused attention core (flash =
// false) pays the copy of its output back to (tokens, heads·head_dim),
// T·8·2b forward and twice that backward; SDPA's fused kernels already
// write that layout.
func TestUnfusedCoreCopiesItsOutput(t *testing.T) {
	const T, b = 16, 4
	for _, train := range []string{"", "compile = true"} {
		fused, err := loadTrain(t, train)
		if err != nil {
			t.Fatal(err)
		}
		unfused, err := Load("modes.toml", []byte("[train]\nmicro_batch = 2\nseq_len = 8\n"+train+"\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 4\n"+
			strings.Replace(modesBody, "heads = 2\n", "heads = 2\nflash = false\n", 1)))
		if err != nil {
			t.Fatal(err)
		}
		f, u := fused.Modules[mustID(t, fused, "layers.0.attn")].Cost, unfused.Modules[mustID(t, unfused, "layers.0.attn")].Cost
		if d := u.ElemBytesFwd - f.ElemBytesFwd; d != T*8*2*b {
			t.Errorf("%q: the unfused core moves %d element-wise bytes more forward, want %d", train, d, T*8*2*b)
		}
		if d := u.ElemBytesBwd - f.ElemBytesBwd; d != 2*T*8*2*b {
			t.Errorf("%q: the unfused core moves %d element-wise bytes more backward, want %d", train, d, 2*T*8*2*b)
		}
	}
}

// TestQKNormHasNoResidualAdd: the norms over q and k normalise the
// projections' outputs, which nothing adds to, so they move an RMSNorm's
// bytes without the residual add a block's norms carry: eager 4b+28 bytes
// an element (normPasses' 7b+28 less the add's 3b), compiled 2b (4b less
// the add's 2b). The file's activations are fp32: b = 4.
func TestQKNormHasNoResidualAdd(t *testing.T) {
	withNorm := strings.Replace(modesBody, "heads = 2\n", "heads = 2\nqk_norm = \"head\"\n", 1)
	load := func(train, body string) Cost { return modesCost(t, train, body, "layers.0.attn") }
	const T, qk, b = 16, 8 + 8, 4 // 2 heads of 4 for q, and k at kv_heads = heads
	for _, c := range []struct {
		train string
		per   int64
	}{
		{"", 4*b + 28},
		{"compile = true", 2 * b},
	} {
		if d := load(c.train, withNorm).ElemBytesFwd - load(c.train, modesBody).ElemBytesFwd; d != T*qk*c.per {
			t.Errorf("%q: qk_norm adds %d forward element bytes, want %d (T·(q+k)·%d)", c.train, d, T*qk*c.per, c.per)
		}
	}
}
