package plans_test

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
)

// zooModel is what the test knows about a zoo model independently of ir:
// figures worked out by hand from the architecture (see each file's header).
type zooModel struct {
	name string
	// Parameter elements, tied parameters counted once.
	total, trainable, frozen int64
	world                    int
	microBatch, seqLen       int64
	checkpointed             bool
	// ties maps every tied alias to the parameter that owns its storage.
	ties map[string]string
	flops
}

// flops holds what the forward-FLOPs estimate needs.
//
// The estimate of one forward pass over a micro-batch of B sequences of s
// tokens (T = B·s) is
//
//	F = 2·T·N + Σ over attention layers of the core's QKᵀ and PV,
//
// where N counts the weights every token multiplies once (all parameters but
// the embedding tables that are only looked up; a table reused as the output
// projection counts once; the few norm weights are left in), and the core
// costs 2·s_kv·d_attn FLOPs per query for each of QKᵀ and PV, d_attn = heads ×
// head_dim: 4·B·s·s_kv·d_attn for bidirectional and cross-attention layers,
// half, 2·B·s²·d_attn, for causal ones. For a dense decoder this is Kaplan
// et al.'s C_fwd = 2N + 2·n_layer·n_ctx·d_attn per token. For Mixtral N counts
// the active parameters: the router and top_k of the experts per token.
type flops struct {
	matmulParams int64
	// outputParams are the output projection's, the part of matmulParams
	// outside the repeated blocks (which full checkpointing recomputes).
	outputParams int64
	dAttn        int64
	// Attention layers by sort; cross-attention reads kvLen keys.
	causal, bidirectional, cross, kvLen int64
	// fullTraining: every parameter trains, so the backward estimate applies.
	fullTraining bool
	// recomputed are the weights of the multiplies per-op selective
	// checkpointing recomputes in backward (docs/model-format.md,
	// selective-op); 0 with full checkpointing, which recomputes the
	// repeated blocks whole.
	recomputed int64
}

var zoo = []zooModel{
	{
		name: "gpt2-124m", total: 124_439_808, trainable: 124_439_808, world: 8,
		microBatch: 32, seqLen: 1024,
		ties: map[string]string{"lm_head.weight": "transformer.wte.weight"},
		// All but wpe (50257 × 768 wte is lm_head's weight).
		flops: flops{matmulParams: 124_439_808 - 1024*768, outputParams: 50257 * 768,
			dAttn: 768, causal: 12, fullTraining: true},
	},
	{
		name: "llama3-8b", total: 8_030_261_248, trainable: 8_030_261_248, world: 8,
		microBatch: 1, seqLen: 8192, checkpointed: true,
		flops: flops{matmulParams: 8_030_261_248 - 128256*4096, outputParams: 128256 * 4096,
			dAttn: 32 * 128, causal: 32, fullTraining: true},
	},
	{
		// The same model as llama3-8b, micro-batch 2 under per-op
		// selective checkpointing (torchtitan's benchmark setup).
		name: "llama3-8b-torchtitan", total: 8_030_261_248, trainable: 8_030_261_248, world: 8,
		microBatch: 2, seqLen: 8192, checkpointed: true,
		// Selective-op keeps wq, wv, w1 and w2's outputs and recomputes
		// wk (4096 × 1024), wo (4096 × 4096) and w3 (4096 × 14336) in
		// each of the 32 blocks.
		flops: flops{matmulParams: 8_030_261_248 - 128256*4096, outputParams: 128256 * 4096,
			dAttn: 32 * 128, causal: 32, fullTraining: true, recomputed: 32 * (4096*1024 + 4096*4096 + 4096*14336)},
	},
	{
		name: "llama3-8b-lora", total: 8_037_076_992, trainable: 6_815_744, frozen: 8_030_261_248, world: 8,
		microBatch: 1, seqLen: 8192,
		flops: flops{matmulParams: 8_037_076_992 - 128256*4096, outputParams: 128256 * 4096,
			dAttn: 32 * 128, causal: 32},
	},
	{
		name: "llama3-70b", total: 70_553_706_496, trainable: 70_553_706_496, world: 64,
		microBatch: 1, seqLen: 8192, checkpointed: true,
		flops: flops{matmulParams: 70_553_706_496 - 128256*8192, outputParams: 128256 * 8192,
			dAttn: 64 * 128, causal: 80, fullTraining: true},
	},
	{
		name: "llama3.1-405b", total: 405_853_388_800, trainable: 405_853_388_800, world: 512,
		microBatch: 1, seqLen: 4096, checkpointed: true,
		flops: flops{matmulParams: 405_853_388_800 - 128256*16384, outputParams: 128256 * 16384,
			dAttn: 128 * 128, causal: 126, fullTraining: true},
	},
	{
		name: "mixtral-8x7b", total: 46_702_792_704, trainable: 46_702_792_704, world: 64,
		microBatch: 1, seqLen: 8192, checkpointed: true,
		// Active: all but 6 of the 8 experts' 3 × 4096 × 14336 in each of
		// 32 layers, less the embedding.
		flops: flops{matmulParams: 46_702_792_704 - 32*6*3*4096*14336 - 32000*4096, outputParams: 32000 * 4096,
			dAttn: 32 * 128, causal: 32, fullTraining: true},
	},
	{
		name: "t5-base", total: 222_903_552, trainable: 222_903_552, world: 8,
		microBatch: 16, seqLen: 512,
		ties: map[string]string{
			"encoder.embed_tokens.weight": "shared.weight",
			"decoder.embed_tokens.weight": "shared.weight",
			"lm_head.weight":              "shared.weight",
		},
		// All but the two 32 × 12 relative-attention-bias tables; shared
		// counts once, as lm_head. 12 bidirectional encoder layers, 12
		// causal decoder self-attentions, 12 cross-attentions over the 512
		// encoder tokens.
		flops: flops{matmulParams: 222_903_552 - 2*32*12, outputParams: 32128 * 768,
			dAttn: 12 * 64, causal: 12, bidirectional: 12, cross: 12, kvLen: 512},
	},
	{
		name: "vit-b16", total: 86_567_656, trainable: 86_567_656, world: 8,
		microBatch: 128, seqLen: 197,
		// All but cls_token and pos_embed, every weight over all 197
		// tokens: the patch convolution really sees 196 patches, and the
		// head the class token alone (ir, like this estimate, costs it over
		// 197 tokens; the file says so).
		flops: flops{matmulParams: 86_567_656 - 768 - 197*768, outputParams: 768*1000 + 1000,
			dAttn: 12 * 64, bidirectional: 12},
	},
}

func load(t *testing.T, name string) *ir.Model {
	t.Helper()
	src, file, ok := plans.Source(name)
	if !ok {
		t.Fatalf("plans.Source(%q): not found", name)
	}
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func zooEntry(t *testing.T, name string) zooModel {
	t.Helper()
	for _, z := range zoo {
		if z.name == name {
			return z
		}
	}
	t.Fatalf("%s is not in the test's table", name)
	return zooModel{}
}

func module(t *testing.T, m *ir.Model, name string) *ir.Module {
	t.Helper()
	id, err := m.ModuleByName(name)
	if err != nil {
		t.Fatalf("%s: %v", m.Name, err)
	}
	return &m.Modules[id]
}

// TestZooTableCoversNames keeps the table below and the zoo in step: a new
// model file needs its figures here.
func TestZooTableCoversNames(t *testing.T) {
	var names []string
	for _, z := range zoo {
		names = append(names, z.name)
	}
	slices.Sort(names)
	if got := plans.Names(); !slices.Equal(got, names) {
		t.Errorf("plans.Names() = %v, the test's table has %v", got, names)
	}
}

func TestNamesListsEveryFile(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".toml"); ok && !e.IsDir() {
			files = append(files, name)
		}
	}
	slices.Sort(files)
	if got := plans.Names(); !slices.Equal(got, files) {
		t.Errorf("plans.Names() = %v, the directory holds %v", got, files)
	}
	if len(files) < 8 {
		t.Errorf("only %d models in the zoo", len(files))
	}
}

func TestSource(t *testing.T) {
	for _, name := range plans.Names() {
		src, file, ok := plans.Source(name)
		if !ok {
			t.Errorf("Source(%q) failed", name)
			continue
		}
		if want := "plans/" + name + ".toml"; file != want {
			t.Errorf("Source(%q) file = %q, want %q", name, file, want)
		}
		disk, err := os.ReadFile(name + ".toml")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(src, disk) {
			t.Errorf("Source(%q) differs from %s.toml", name, name)
		}
	}
	for _, name := range []string{"no-such-model", "", "llama3-8b.toml", "../plans/llama3-8b", "LLAMA3-8B", "plans"} {
		if src, file, ok := plans.Source(name); ok || src != nil || file != "" {
			t.Errorf("Source(%q) = %d bytes, %q, %v; want nothing", name, len(src), file, ok)
		}
	}
}

func TestZooLoads(t *testing.T) {
	for _, name := range plans.Names() {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			for _, w := range m.Warnings {
				t.Errorf("warning: %v", w)
			}
			if err := ir.Verify(m); err != nil {
				t.Error(err)
			}
			if m.Name != name {
				t.Errorf("[model] name = %q, want the file's name %q", m.Name, name)
			}
		})
	}
}

func TestZooParameterCounts(t *testing.T) {
	for _, z := range zoo {
		t.Run(z.name, func(t *testing.T) {
			m := load(t, z.name)
			s := m.Stats()
			if s.Params != z.total || s.Trainable != z.trainable || s.Frozen != z.frozen {
				t.Errorf("params %d total, %d trainable, %d frozen; want %d, %d, %d",
					s.Params, s.Trainable, s.Frozen, z.total, z.trainable, z.frozen)
			}
			if s.Trainable+s.Frozen != s.Params {
				t.Errorf("trainable %d + frozen %d != total %d", s.Trainable, s.Frozen, s.Params)
			}
			// The same count by hand over the parameter list: aliases hold no
			// storage of their own.
			var sum int64
			for _, p := range m.Params {
				if p.TiedTo == ir.NoParam {
					sum += p.Numel
				}
			}
			if sum != z.total {
				t.Errorf("summing owned parameters gives %d, want %d", sum, z.total)
			}
			c, tr := m.Cluster, m.Train
			if c.WorldSize != z.world {
				t.Errorf("world size %d, want %d", c.WorldSize, z.world)
			}
			if tr.MicroBatch != z.microBatch || tr.SeqLen != z.seqLen {
				t.Errorf("micro-batch %d × %d tokens, want %d × %d", tr.MicroBatch, tr.SeqLen, z.microBatch, z.seqLen)
			}
			if got := tr.Checkpointing != ir.CheckpointNone; got != z.checkpointed {
				t.Errorf("checkpointing %v, the table says checkpointed = %v", tr.Checkpointing, z.checkpointed)
			}
		})
	}
}

func TestTiedParamsResolveToOwner(t *testing.T) {
	for _, z := range zoo {
		t.Run(z.name, func(t *testing.T) {
			m := load(t, z.name)
			got := map[string]string{}
			for _, p := range m.Params {
				if p.TiedTo == ir.NoParam {
					continue
				}
				owner := &m.Params[p.TiedTo]
				got[p.Name] = owner.Name
				if owner.TiedTo != ir.NoParam {
					t.Errorf("%s is tied to %s, itself an alias", p.Name, owner.Name)
				}
				if !slices.Equal(p.Shape, owner.Shape) || p.DType != owner.DType || p.RequiresGrad != owner.RequiresGrad {
					t.Errorf("%s %v %s differs from its owner %s %v %s", p.Name, p.Shape, p.DType, owner.Name, owner.Shape, owner.DType)
				}
			}
			want := z.ties
			if want == nil {
				want = map[string]string{}
			}
			if !maps.Equal(got, want) {
				t.Errorf("ties %v, want %v", got, want)
			}
		})
	}
}

// TestFLOPsEstimate checks each model's forward FLOPs per micro-batch
// against the estimate documented on flops, and for fully trained models
// the backward: twice the forward's matmuls (input and weight gradients),
// 2.5 times the attention core (FlashAttention's backward runs five
// matmuls against the forward's two), plus one more forward of the repeated
// blocks when full checkpointing recomputes them.
func TestFLOPsEstimate(t *testing.T) {
	for _, z := range zoo {
		t.Run(z.name, func(t *testing.T) {
			m := load(t, z.name)
			s := m.Stats()
			B, seq := float64(z.microBatch), float64(z.seqLen)
			T := B * seq
			e := z.flops
			d := float64(e.dAttn)
			attn := float64(e.causal)*2*B*seq*seq*d +
				float64(e.bidirectional)*4*B*seq*seq*d +
				float64(e.cross)*4*B*seq*float64(e.kvLen)*d
			linear := 2 * T * float64(e.matmulParams)
			fwd := linear + attn
			within(t, "forward FLOPs", s.FlopsFwd, fwd, 0.02)
			if !e.fullTraining {
				return
			}
			bwd := 2*linear + 2.5*attn
			switch {
			case e.recomputed > 0:
				bwd += 2 * T * float64(e.recomputed)
			case z.checkpointed:
				bwd += linear - 2*T*float64(e.outputParams) + attn
			}
			within(t, "backward FLOPs", s.FlopsBwd, bwd, 0.02)
		})
	}
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if rel := math.Abs(got-want) / want; !(rel <= tol) {
		t.Errorf("%s = %.6g, estimate %.6g: off by %.2f%%, more than %.0f%%", what, got, want, 100*rel, 100*tol)
	} else {
		t.Logf("%s = %.6g, estimate %.6g (%+.3f%%)", what, got, want, 100*(got-want)/want)
	}
}

// lastCompute is the compute module whose output is module id's output:
// its last descendant along last children.
func lastCompute(m *ir.Model, id ir.ModuleID) ir.ModuleID {
	for !m.Modules[id].Compute && len(m.Modules[id].Children) > 0 {
		c := m.Modules[id].Children
		id = c[len(c)-1]
	}
	return id
}

func TestT5Dataflow(t *testing.T) {
	m := load(t, "t5-base")
	encID, err := m.ModuleByName("encoder")
	if err != nil {
		t.Fatal(err)
	}
	encOut := lastCompute(m, encID)
	if got := m.Modules[encOut].Name; got != "encoder.final_layer_norm" {
		t.Fatalf("the encoder's last module is %q", got)
	}
	pos := map[ir.ModuleID]int{}
	for i, id := range m.Forward {
		pos[id] = i
	}
	lastEncoder := -1
	for i := range m.Modules {
		if mod := &m.Modules[i]; mod.Compute && strings.HasPrefix(mod.Name, "encoder.") {
			lastEncoder = max(lastEncoder, pos[mod.ID])
		}
	}

	var cross []string
	for _, mod := range m.Modules {
		if strings.HasSuffix(mod.Name, ".EncDecAttention") {
			cross = append(cross, mod.Name)
		}
	}
	if len(cross) != 12 {
		t.Fatalf("%d cross-attention modules, want 12: %v", len(cross), cross)
	}
	for i, name := range cross {
		if want := fmt.Sprintf("decoder.block.%d.layer.1.EncDecAttention", i); name != want {
			t.Errorf("cross-attention %d is %q, want %q", i, name, want)
		}
		mod := module(t, m, name)
		if !mod.Compute || mod.Kind != ir.KindAttention {
			t.Errorf("%s: kind %v, compute %v", name, mod.Kind, mod.Compute)
		}
		queries := module(t, m, strings.TrimSuffix(name, "EncDecAttention")+"layer_norm")
		if !slices.Contains(mod.Inputs, encOut) || !slices.Contains(mod.Inputs, queries.ID) || len(mod.Inputs) != 2 {
			t.Errorf("%s reads %v, want the encoder's output and its own layer_norm", name, moduleNames(m, mod.Inputs))
		}
		if pos[mod.ID] <= lastEncoder {
			t.Errorf("%s runs at %d, before the encoder's last module at %d", name, pos[mod.ID], lastEncoder)
		}
	}

	// Every self-attention reads its own stack's position bias.
	for _, stack := range []string{"encoder", "decoder"} {
		bias := module(t, m, stack+".relative_attention_bias")
		for i := 0; i < 12; i++ {
			sa := module(t, m, fmt.Sprintf("%s.block.%d.layer.0.SelfAttention", stack, i))
			if !slices.Contains(sa.Inputs, bias.ID) {
				t.Errorf("%s reads %v, not %s", sa.Name, moduleNames(m, sa.Inputs), bias.Name)
			}
		}
		// The stacks read token ids, not each other's output or shared's.
		if in := module(t, m, stack+".embed_tokens").Inputs; len(in) != 0 {
			t.Errorf("%s.embed_tokens reads %v", stack, moduleNames(m, in))
		}
	}
	if in := module(t, m, "lm_head").Inputs; len(in) != 1 || m.Modules[in[0]].Name != "decoder.final_layer_norm" {
		t.Errorf("lm_head reads %v, want decoder.final_layer_norm", moduleNames(m, in))
	}
}

func moduleNames(m *ir.Model, ids []ir.ModuleID) []string {
	var out []string
	for _, id := range ids {
		out = append(out, m.Modules[id].Name)
	}
	return out
}

func TestLoRATrainsOnlyAdapters(t *testing.T) {
	m := load(t, "llama3-8b-lora")
	const rank, dim, kvDim = 16, 4096, 1024
	var tensors int
	var numel int64
	for _, p := range m.Params {
		mod := m.Modules[p.Module].Name
		isLoRA := strings.HasSuffix(mod, ".lora_A") || strings.HasSuffix(mod, ".lora_B")
		if p.RequiresGrad != isLoRA {
			t.Errorf("%s: requires_grad %v", p.Name, p.RequiresGrad)
		}
		if !isLoRA {
			continue
		}
		tensors++
		numel += p.Numel
		proj := mod[:strings.LastIndexByte(mod, '.')]
		var want []int64
		switch {
		case strings.HasSuffix(p.Name, "q_proj.lora_A.weight"), strings.HasSuffix(p.Name, "v_proj.lora_A.weight"):
			want = []int64{rank, dim}
		case strings.HasSuffix(p.Name, "q_proj.lora_B.weight"):
			want = []int64{dim, rank}
		case strings.HasSuffix(p.Name, "v_proj.lora_B.weight"):
			want = []int64{kvDim, rank}
		default:
			t.Errorf("adapter %s on %s, which is not a q or v projection", p.Name, proj)
			continue
		}
		if !slices.Equal(p.Shape, want) {
			t.Errorf("%s has shape %v, want %v", p.Name, p.Shape, want)
		}
	}
	if tensors != 32*2*2 || numel != 6_815_744 {
		t.Errorf("%d adapter tensors of %d elements, want 128 of 6,815,744", tensors, numel)
	}
	// A frozen weight gets no gradient: the frozen lm_head's backward is its
	// input gradient alone, as much as its forward.
	if c := module(t, m, "lm_head").Cost; c.FlopsBwd != c.FlopsFwd {
		t.Errorf("frozen lm_head: backward %g, forward %g", c.FlopsBwd, c.FlopsFwd)
	}
	// The frozen embedding sees no gradient at all.
	if c := module(t, m, "model.embed_tokens").Cost; c.FlopsBwd != 0 || c.ActivationBytes != 0 {
		t.Errorf("frozen embedding: backward %g FLOPs, %d activation bytes", c.FlopsBwd, c.ActivationBytes)
	}
}

func TestLlama405BHSDPMesh(t *testing.T) {
	m := load(t, "llama3.1-405b")
	c := m.Cluster
	if c.Mesh == nil {
		t.Fatal("no HSDP mesh")
	}
	r, s := c.Mesh.Replicate, c.Mesh.Shard
	if r*s != c.WorldSize || c.WorldSize != 512 {
		t.Errorf("mesh %d × %d for a world of %d", r, s, c.WorldSize)
	}
	if r < 2 {
		t.Errorf("mesh replicates %d times: not HSDP", r)
	}
	if s%c.GPUsPerNode != 0 {
		t.Errorf("shard groups of %d split nodes of %d", s, c.GPUsPerNode)
	}
	if c.ShardSize() != s {
		t.Errorf("ShardSize() = %d, want %d", c.ShardSize(), s)
	}
	if c.Nodes() != 64 || c.InterNodeBandwidth != 50e9 {
		t.Errorf("%d nodes linked at %g B/s, want 64 on InfiniBand NDR (50e9)", c.Nodes(), c.InterNodeBandwidth)
	}
}

// TestMixtralRouting: with balanced routing each of the 8 experts sees
// top_k/experts = 2/8 of the tokens, so one MoE layer's forward is the
// router plus top_k SwiGLU experts' worth of work per token, not all 8.
func TestMixtralRouting(t *testing.T) {
	m := load(t, "mixtral-8x7b")
	const (
		T      = 8192.0 // tokens per micro-batch
		dim    = 4096.0
		hidden = 14336.0
		E      = 8.0
		k      = 2.0
	)
	router := 2 * T * dim * E                         // 536,870,912
	experts := E * 3 * 2 * (k / E * T) * dim * hidden // 3 projections of each expert over its 2048 tokens
	want := router + experts
	if want != 5_772_972_916_736 {
		t.Fatalf("hand figure %.0f, want 536,870,912 + 5,772,436,045,824", want)
	}
	for _, layer := range []int{0, 31} {
		mod := module(t, m, fmt.Sprintf("model.layers.%d.block_sparse_moe", layer))
		if mod.Kind != ir.KindMoE || !mod.Compute {
			t.Fatalf("%s: kind %v, compute %v", mod.Name, mod.Kind, mod.Compute)
		}
		if got := mod.Cost.FlopsFwd; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s forward %.6g FLOPs, want %.6g (dense over all experts would be %.6g)",
				mod.Name, got, want, router+E*6*T*dim*hidden)
		}
		// Full checkpointing: input and weight gradients plus the recompute.
		if got := mod.Cost.FlopsBwd; math.Abs(got-3*want) > 1e-9*want {
			t.Errorf("%s backward %.6g FLOPs, want 3 × forward = %.6g", mod.Name, got, 3*want)
		}
	}
	// Every expert's three projections are parameters of the MoE module.
	for e := 0; e < 8; e++ {
		for _, w := range []string{"w1", "w2", "w3"} {
			module(t, m, fmt.Sprintf("model.layers.0.block_sparse_moe.experts.%d.%s", e, w))
		}
	}
}
