package hf

import (
	"fmt"
	"slices"
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

// wrapped is a string array written over several lines when long.
type wrapped []string

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
	case []int64:
		q := make([]string, len(x))
		for i, n := range x {
			q[i] = strconv.FormatInt(n, 10)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case wrapped:
		one := value([]string(x))
		if len(one) <= 60 {
			return one
		}
		var b strings.Builder
		b.WriteString("[\n ")
		n := 1
		for _, s := range x {
			q := quote(s) + ","
			if n+1+len(q) > wrapWidth {
				b.WriteString("\n ")
				n = 1
			}
			b.WriteString(" " + q)
			n += 1 + len(q)
		}
		b.WriteString("\n]")
		return b.String()
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
func clean(s string) string { return cleanN(s, 100) }

// cleanN is clean keeping up to limit characters.
func cleanN(s string, limit int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit {
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
		example, buffers = "transformer.h.0.attn.c_attn.weight", "the causal masks attn.bias and attn.masked_bias"
	}
	w.wrap("", fmt.Sprintf("Modules and parameters are named, shaped and ordered as transformers 5 builds the model (AutoModelForCausalLM.from_config), which is what FSDP2 shards, such as %s. Buffers are not parameters and are left out: %s.", example, buffers))
	if m.moe != nil {
		w.comment("")
		w.wrap("", "The experts are fused 3-D tensors (experts.gate_up_proj, experts.down_proj), as transformers 5 holds them in memory; the published safetensors store one tensor per expert and are converted on load.")
	}
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
	w.table("policy",
		units,
		field{"param_dtype", "bf16", ""},
		field{"reduce_dtype", "fp32", ""})
}

// decoderModules writes the Llama layout, and DeepSeek's: transformers'
// XxxModel as "model", lm_head beside it, the layers one repeat whose
// instances are the dense or the MoE block where they differ.
func (m *model) decoderModules(w *writer) {
	lmHead := []field{{"name", "lm_head", ""}, {"kind", "linear", ""}, {"in", m.hidden, ""}, {"out", m.vocab, ""}}
	if m.tied {
		lmHead = append(lmHead, field{"tied_to", "model.embed_tokens.weight", "tie_word_embeddings: counted once"})
	}
	layers := []field{{"name", "layers", ""}, {"repeat", m.layers, ""}}
	// Each layer's block: its feed-forward (dense or MoE) and its
	// attention (full, sliding or chunked).
	names := make([]string, m.layers)
	for i := range names {
		switch {
		case m.layerMoE != nil && m.layerMoE[i]:
			names[i] = "moe"
		case m.layerMoE != nil:
			names[i] = "dense"
		case m.experts > 0:
			names[i] = "moe"
		default:
			names[i] = "decoder"
		}
		if m.layerAttn != nil && m.layerAttn[i] != "" {
			names[i] += "_" + m.layerAttn[i]
		}
	}
	pattern := period(names)
	var blocks []string // the blocks used, in order of first use
	for _, b := range pattern {
		if !slices.Contains(blocks, b) {
			blocks = append(blocks, b)
		}
	}
	if len(pattern) == 1 {
		layers = append(layers, field{"block", pattern[0], ""})
	} else {
		note := "layer i is blocks[i mod " + fmt.Sprint(len(pattern)) + "]"
		if len(pattern) == len(names) {
			note = "one block per layer"
		}
		layers = append(layers, field{"blocks", wrapped(pattern), note + ": " + m.layersNote()})
	}
	w.modules([]mod{
		{"module", []field{{"name", "model", strings.TrimSuffix(m.family.class, "Config") + "Model; lm_head sits beside it"}}},
		{"module.module", []field{{"name", "embed_tokens", ""}, {"kind", "embedding", ""}, {"num", m.vocab, ""}, {"dim", m.hidden, ""}}},
		{"module.module", layers},
		{"module.module", m.norm("norm")},
		{"module", lmHead},
	})
	for _, b := range blocks {
		kind, attnType, _ := strings.Cut(b, "_")
		ffn := m.denseMLP()
		if kind == "moe" {
			ffn = m.moeFFN()
		}
		m.block(w, b, m.attention(attnType), ffn)
	}
}

// period returns the shortest prefix of names that repeated gives names.
func period(names []string) []string {
	for p := 1; p < len(names); p++ {
		ok := true
		for i := p; i < len(names) && ok; i++ {
			ok = names[i] == names[i-p]
		}
		if ok {
			return names[:p]
		}
	}
	return names
}

// moeLayersNote says which config keys chose the MoE layers.
func (m *model) moeLayersNote() string {
	switch m.modelType {
	case "deepseek_v2", "deepseek_v3":
		layers := "layers"
		if m.firstDense == 1 {
			layers = "layer"
		}
		return fmt.Sprintf("%d dense %s (first_k_dense_replace), then MoE", m.firstDense, layers)
	case "qwen3_moe":
		return "MoE unless in mlp_only_layers or (i+1) is not a multiple of decoder_sparse_step"
	case "llama4_text":
		return "MoE on moe_layers (every interleave_moe_layer_step-th layer)"
	}
	return "dense or MoE"
}

// layersNote says which config keys chose each layer's block.
func (m *model) layersNote() string {
	var notes []string
	if m.layerMoE != nil {
		notes = append(notes, m.moeLayersNote())
	}
	if m.layerAttn != nil {
		notes = append(notes, m.windowsNote())
	}
	return strings.Join(notes, "; ")
}

// windowsNote says which layers attend through a window or in chunks.
func (m *model) windowsNote() string {
	n := 0
	for _, t := range m.layerAttn {
		if t != "" {
			n++
		}
	}
	var rule string
	switch m.modelType {
	case "llama4_text":
		return fmt.Sprintf("chunked attention (attention_chunk_size %d) on the %d of %d RoPE layers (no_rope_layers)", m.window, n, m.layers)
	case "gemma2", "gpt_oss":
		rule = "every other layer"
	case "gemma3_text":
		rule = "all but every sliding_window_pattern-th layer"
	case "olmo3":
		rule = "three layers of every four"
	case "qwen2", "qwen3":
		rule = "the layers from max_window_layers on"
	case "smollm3":
		rule = "the layers without RoPE (no_rope_layers)"
	default:
		rule = "every layer"
	}
	return fmt.Sprintf("sliding_window %d on %s (%d of %d), as layer_types says", m.window, rule, n, m.layers)
}

// attention is the decoder layer's attention module.
func (m *model) attention(attnType string) []field {
	if m.mla {
		return m.mlaAttention()
	}
	attn := []field{{"name", "self_attn", ""}, {"kind", "attention", ""}, {"dim", m.hidden, ""}, {"heads", m.heads, ""}, {"kv_heads", m.kvHeads, ""}}
	if m.headDim > 0 {
		attn = append(attn, field{"head_dim", m.headDim, ""})
	}
	if m.bidirectional {
		attn = append(attn, field{"causal", false, "use_bidirectional_attention"})
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
	if m.sinks {
		attn = append(attn, field{"sinks", true, "gpt-oss: self_attn.sinks, a learned logit per head"})
	}
	if m.modelType == "gpt_oss" {
		// GptOssPreTrainedModel._supports_sdpa is false: what transformers
		// runs by default is eager_attention_forward, and import torch --hf
		// writes the same (docs/import.md, eager attention).
		attn = append(attn, field{"flash", false, "transformers has no sdpa attention for gpt-oss: its default, eager, is matmul, softmax, matmul"})
	}
	switch attnType {
	case "sliding":
		attn = append(attn, field{"window", m.window, "sliding_window: each token attends to the last " + fmt.Sprint(m.window)})
	case "chunked":
		attn = append(attn, field{"chunk", m.window, "attention_chunk_size: each token attends within its chunk"})
	}
	names := []pair{{"q", "q_proj"}, {"k", "k_proj"}, {"v", "v_proj"}, {"o", "o_proj"}}
	if m.fused {
		attn = append(attn, field{"fused_qkv", true, "Phi-3: one qkv_proj, registered after o_proj"})
		names = []pair{{"qkv", "qkv_proj"}, {"o", "o_proj"}}
	}
	return append(attn, field{"names", names, ""})
}

// denseMLP is a dense layer's feed-forward.
func (m *model) denseMLP() []field {
	ffn := []field{{"name", m.ffnName, ""}, {"kind", "mlp", ""}, {"dim", m.hidden, ""}, {"hidden", m.inter, ""}, {"activation", m.act, m.actNote}}
	if m.mlpBias {
		ffn = append(ffn, field{"bias", true, ""})
	}
	if m.fused {
		return append(ffn, field{"fused_gate_up", true, "Phi-3: one gate_up_proj"},
			field{"names", []pair{{"gate_up", "gate_up_proj"}, {"down", "down_proj"}}, ""})
	}
	return append(ffn, field{"names", []pair{{"gate", "gate_proj"}, {"up", "up_proj"}, {"down", "down_proj"}}, ""})
}

// moeFFN is an MoE layer's feed-forward, as transformers 5 builds it.
func (m *model) moeFFN() []field {
	l := m.moe
	ffn := []field{{"name", m.ffnName, l.class}, {"kind", "moe", ""}, {"dim", m.hidden, ""}, {"hidden", m.moeInter, ""},
		{"experts", m.experts, m.expertsKey}, {"top_k", m.topK, ""}, {"activation", m.act, m.actNote},
		{"grouped", true, ""}, {"fused_gate_up", true, "experts.gate_up_proj, experts.down_proj: every expert in one tensor"}}
	if l.transposed {
		ffn = append(ffn, field{"transposed", true, "[experts, in, out]"})
	}
	if l.bias {
		ffn = append(ffn, field{"bias", true, "gate_up_proj_bias, down_proj_bias"}, field{"router_bias", true, ""})
	}
	if m.sharedExperts > 0 {
		note := "one MLP moe_intermediate_size × n_shared_experts wide"
		if m.modelType == "llama4_text" {
			note = "one MLP intermediate_size wide"
		}
		ffn = append(ffn, field{"shared_experts", m.sharedExperts, note})
	}
	if l.expertsFirst {
		ffn = append(ffn, field{"experts_first", true, l.class + " registers its experts before the router"})
	}
	names := []pair{{"router", l.router}, {"experts", "experts"}, {"gate_up", "gate_up_proj"}, {"down", "down_proj"}}
	if l.shared != "" {
		names = append(names, pair{"shared", l.shared}, pair{"gate", "gate_proj"}, pair{"up", "up_proj"})
	}
	return append(ffn, field{"names", names, ""})
}

// ownOutputLine: every decoder layer transformers has returns the residual
// sum it makes (hidden_states = residual + hidden_states), not its MLP's
// tensor (docs/model-format.md, Outputs).
const ownOutputLine = `output = "own"            # returns residual + mlp(...), a tensor of its own`

// block writes one decoder layer: the modules in the order data flows
// through them, and register with the order the decoder layer registers
// them, which is FSDP2's parameter order.
func (m *model) block(w *writer, name string, attn, ffn []field) {
	w.line("")
	w.line("[block." + name + "]")
	w.line(ownOutputLine)
	b := "block." + name + ".module"
	switch m.norms {
	case "olmo2":
		// Olmo2/3DecoderLayer normalise each branch's output, not its input.
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
		w.line(fmt.Sprintf(`register = ["self_attn", %q, "input_layernorm", "post_attention_layernorm"]`, m.ffnName))
		w.modules([]mod{
			{b, m.norm("input_layernorm")},
			{b, attn},
			{b, m.norm("post_attention_layernorm")},
			{b, ffn},
		})
	}
}

// mlaAttention is DeepSeek's multi-head latent attention.
func (m *model) mlaAttention() []field {
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
	return append(attn, field{"names", append(qNames, pair{"kv_a", "kv_a_proj_with_mqa"}, pair{"kv_a_norm", "kv_a_layernorm"},
		pair{"kv_b", "kv_b_proj"}, pair{"o", "o_proj"}), ""})
}

func (m *model) norm(name string) []field {
	return []field{{"name", name, ""}, {"kind", "norm", ""}, {"dim", m.hidden, ""}}
}

func (m *model) layerNorm(name string) []field {
	return []field{{"name", name, ""}, {"kind", "norm", ""}, {"norm", "layer", ""}, {"dim", m.hidden, ""}, {"bias", true, ""}}
}

// gpt2Modules writes GPT-2 as GPT2LMHeadModel holds it: GPT2Model as
// "transformer" (the published weights drop that prefix), lm_head beside.
func (m *model) gpt2Modules(w *writer) {
	lmHead := []field{{"name", "lm_head", ""}, {"kind", "linear", ""}, {"in", m.hidden, ""}, {"out", m.vocab, ""}}
	if m.tied {
		lmHead = append(lmHead, field{"tied_to", "transformer.wte.weight", "one tensor with wte, counted once"})
	}
	w.modules([]mod{
		{"module", []field{{"name", "transformer", "GPT2Model; lm_head sits beside it"}}},
		{"module.module", []field{{"name", "wte", ""}, {"kind", "embedding", ""}, {"num", m.vocab, ""}, {"dim", m.hidden, ""}}},
		{"module.module", []field{{"name", "wpe", ""}, {"kind", "embedding", ""}, {"num", m.maxPos, ""}, {"dim", m.hidden, ""},
			{"inputs", []string{}, "reads position ids, not wte's output"}}},
		{"module.module", []field{{"name", "h", ""}, {"repeat", m.layers, ""}, {"block", "decoder", ""},
			{"inputs", []string{"wte", "wpe"}, "the sum of token and position embeddings"}}},
		{"module.module", m.layerNorm("ln_f")},
		{"module", lmHead},
	})

	w.line("")
	w.line("[block.decoder]")
	w.line(ownOutputLine)
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
