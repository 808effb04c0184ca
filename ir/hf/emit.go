package hf

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The model file is written as text rather than marshalled so that keys
// keep a reading order, repeated layers are one block, and comments can
// say where each choice came from.

// field is one key of a table. note becomes a trailing comment.
type field struct {
	key  string
	val  any
	note string
}

// pair is one entry of an inline table such as names = { q = "q_proj" }.
type pair struct{ k, v string }

// mod is one [[...module]] entry; header is its array-of-tables path.
type mod struct {
	header string
	fields []field
}

type writer struct{ b strings.Builder }

func (w *writer) line(s string) {
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

func (w *writer) comment(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if s == "" {
		w.line("#")
		return
	}
	w.line("# " + s)
}

// noteColumn lines trailing comments up, as in the hand-written plans.
const noteColumn = 26

func (w *writer) fields(fs []field) {
	for _, f := range fs {
		s := f.key + " = " + value(f.val)
		if f.note != "" {
			s += strings.Repeat(" ", max(1, noteColumn-utf8.RuneCountInString(s))) + "# " + f.note
		}
		w.line(s)
	}
}

func (w *writer) table(name string, fs ...field) {
	w.line("")
	w.line("[" + name + "]")
	w.fields(fs)
}

func (w *writer) modules(ms []mod) {
	for _, m := range ms {
		w.line("")
		w.line("[[" + m.header + "]]")
		w.fields(m.fields)
	}
}

func value(v any) string {
	switch x := v.(type) {
	case string:
		return quote(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case []pair:
		q := make([]string, len(x))
		for i, p := range x {
			q[i] = p.k + " = " + quote(p.v)
		}
		return "{ " + strings.Join(q, ", ") + " }"
	}
	panic(fmt.Sprintf("hf: no TOML form for %T", v))
}

// quote writes a TOML basic string. TOML has no \x escape, so Go's
// strconv.Quote will not do.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// clean makes text taken from the config safe inside a comment or a name:
// a newline there would end the comment and inject TOML.
func clean(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == 100 {
			b.WriteString("...")
			break
		}
		if unicode.IsControl(r) || r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}

// emit writes the model file.
func (m *model) emit() []byte {
	w := &writer{}
	m.header(w)
	m.settings(w)
	switch {
	case m.family.gpt2:
		m.gpt2Modules(w)
	case m.mla:
		m.deepseekModules(w)
	default:
		m.decoderModules(w)
	}
	return []byte(w.b.String())
}

func (m *model) header(w *writer) {
	s := m.source
	desc := fmt.Sprintf("model_type %q", m.modelType)
	if s.arch != "" {
		desc += ", " + clean(s.arch)
	}
	if s.nameOrPath != "" {
		desc += ", saved from " + clean(s.nameOrPath)
	}
	w.wrap("", fmt.Sprintf("%s: imported by `fsdpc import hf` from %s (%s; config sha256 %s).",
		m.name, clean(s.file), desc, s.sha))
	w.comment("")
	example := "model.layers.0.self_attn.q_proj.weight"
	buffers := "rotary embeddings' inv_freq"
	if m.family.gpt2 {
		example, buffers = "h.0.attn.c_attn.weight", "the causal masks attn.bias and attn.masked_bias"
	}
	w.wrap("", fmt.Sprintf("Modules and parameters carry the checkpoint's names, such as %s, so a plan matches the checkpoint tensor by tensor. Buffers are not parameters and are left out: %s.", example, buffers))
	w.comment("")
	w.comment("Assumed:")
	mixed := "fp32 master weights and AdamW state, bf16 compute, fp32 gradient reduction"
	if s.torchDType != "" {
		mixed += " (the checkpoint holds " + clean(s.torchDType) + ")"
	}
	w.wrap("  - ", mixed)
	for _, a := range m.assumed {
		w.wrap("  - ", a)
	}
	w.comment("")
	w.wrap("", "[train], [cluster] and [policy] are a starting point, not part of the checkpoint: edit them, or import again with --seq-len, --micro-batch, --checkpointing, --gpu, --world-size and --gpus-per-node.")
}

// wrapWidth keeps header comments readable in an 80-column terminal.
const wrapWidth = 78

// wrap writes text as comment lines, breaking at spaces; bullet starts the
// first line and its width in spaces indents the rest.
func (w *writer) wrap(bullet, text string) {
	indent := strings.Repeat(" ", utf8.RuneCountInString(bullet))
	line := "#"
	if bullet != "" {
		line = "# " + bullet
	}
	fresh := true
	for _, word := range strings.Fields(text) {
		if !fresh && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > wrapWidth {
			w.line(line)
			line, fresh = "# "+indent, true
		}
		if fresh && strings.HasSuffix(line, " ") {
			line += word
		} else {
			line += " " + word
		}
		fresh = false
	}
	w.line(line)
}

func (m *model) settings(w *writer) {
	w.table("model",
		field{"name", m.name, ""},
		field{"dtype", "fp32", "sharded master weights and optimizer state"})
	w.table("train",
		field{"micro_batch", m.microBatch, ""},
		field{"seq_len", m.seqLen, m.seqLenNote},
		field{"grad_accum", 1, ""},
		field{"checkpointing", m.checkpointing, ""},
		field{"optimizer", "adamw", ""})
	w.table("cluster",
		field{"gpu", m.gpu, ""},
		field{"gpus_per_node", m.gpusPerNode, ""},
		field{"world_size", m.worldSize, ""})
	units := field{"units", "blocks", "each layer an FSDP unit, the root takes the rest"}
	if m.mla {
		// The layers are listed one by one (dense, then MoE), not repeated.
		units = field{"units", []string{"model.layers.*"}, "each layer an FSDP unit, the root takes the rest"}
	}
	w.table("policy",
		units,
		field{"param_dtype", "bf16", ""},
		field{"reduce_dtype", "fp32", ""})
}

// decoderModules writes the Llama layout: transformers' XxxModel as
// "model", lm_head beside it.
func (m *model) decoderModules(w *writer) {
	lmHead := []field{{"name", "lm_head", ""}, {"kind", "linear", ""}, {"in", m.hidden, ""}, {"out", m.vocab, ""}}
	if m.tied {
		lmHead = append(lmHead, field{"tied_to", "model.embed_tokens.weight", "tie_word_embeddings: counted once"})
	}
	w.modules([]mod{
		{"module", []field{{"name", "model", strings.TrimSuffix(m.family.class, "Config") + "Model; lm_head sits beside it"}}},
		{"module.module", []field{{"name", "embed_tokens", ""}, {"kind", "embedding", ""}, {"num", m.vocab, ""}, {"dim", m.hidden, ""}}},
		{"module.module", []field{{"name", "layers", ""}, {"repeat", m.layers, ""}, {"block", "decoder", ""}}},
		{"module.module", m.norm("norm")},
		{"module", lmHead},
	})

	w.line("")
	w.line("[block.decoder]")
	const b = "block.decoder.module"
	attn := []field{{"name", "self_attn", ""}, {"kind", "attention", ""}, {"dim", m.hidden, ""}, {"heads", m.heads, ""}, {"kv_heads", m.kvHeads, ""}}
	if m.headDim > 0 {
		attn = append(attn, field{"head_dim", m.headDim, ""})
	}
	if m.qkvBias {
		note := ""
		if m.modelType == "qwen2" {
			note = "Qwen2: q, k and v have biases, o_proj has none"
		}
		attn = append(attn, field{"qkv_bias", true, note})
	}
	if m.outBias {
		attn = append(attn, field{"out_bias", true, ""})
	}
	switch m.qkNorm {
	case "head":
		attn = append(attn, field{"qk_norm", "head", "RMSNorm of each head's q and k (head_dim wide)"})
	case "full":
		attn = append(attn, field{"qk_norm", "full", "RMSNorm of the whole q and k projections"})
	}
	names := []pair{{"q", "q_proj"}, {"k", "k_proj"}, {"v", "v_proj"}, {"o", "o_proj"}}
	if m.fused {
		attn = append(attn, field{"fused_qkv", true, "Phi-3: one qkv_proj, registered after o_proj"})
		names = []pair{{"qkv", "qkv_proj"}, {"o", "o_proj"}}
	}
	attn = append(attn, field{"names", names, ""})

	var ffn []field
	if m.experts > 0 {
		ffn = []field{{"name", "block_sparse_moe", ""}, {"kind", "moe", ""}, {"dim", m.hidden, ""}, {"hidden", m.inter, ""},
			{"experts", m.experts, ""}, {"top_k", m.topK, ""}, {"activation", m.act, m.actNote},
			{"names", []pair{{"router", "gate"}, {"experts", "experts"}, {"gate", "w1"}, {"up", "w3"}, {"down", "w2"}}, ""}}
	} else {
		ffn = []field{{"name", "mlp", ""}, {"kind", "mlp", ""}, {"dim", m.hidden, ""}, {"hidden", m.inter, ""}, {"activation", m.act, m.actNote}}
		if m.mlpBias {
			ffn = append(ffn, field{"bias", true, ""})
		}
		if m.fused {
			ffn = append(ffn, field{"fused_gate_up", true, "Phi-3: one gate_up_proj"},
				field{"names", []pair{{"gate_up", "gate_up_proj"}, {"down", "down_proj"}}, ""})
		} else {
			ffn = append(ffn, field{"names", []pair{{"gate", "gate_proj"}, {"up", "up_proj"}, {"down", "down_proj"}}, ""})
		}
	}
	ffnName := ffn[0].val.(string)
	// The modules are listed in the order data flows through them;
	// register gives the order the decoder layer registers them, which is
	// FSDP2's parameter order.
	switch m.norms {
	case "olmo2":
		// Olmo2DecoderLayer normalises each branch's output, not its input.
		w.line(`register = ["self_attn", "mlp", "post_attention_layernorm", "post_feedforward_layernorm"]`)
		w.modules([]mod{
			{b, attn},
			{b, m.norm("post_attention_layernorm")},
			{b, ffn},
			{b, m.norm("post_feedforward_layernorm")},
		})
	case "gemma2":
		w.line(`register = ["self_attn", "mlp", "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"]`)
		w.modules([]mod{
			{b, m.norm("input_layernorm")},
			{b, attn},
			{b, m.norm("post_attention_layernorm")},
			{b, m.norm("pre_feedforward_layernorm")},
			{b, ffn},
			{b, m.norm("post_feedforward_layernorm")},
		})
	default:
		w.line(fmt.Sprintf(`register = ["self_attn", %q, "input_layernorm", "post_attention_layernorm"]`, ffnName))
		w.modules([]mod{
			{b, m.norm("input_layernorm")},
			{b, attn},
			{b, m.norm("post_attention_layernorm")},
			{b, ffn},
		})
	}
}

// deepseekModules writes DeepSeek-V2/V3: first_k_dense_replace layers with
// a dense MLP, then MoE layers, all under model.layers as the checkpoint
// numbers them.
func (m *model) deepseekModules(w *writer) {
	lmHead := []field{{"name", "lm_head", ""}, {"kind", "linear", ""}, {"in", m.hidden, ""}, {"out", m.vocab, ""}}
	if m.tied {
		lmHead = append(lmHead, field{"tied_to", "model.embed_tokens.weight", "tie_word_embeddings: counted once"})
	}
	w.modules([]mod{
		{"module", []field{{"name", "model", strings.TrimSuffix(m.family.class, "Config") + "Model; lm_head sits beside it"}}},
		{"module.module", []field{{"name", "embed_tokens", ""}, {"kind", "embedding", ""}, {"num", m.vocab, ""}, {"dim", m.hidden, ""}}},
		{"module.module", []field{{"name", "layers", fmt.Sprintf("%d dense layers (first_k_dense_replace), then MoE", m.firstDense)}}},
	})
	// One line per layer: an inline array of tables is the same TOML as
	// [[model.module.module]] entries, at a quarter of the lines.
	w.line("module = [")
	for i := int64(0); i < m.layers; i++ {
		block := "moe"
		if i < m.firstDense {
			block = "dense"
		}
		w.line(fmt.Sprintf("  { name = \"%d\", block = \"%s\" },", i, block))
	}
	w.line("]")
	w.modules([]mod{
		{"module.module", m.norm("norm")},
		{"module", lmHead},
	})

	attn := []field{{"name", "self_attn", ""}, {"kind", "mla", "multi-head latent attention"}, {"dim", m.hidden, ""}, {"heads", m.heads, ""}}
	qNames := []pair{{"q", "q_proj"}}
	if m.qLoraRank > 0 {
		attn = append(attn, field{"q_lora_rank", m.qLoraRank, ""})
		qNames = []pair{{"q_a", "q_a_proj"}, {"q_a_norm", "q_a_layernorm"}, {"q_b", "q_b_proj"}}
	} else {
		attn = append(attn, field{"q_lora_rank", int64(0), "q_lora_rank null: a plain q_proj"})
	}
	attn = append(attn, field{"kv_lora_rank", m.kvLoraRank, ""}, field{"qk_nope_head_dim", m.qkNope, ""},
		field{"qk_rope_head_dim", m.qkRope, ""}, field{"v_head_dim", m.vHeadDim, ""})
	if m.qkvBias {
		attn = append(attn, field{"bias", true, "attention_bias"})
	}
	attn = append(attn, field{"names", append(qNames, pair{"kv_a", "kv_a_proj_with_mqa"}, pair{"kv_a_norm", "kv_a_layernorm"},
		pair{"kv_b", "kv_b_proj"}, pair{"o", "o_proj"}), ""})
	dense := []field{{"name", "mlp", ""}, {"kind", "mlp", ""}, {"dim", m.hidden, ""}, {"hidden", m.inter, ""}, {"activation", m.act, m.actNote},
		{"names", []pair{{"gate", "gate_proj"}, {"up", "up_proj"}, {"down", "down_proj"}}, ""}}
	block := func(name string, ffn []field) {
		w.line("")
		w.line("[block." + name + "]")
		w.line(`register = ["self_attn", "mlp", "input_layernorm", "post_attention_layernorm"]`)
		b := "block." + name + ".module"
		w.modules([]mod{
			{b, m.norm("input_layernorm")},
			{b, attn},
			{b, m.norm("post_attention_layernorm")},
			{b, ffn},
		})
	}
	if m.firstDense > 0 {
		block("dense", dense)
	}
	if m.firstDense < m.layers {
		moe := []field{{"name", "mlp", "DeepseekMoE"}, {"kind", "moe", ""}, {"dim", m.hidden, ""}, {"hidden", m.moeInter, "moe_intermediate_size"},
			{"experts", m.experts, "n_routed_experts"}, {"top_k", m.topK, ""}, {"activation", m.act, m.actNote}}
		if m.sharedExperts > 0 {
			moe = append(moe, field{"shared_experts", m.sharedExperts, "one MLP moe_intermediate_size × n_shared_experts wide"})
		}
		moe = append(moe, field{"experts_first", true, "DeepseekMoE registers experts, gate, shared_experts"})
		if m.scoreBias {
			moe = append(moe, field{"router_score_bias", true, "topk_method noaux_tc: gate.e_score_correction_bias"})
		}
		moe = append(moe, field{"names", []pair{{"router", "gate"}, {"experts", "experts"}, {"shared", "shared_experts"},
			{"gate", "gate_proj"}, {"up", "up_proj"}, {"down", "down_proj"}}, ""})
		block("moe", moe)
	}
}

func (m *model) norm(name string) []field {
	return []field{{"name", name, ""}, {"kind", "norm", ""}, {"dim", m.hidden, ""}}
}

func (m *model) layerNorm(name string) []field {
	return []field{{"name", name, ""}, {"kind", "norm", ""}, {"norm", "layer", ""}, {"dim", m.hidden, ""}, {"bias", true, ""}}
}

// gpt2Modules writes GPT-2 as its checkpoint names it: GPT2Model's
// modules at the top level, as in the published weights, and lm_head.
func (m *model) gpt2Modules(w *writer) {
	lmHead := []field{{"name", "lm_head", ""}, {"kind", "linear", ""}, {"in", m.hidden, ""}, {"out", m.vocab, ""}}
	if m.tied {
		lmHead = append(lmHead, field{"tied_to", "wte.weight", "one tensor with wte, counted once"})
	}
	w.modules([]mod{
		{"module", []field{{"name", "wte", ""}, {"kind", "embedding", ""}, {"num", m.vocab, ""}, {"dim", m.hidden, ""}}},
		{"module", []field{{"name", "wpe", ""}, {"kind", "embedding", ""}, {"num", m.maxPos, ""}, {"dim", m.hidden, ""},
			{"inputs", []string{}, "reads position ids, not wte's output"}}},
		{"module", []field{{"name", "h", ""}, {"repeat", m.layers, ""}, {"block", "decoder", ""},
			{"inputs", []string{"wte", "wpe"}, "the sum of token and position embeddings"}}},
		{"module", m.layerNorm("ln_f")},
		{"module", lmHead},
	})

	w.line("")
	w.line("[block.decoder]")
	const b = "block.decoder.module"
	w.modules([]mod{
		{b, m.layerNorm("ln_1")},
		{b, []field{{"name", "attn", ""}, {"kind", "attention", ""}, {"dim", m.hidden, ""}, {"heads", m.heads, ""},
			{"fused_qkv", true, ""}, {"qkv_bias", true, ""}, {"out_bias", true, ""},
			{"transposed", true, "Conv1D weights are [in, out]"},
			{"names", []pair{{"qkv", "c_attn"}, {"o", "c_proj"}}, ""}}},
		{b, m.layerNorm("ln_2")},
		{b, []field{{"name", "mlp", ""}, {"kind", "mlp", ""}, {"dim", m.hidden, ""}, {"hidden", m.inter, ""},
			{"activation", m.act, m.actNote}, {"bias", true, ""}, {"transposed", true, ""},
			{"names", []pair{{"up", "c_fc"}, {"down", "c_proj"}}, ""}}},
	})
}
