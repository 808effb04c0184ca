package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/ir/hf"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
)

func needTorch(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv("FSDPC_TORCH_CONFORMANCE") != "1" {
		t.Skip("builds models with PyTorch: set FSDPC_TORCH_CONFORMANCE=1")
	}
}

// paramLines lists a model's parameters as PyTorch's named_parameters
// (remove_duplicate=False) does: own parameters, then each child's in
// registration order; with name, shape, dtype, requires_grad and tie.
func paramLines(m *ir.Model) []string {
	var out []string
	var walk func(id ir.ModuleID)
	walk = func(id ir.ModuleID) {
		mod := &m.Modules[id]
		for _, pid := range mod.Params {
			p := &m.Params[pid]
			tie := ""
			if p.TiedTo != ir.NoParam {
				tie = " tied to " + m.Params[p.TiedTo].Name
			}
			out = append(out, fmt.Sprintf("%s %v %s grad=%v%s", p.Name, p.Shape, p.DType, p.RequiresGrad, tie))
		}
		reg := mod.Registered
		if reg == nil {
			reg = mod.Children
		}
		for _, c := range reg {
			walk(c)
		}
	}
	walk(0)
	return out
}

// decisions is a plan's FSDP decisions: each group's modules, parameters
// in layout order, shard sizes and policy. A model too large for the
// cluster (DeepSeek-V3's 11B-parameter MoE layers on 80 GB) has no plan;
// then its units and their parameters in FSDP2's order, as the planner
// formed them before it found the plan too large, are what both imports
// must agree on (the predicted memory differs where one measured a
// module the other has a kind for).
func decisions(t *testing.T, m *ir.Model) []string {
	t.Helper()
	var units string
	p, err := planner.Plan(m, planner.Options{DumpAfter: func(pass, text string) {
		if strings.HasPrefix(text, "unit ") {
			units = text
		}
	}})
	if err != nil {
		if !strings.Contains(err.Error(), "does not fit") || units == "" {
			t.Fatalf("plan %s: %v", m.Name, err)
		}
		return append([]string{"no plan: it does not fit"}, strings.Split(units, "\n")...)
	}
	out := make([]string, len(p.Groups))
	for i, g := range p.Groups {
		b, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d:\n  %s\n  %s", i, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d entries against %d", len(a), len(b))
	}
	return ""
}

// TestImportTorchConformanceHF: for every config of ir/hf/testdata (every
// family import hf knows), import hf (Go, from the config's keys) and
// import torch --hf (transformers' own class on the meta device) give the
// same parameters, in the same order, with the same ties, plans with the
// same FSDP decisions, and the same attention, MLP and MoE modules: kind,
// sliding window or chunk per layer, and FLOPs.
func TestImportTorchConformanceHF(t *testing.T) {
	needTorch(t)
	fixtures, err := filepath.Glob("../../ir/hf/testdata/*.json")
	if err != nil || len(fixtures) < 20 {
		t.Fatalf("fixtures: %v (%d)", err, len(fixtures))
	}
	if only := os.Getenv("FSDPC_IMPORT_ONLY"); only != "" { // a comma-separated subset, by file name
		fixtures = nil
		for _, n := range strings.Split(only, ",") {
			fixtures = append(fixtures, "../../ir/hf/testdata/"+n+".json")
		}
	}
	// 512 ranks: every fixture, DeepSeek-V3 included, fits, so both plans are made.
	opt := hf.Options{SeqLen: 1024, WorldSize: 512, GPUsPerNode: 8}
	for _, f := range fixtures {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text, err := hf.ConvertWith(f, src, opt)
			if err != nil {
				t.Fatalf("import hf: %v", err)
			}
			want, err := ir.Load(name+".toml", text)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := importTorch(f, nil, nil, "", opt, false, 10*time.Minute)
			if err != nil {
				t.Fatalf("import torch --hf: %v", err)
			}
			got, err := ir.Load(name+".toml", res.Text)
			if err != nil {
				t.Fatalf("%v\n%s", err, res.Text)
			}
			t.Logf("%s: %d parameter tensors, %d measured modules, %v", name, len(got.Params), len(res.Measured), time.Since(start).Round(time.Millisecond))
			if d := firstDiff(paramLines(got), paramLines(want)); d != "" {
				t.Fatalf("parameters differ (import torch, then import hf) %s", d)
			}
			if d := firstDiff(decisions(t, got), decisions(t, want)); d != "" {
				t.Errorf("plans differ (import torch, then import hf) %s", d)
			}
			// The attention masks: each layer's window or chunk shows in its
			// attention core's FLOPs, at the imported length and at one past
			// every fixture's window (32768), where each bites.
			for _, seq := range []int64{opt.SeqLen, 32768} {
				g, w := got, want
				if seq != opt.SeqLen {
					long := func(m *ir.Model) { m.Train.SeqLen = seq }
					if g, err = got.Relower(long); err != nil {
						t.Fatal(err)
					}
					if w, err = want.Relower(long); err != nil {
						t.Fatal(err)
					}
				}
				if d := firstDiff(attentionLines(t, g), attentionLines(t, w)); d != "" {
					t.Errorf("attention, MLP or MoE at seq_len %d differs (import torch, then import hf) %s", seq, d)
				}
			}
		})
	}
}

// attentionLines lists a model's attention modules (attention and mla),
// MLPs and MoE layers with their FLOPs: the core's (QKᵀ and PV, which a
// window or chunk cuts) and the module's, forward and backward. An MLP
// import torch measures or writes as linears, where import hf writes the
// mlp kind, is missing here and fails the comparison.
func attentionLines(t *testing.T, m *ir.Model) []string {
	t.Helper()
	var out []string
	for i := range m.Modules {
		mod := &m.Modules[i]
		switch mod.Kind {
		case ir.KindAttention, ir.KindMLA, ir.KindMoE, ir.KindMLP:
		default:
			continue
		}
		c := mod.Cost
		out = append(out, fmt.Sprintf("%s %s core %.6g/%.6g all %.6g/%.6g", mod.Name, mod.Kind, c.AttnFlopsFwd, c.AttnFlopsBwd, c.FlopsFwd, c.FlopsBwd))
	}
	if len(out) == 0 {
		t.Fatalf("%s: no attention module", m.Name)
	}
	return out
}

// architectures are small configs of current transformers architectures
// (decoder LLMs dense and MoE, encoder-decoders, encoders, a vision
// transformer): 2 layers, width 64, the rest the config class's defaults.
var architectures = []struct{ name, config string }{
	{"llama", `"architectures":["LlamaForCausalLM"]`},
	{"mistral", `"architectures":["MistralForCausalLM"]`},
	{"mixtral", `"architectures":["MixtralForCausalLM"],"num_local_experts":4,"num_experts_per_tok":2`},
	{"qwen2", `"architectures":["Qwen2ForCausalLM"]`},
	{"qwen3", `"architectures":["Qwen3ForCausalLM"],"head_dim":16`},
	{"qwen3_moe", `"architectures":["Qwen3MoeForCausalLM"],"head_dim":16,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32`},
	{"gemma", `"architectures":["GemmaForCausalLM"],"head_dim":16`},
	{"gemma2", `"architectures":["Gemma2ForCausalLM"],"head_dim":16`},
	{"gemma3_text", `"architectures":["Gemma3ForCausalLM"],"head_dim":16`},
	{"phi3", `"architectures":["Phi3ForCausalLM"],"pad_token_id":0`},
	{"olmo2", `"architectures":["Olmo2ForCausalLM"]`},
	{"deepseek_v3", `"architectures":["DeepseekV3ForCausalLM"],"n_routed_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"first_k_dense_replace":1,"n_group":1,"topk_group":1,"kv_lora_rank":32,"q_lora_rank":48,"qk_nope_head_dim":16,"qk_rope_head_dim":8,"v_head_dim":16`},
	{"granite", `"architectures":["GraniteForCausalLM"]`},
	{"starcoder2", `"architectures":["Starcoder2ForCausalLM"]`},
	{"stablelm", `"architectures":["StableLmForCausalLM"]`},
	{"cohere", `"architectures":["CohereForCausalLM"]`},
	{"smollm3", `"architectures":["SmolLM3ForCausalLM"],"pad_token_id":0`},
	{"gpt2", `"architectures":["GPT2LMHeadModel"],"n_embd":64,"n_layer":2,"n_head":4,"n_positions":512`},
	{"gpt_neox", `"architectures":["GPTNeoXForCausalLM"]`},
	{"gptj", `"architectures":["GPTJForCausalLM"],"n_embd":64,"n_layer":2,"n_head":4,"rotary_dim":8,"n_positions":512`},
	{"bloom", `"architectures":["BloomForCausalLM"],"n_layer":2,"n_head":4`},
	{"falcon", `"architectures":["FalconForCausalLM"]`},
	{"t5", `"architectures":["T5ForConditionalGeneration"],"d_model":64,"d_ff":128,"num_layers":2,"num_decoder_layers":2,"num_heads":4,"d_kv":16`},
	{"bart", `"architectures":["BartForConditionalGeneration"],"d_model":64,"encoder_layers":2,"decoder_layers":2,"encoder_attention_heads":4,"decoder_attention_heads":4,"encoder_ffn_dim":128,"decoder_ffn_dim":128`},
	{"mbart", `"architectures":["MBartForConditionalGeneration"],"d_model":64,"encoder_layers":2,"decoder_layers":2,"encoder_attention_heads":4,"decoder_attention_heads":4,"encoder_ffn_dim":128,"decoder_ffn_dim":128`},
	{"marian", `"architectures":["MarianMTModel"],"d_model":64,"encoder_layers":2,"decoder_layers":2,"encoder_attention_heads":4,"decoder_attention_heads":4,"encoder_ffn_dim":128,"decoder_ffn_dim":128,"pad_token_id":0,"decoder_start_token_id":0`},
	{"opt", `"architectures":["OPTForCausalLM"],"ffn_dim":128,"word_embed_proj_dim":64`},
	{"bert", `"architectures":["BertForMaskedLM"]`},
	{"roberta", `"architectures":["RobertaForMaskedLM"]`},
	{"distilbert", `"architectures":["DistilBertForMaskedLM"],"dim":64,"n_layers":2,"n_heads":4,"hidden_dim":128`},
	{"vit", `"architectures":["ViTForImageClassification"],"image_size":32,"patch_size":8`},
}

// encoderAttention names one self-attention of each encoder in the table.
var encoderAttention = map[string]string{
	"bert":       "bert.encoder.layer.0.attention.self",
	"roberta":    "roberta.encoder.layer.1.attention.self",
	"distilbert": "distilbert.transformer.layer.0.attention",
	"vit":        "vit.layers.1.attention",
}

// attentionKinds names attentions of the table's other models that must
// be the attention kind: encoder-decoders' self- and cross-attention (the
// key projection's traced input gives kv_seq_len) and fairseq-ordered
// projections (k, v, q: q_last).
var attentionKinds = map[string][]string{
	"t5": {"encoder.block.0.layer.0.SelfAttention", "encoder.block.1.layer.0.SelfAttention", "decoder.block.0.layer.0.SelfAttention",
		"decoder.block.1.layer.0.SelfAttention", "decoder.block.0.layer.1.EncDecAttention"},
	"bart":   {"model.encoder.layers.0.self_attn", "model.decoder.layers.1.self_attn", "model.decoder.layers.1.encoder_attn"},
	"mbart":  {"model.encoder.layers.1.self_attn", "model.decoder.layers.0.self_attn", "model.decoder.layers.0.encoder_attn"},
	"marian": {"model.decoder.layers.1.encoder_attn"},
	"opt":    {"model.decoder.layers.0.self_attn"},
	"gptj":   {"transformer.h.0.attn"},
	// One fused query_key_value, then dense (fused_qkv).
	"gpt_neox": {"gpt_neox.layers.0.attention", "gpt_neox.layers.1.attention"},
	"bloom":    {"transformer.h.0.self_attention", "transformer.h.1.self_attention"},
	"falcon":   {"transformer.h.0.self_attention", "transformer.h.1.self_attention"},
}

// kindNotes is what the header must say some kind leaves out of the
// table's models (docs/import.md, fused query_key_value attention; eager
// attention and soft-capped scores).
var kindNotes = map[string]string{
	// GPT-J has no sdpa attention: transformers runs its eager core.
	"gptj": "- transformer.h.*.attn (2): its core runs unfused (matmul, softmax, matmul) over every (query, key) pair",
	// Gemma 2's attn_logit_softcapping under the default, sdpa, which drops it.
	"gemma2":   "- model.layers.*.self_attn (2): attn_logit_softcapping 50 is not applied",
	"gpt_neox": "- gpt_neox.layers.*.attention (2): RoPE rotates 4 of the 16 dims of each head (partial_rotary_factor 0.25)",
	"bloom":    "- transformer.h.*.self_attention (2): ALiBi adds a per-head linear bias",
	"falcon":   "- transformer.h.*.self_attention (2): its one key and value head reaches SDPA unexpanded",
}

// noContainerFLOPs are the encoder-decoders and fairseq-ordered models
// whose every matmul is in a module of the file (GPT-NeoX's and Falcon's
// rotary inv_freq matmul runs in the model's own forward).
var noContainerFLOPs = map[string]bool{"t5": true, "bart": true, "mbart": true, "marian": true, "opt": true, "gptj": true}

// unfolded are the table's models whose two layers really differ, so
// they are written one by one: every other model's layers fold.
var unfolded = map[string]string{
	"deepseek_v3": "first_k_dense_replace 1: a dense layer, then a MoE one",
	"gemma2":      "a sliding-window layer, then a full-attention one",
	"t5":          "the first block alone holds the relative attention bias",
}

// parallelResidual checks GPT-NeoX's folded layers: the post-attention
// norm reads the layer's own input (".."), which is the embedding in the
// first layer and the previous layer in the second, and the plan's FSDP
// decisions are those of the same file with the layers written one by
// one, each naming the module it reads (as import torch wrote it before
// "..").
func parallelResidual(t *testing.T, m *ir.Model, text []byte) {
	t.Helper()
	reads := func(m *ir.Model, name string) string {
		id, err := m.ModuleByName(name)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, in := range m.Modules[id].Inputs {
			names = append(names, m.Modules[in].Name)
		}
		return strings.Join(names, " ")
	}
	for layer, want := range []string{"gpt_neox.embed_in", "gpt_neox.layers.0.attention gpt_neox.layers.0.mlp"} {
		for _, norm := range []string{"input_layernorm", "post_attention_layernorm"} {
			name := fmt.Sprintf("gpt_neox.layers.%d.%s", layer, norm)
			if got := reads(m, name); got != want {
				t.Errorf("%s reads %q, want %q", name, got, want)
			}
		}
	}
	src := string(text)
	repeat := "name = \"layers\"\nrepeat = 2\nblock = \"GPTNeoXLayer\"\n"
	at := strings.Index(src, "\n[block.GPTNeoXLayer]\n")
	if !strings.Contains(src, repeat) || at < 0 || strings.Count(src, "inputs = [\"..\"]") != 1 {
		t.Fatalf("no one GPTNeoXLayer repeat reading \"..\" once:\n%s", src)
	}
	head, body := src[:at], src[at:]
	layers := "name = \"layers\"\n"
	for i, in := range []string{"gpt_neox.embed_in", "gpt_neox.layers.0"} {
		b := fmt.Sprintf("L%d", i)
		layers += fmt.Sprintf("\n[[module.module.module]]\nname = \"%d\"\nblock = %q\n", i, b)
		one := strings.ReplaceAll(body, "block.GPTNeoXLayer", "block."+b)
		head += strings.Replace(one, "inputs = [\"..\"]", fmt.Sprintf("inputs = [%q]", in), 1)
	}
	named := strings.Replace(head, repeat, layers, 1)
	nm, err := ir.Load("gpt_neox_named.toml", []byte(named))
	if err != nil {
		t.Fatalf("%v\n%s", err, named)
	}
	if got := reads(nm, "gpt_neox.layers.1.post_attention_layernorm"); got != reads(m, "gpt_neox.layers.1.post_attention_layernorm") {
		t.Errorf("layers written one by one: the second post-attention norm reads %q", got)
	}
	if d := firstDiff(decisions(t, m), decisions(t, nm)); d != "" {
		t.Errorf("the folded layers plan other FSDP decisions than layers written one by one, %s", d)
	}
}

// TestImportTorchConformanceArchitectures imports each architecture
// through --hf: the file holds exactly the parameters PyTorch counts
// (sum(p.numel() for p in model.parameters()), tied ones once; ConvertTorch
// checks it, the test again), and it plans.
func TestImportTorchConformanceArchitectures(t *testing.T) {
	needTorch(t)
	if len(architectures) < 25 {
		t.Fatalf("%d architectures; the table promises at least 25", len(architectures))
	}
	dir := t.TempDir()
	opt := hf.Options{SeqLen: 128, WorldSize: 2, GPUsPerNode: 2}
	for _, a := range architectures {
		if only := os.Getenv("FSDPC_IMPORT_ONLY"); only != "" && !strings.Contains(","+only+",", ","+a.name+",") {
			continue
		}
		t.Run(a.name, func(t *testing.T) {
			cfg := fmt.Sprintf(`{"model_type":%q,"vocab_size":1000,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":512,%s}`, a.name, a.config)
			path := filepath.Join(dir, a.name+".json")
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := importTorch(path, nil, nil, "", opt, false, 5*time.Minute)
			if err != nil {
				t.Fatalf("import torch --hf: %v", err)
			}
			m, err := ir.Load(a.name+".toml", res.Text)
			if err != nil {
				t.Fatalf("%v\n%s", err, res.Text)
			}
			if m.Stats().Params != res.Numel {
				t.Errorf("%d parameters in the file, PyTorch counts %d", m.Stats().Params, res.Numel)
			}
			if _, err := planner.Plan(m, planner.Options{}); err != nil {
				t.Errorf("plan: %v", err)
			}
			if a.name == "vit" {
				// The patch embedding, nn.Conv2d(3, 64, kernel 8, stride 8)
				// over 32×32 images, is the conv kind: 2·B·(4·4)·64·3·8·8.
				id, err := m.ModuleByName("vit.embeddings.patch_embeddings.projection")
				if err != nil {
					t.Fatal(err)
				}
				c := m.Modules[id]
				if want := float64(2 * m.Train.MicroBatch * 16 * 64 * 3 * 8 * 8); c.Kind != ir.KindConv || c.Cost.FlopsFwd != want {
					t.Errorf("the patch embedding is %s with %v forward FLOPs, want conv with %v", c.Kind, c.Cost.FlopsFwd, want)
				}
			}
			for _, attn := range attentionKinds[a.name] {
				id, err := m.ModuleByName(attn)
				if err != nil {
					t.Fatal(err)
				}
				if k := m.Modules[id].Kind; k != ir.KindAttention {
					t.Errorf("%s is %s, want attention", attn, k)
				}
			}
			// What a kind leaves out is in the header (kinds.not_modelled).
			header := strings.Join(strings.Fields(strings.ReplaceAll(string(res.Text), "\n#", " ")), " ")
			if note, ok := kindNotes[a.name]; ok && !strings.Contains(header, note) {
				t.Errorf("the header does not say %q:\n%s", note, res.Text)
			}
			if noContainerFLOPs[a.name] && strings.Contains(string(res.Text), "containers' own code") {
				// Every attention core is a kind's (T5's first attention
				// holds its position bias beside the kind's projections).
				t.Errorf("FLOPs in containers' own code:\n%s", res.Text)
			}
			if attn, ok := encoderAttention[a.name]; ok {
				// Encoders: per-layer kinds (non-causal self-attention),
				// nothing measured (BERT's MLM decoder.bias is tied to its
				// head's bias: bias_tied_to), the layers folded into one
				// repeated block.
				id, err := m.ModuleByName(attn)
				if err != nil {
					t.Fatal(err)
				}
				if k := m.Modules[id].Kind; k != ir.KindAttention {
					t.Errorf("%s is %s, want attention", attn, k)
				}
				if len(res.Measured) > 0 {
					t.Errorf("measured, not recognised: %v", res.Measured)
				}
				if !strings.Contains(string(res.Text), "\nrepeat = 2\n") {
					t.Errorf("the layers are not folded into a repeat:\n%s", res.Text)
				}
			}
			// Layers identical in all the file records fold into one
			// repeat (checkpointing and unit patterns apply per block);
			// layers that differ do not.
			folded := strings.Contains(string(res.Text), "\nrepeat = 2\n")
			if why, ok := unfolded[a.name]; ok && folded {
				t.Errorf("the layers are folded, but they differ (%s):\n%s", why, res.Text)
			} else if !ok && !folded {
				t.Errorf("the layers are identical but not folded into a repeat:\n%s", res.Text)
			}
			if a.name == "gpt_neox" {
				parallelResidual(t, m, res.Text)
			}
			t.Logf("%s: %s parameters (PyTorch: %s), %d tensors, %d measured modules, %d problems", a.name,
				ir.FormatCount(m.Stats().Params), ir.FormatCount(res.Numel), len(m.Params), len(res.Measured), len(res.Problems))
		})
	}
}

// TestImportTorchConformanceCustom imports testdata/importtorch's custom
// model (parameters on the root, an nn.ModuleDict, a module reachable at
// two places, a frozen embedding, an nn.ParameterList, a module called
// twice), plans it and runs the plan under real FSDP2, which must match.
func TestImportTorchConformanceCustom(t *testing.T) {
	needTorch(t)
	t.Chdir("testdata/importtorch")
	opt := hf.Options{SeqLen: 64, WorldSize: 2, GPUsPerNode: 2}
	res, err := importTorch("", []string{"custom_model:build"}, []string{"layers=3"}, "", opt, false, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "custom.toml")
	if err := os.WriteFile(model, res.Text, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ir.Load(model, res.Text)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Text)
	}
	if m.Stats().Params != res.Numel {
		t.Errorf("%d parameters in the file, PyTorch counts %d", m.Stats().Params, res.Numel)
	}
	lines := strings.Join(paramLines(m), "\n")
	for _, want := range []string{
		"scale [64] fp32 grad=true",                                                // on the root
		"embed.weight [512 64] fp32 grad=false",                                    // frozen
		"blocks.first.up.weight [256 64]",                                          // in the ModuleDict
		"shared.up.weight [256 64] fp32 grad=true tied to blocks.second.up.weight", // the second place
		"mix.0 [64] fp32 grad=true",                                                // the ParameterList
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("no parameter %q in:\n%s", want, lines)
		}
	}
	var problems []string
	for _, p := range res.Problems {
		problems = append(problems, p.Module+" "+p.What)
	}
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "proj is called 2 times") {
		t.Errorf("problems %q, want proj's two calls alone", problems)
	}
	plan := filepath.Join(dir, "plan.bin")
	var out, errb strings.Builder
	if code := run([]string{"plan", "-o", plan, model}, &out, &errb); code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := runTorch(plan, model, "", 1, 10*time.Minute, &out, &errb); code != 0 {
		t.Fatalf("run --backend torch: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "FSDP2 matches the plan") {
		t.Errorf("run --backend torch said:\n%s%s", out.String(), errb.String())
	}
}

// TestImportTorchConformanceZoo: every zoo model, written as PyTorch by
// emit torch --model and imported back with import torch, has the zoo
// file's parameters (names, shapes, dtypes, requires_grad, ties, order)
// and, under the zoo file's policy, plans the same FSDP units.
func TestImportTorchConformanceZoo(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	t.Chdir(dir)
	for _, name := range plans.Names() {
		t.Run(name, func(t *testing.T) {
			src, file, ok := plans.Source(name)
			if !ok {
				t.Fatalf("no zoo model %s", name)
			}
			want, err := ir.Load(file, src)
			if err != nil {
				t.Fatal(err)
			}
			mod := "zoo_" + strings.NewReplacer("-", "_", ".", "_").Replace(name)
			var out, errb strings.Builder
			if code := run([]string{"emit", "torch", "--model", name, "-o", mod + ".py"}, &out, &errb); code != 0 {
				t.Fatalf("emit torch: exit %d: %s", code, errb.String())
			}
			opt := hf.Options{SeqLen: 128, WorldSize: want.Cluster.WorldSize, GPUsPerNode: want.Cluster.GPUsPerNode}
			res, err := importTorch("", []string{mod + ":build_model"}, nil, "", opt, false, 10*time.Minute)
			if err != nil {
				t.Fatalf("import torch: %v", err)
			}
			// The policy is the user's choice, not the module's: plan the
			// import under the zoo file's own [policy].
			text := string(res.Text)
			i := strings.Index(text, "\n[policy]\n")
			j := i + 1 + strings.Index(text[i+1:], "\n\n")
			zs := string(src)
			k := strings.Index(zs, "\n[policy]\n")
			l := k + strings.Index(zs[k:], "\n[[module]]")
			if m := strings.Index(zs[k:], "\n[[param]]"); m >= 0 && k+m < l {
				l = k + m
			}
			if i < 0 || j <= i || k < 0 || l <= k {
				t.Fatalf("no [policy] to swap")
			}
			text = text[:i] + zs[k:l] + text[j:]
			got, err := ir.Load(name+".toml", []byte(text))
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if d := firstDiff(paramLines(got), paramLines(want)); d != "" {
				t.Fatalf("parameters differ (import torch, then the zoo file) %s", d)
			}
			if d := firstDiff(unitNames(t, got), unitNames(t, want)); d != "" {
				t.Errorf("units differ (import torch, then the zoo file) %s", d)
			}
		})
	}
}

// unitNames are the modules of each unit a plan's groups shard.
func unitNames(t *testing.T, m *ir.Model) []string {
	t.Helper()
	var units string
	_, _ = planner.Plan(m, planner.Options{DumpAfter: func(pass, text string) {
		if strings.HasPrefix(text, "unit ") {
			units = text
		}
	}})
	var out []string
	for _, l := range strings.Split(units, "\n") {
		if strings.HasPrefix(l, "unit ") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: the planner formed no units", m.Name)
	}
	return out
}
