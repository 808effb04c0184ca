package hf

import (
	"encoding/json"
	"fmt"
	"strings"
)

// model is what the importer keeps of a config: the sizes that shape the
// parameters, and notes on everything it had to assume.
type model struct {
	modelType string
	family    family
	name      string
	source    source

	vocab, hidden, layers, heads, kvHeads, inter int64
	// headDim is 0 unless the config gives it; ir then derives it as
	// hidden / heads, as transformers does.
	headDim                   int64
	tied                      bool
	act                       string // an ir activation
	actNote                   string // the config's activation it came from
	qkvBias, outBias, mlpBias bool
	experts, topK             int64 // Mixtral, DeepSeek
	// qkNorm is the attention kind's qk_norm: "" (none), "head" (Qwen3,
	// Gemma 3) or "full" (OLMo-2).
	qkNorm string
	// fused: Phi-3's qkv_proj and gate_up_proj.
	fused bool
	// norms is the decoder layer's norm layout: "" for Llama's pre-norms,
	// "olmo2" for post-norms only, "gemma2" for pre- and post-norms.
	norms string
	// DeepSeek: multi-head latent attention and shared+routed experts
	// after first_k_dense_replace dense layers.
	mla                                 bool
	qLoraRank, kvLoraRank               int64
	qkNope, qkRope, vHeadDim            int64
	moeInter, sharedExperts, firstDense int64
	scoreBias                           bool

	maxPos    int64
	maxPosKey string
	// slidingWindow is 0 when attention sees the whole sequence.
	slidingWindow int64

	seqLen     int64
	seqLenNote string
	gpu        string
	worldSize  int
	// gpusPerNode, microBatch and checkpointing are the options' (or
	// their defaults).
	gpusPerNode, microBatch int
	checkpointing           string

	assumed []string
}

func (m *model) assume(format string, args ...any) {
	m.assumed = append(m.assumed, fmt.Sprintf(format, args...))
}

// family describes one model_type: how to read its config and the defaults
// transformers applies when the config leaves a field out.
type family struct {
	class string // the transformers config class, for notes
	gpt2  bool
	read  func(c *config, m *model)
	// tied is tie_word_embeddings' default in the config class.
	tied bool
	// maxPos is max_position_embeddings' default in the config class.
	maxPos int64
	// actKey and act are the activation field and its default.
	actKey, act string
}

var families = map[string]family{
	"llama":       {class: "LlamaConfig", read: readDecoder, maxPos: 2048, actKey: "hidden_act", act: "silu"},
	"mistral":     {class: "MistralConfig", read: readDecoder, maxPos: 4096 * 32, actKey: "hidden_act", act: "silu"},
	"mixtral":     {class: "MixtralConfig", read: readDecoder, maxPos: 4096 * 32, actKey: "hidden_act", act: "silu"},
	"qwen2":       {class: "Qwen2Config", read: readDecoder, maxPos: 32768, actKey: "hidden_act", act: "silu"},
	"gemma":       {class: "GemmaConfig", read: readDecoder, tied: true, maxPos: 8192, actKey: "hidden_activation", act: "gelu_pytorch_tanh"},
	"gpt2":        {class: "GPT2Config", gpt2: true, read: readGPT2, tied: true, actKey: "activation_function", act: "gelu_new"},
	"phi3":        {class: "Phi3Config", read: readDecoder, maxPos: 4096, actKey: "hidden_act", act: "silu"},
	"olmo2":       {class: "Olmo2Config", read: readDecoder, maxPos: 2048, actKey: "hidden_act", act: "silu"},
	"qwen3":       {class: "Qwen3Config", read: readDecoder, maxPos: 32768, actKey: "hidden_act", act: "silu"},
	"gemma2":      {class: "Gemma2Config", read: readDecoder, tied: true, maxPos: 8192, actKey: "hidden_activation", act: "gelu_pytorch_tanh"},
	"gemma3_text": {class: "Gemma3TextConfig", read: readDecoder, tied: true, maxPos: 131072, actKey: "hidden_activation", act: "gelu_pytorch_tanh"},
	"deepseek_v2": {class: "DeepseekV2Config", read: readDeepSeek, maxPos: 2048, actKey: "hidden_act", act: "silu"},
	"deepseek_v3": {class: "DeepseekV3Config", read: readDeepSeek, maxPos: 4096, actKey: "hidden_act", act: "silu"},
}

// refused are model types with a reason more useful than "not supported".
var refused = map[string]string{
	"gemma3": "multimodal Gemma 3 (a SigLIP vision tower beside the language model) is not supported; import the language model alone from a text-only config (model_type \"gemma3_text\", as Gemma 3 1B ships, or the text_config of this one saved with model_type \"gemma3_text\")",
}

// Bounds on the sizes that multiply into module counts: far above any
// published model, low enough that lowering stays quick.
const (
	maxLayers        = 1 << 14
	maxExperts       = 1 << 10
	maxExpertModules = 1 << 16
)

// readDecoder reads the Llama-style decoders: Llama, Mistral, Mixtral,
// Qwen2 and Gemma share their config fields and module layout.
func readDecoder(c *config, m *model) {
	f := m.family
	m.vocab = c.need("vocab_size")
	m.hidden = c.need("hidden_size")
	m.inter = c.need("intermediate_size")
	m.layers = c.need("num_hidden_layers")
	m.heads = c.need("num_attention_heads")
	if m.modelType == "llama" || m.modelType == "phi3" || m.modelType == "olmo2" {
		// These config classes document the fallback (None means one
		// key/value head per query head), and Llama 1 configs rely on it.
		if kv, ok := c.optInt("num_key_value_heads"); ok {
			m.kvHeads = kv
		} else if !c.has("num_key_value_heads") {
			m.kvHeads = m.heads
			m.assume("num_key_value_heads is not set: every head has its own keys and values (%s's default)", f.class)
		}
	} else {
		// The other config classes default it to one model size's figure,
		// which would silently be wrong for the rest.
		m.kvHeads = c.need("num_key_value_heads")
	}
	switch m.modelType {
	case "gemma", "gemma2", "gemma3_text":
		m.headDim = c.need("head_dim")
	case "qwen3":
		if hd, ok := c.optInt("head_dim"); ok {
			m.headDim = hd
		} else if !c.has("head_dim") {
			m.headDim = 128
			m.assume("head_dim is not set: Qwen3Config's default, 128")
		}
	default:
		if hd, ok := c.optInt("head_dim"); ok {
			m.headDim = hd
		}
	}
	switch m.modelType {
	case "phi3":
		m.fused = true
	case "olmo2":
		m.qkNorm, m.norms = "full", "olmo2"
	case "qwen3":
		m.qkNorm = "head"
	case "gemma2":
		m.norms = "gemma2"
	case "gemma3_text":
		m.qkNorm, m.norms = "head", "gemma2"
	}

	m.tied = f.tied
	if v, ok := c.optBool("tie_word_embeddings"); ok {
		m.tied = v
	} else if !c.has("tie_word_embeddings") {
		m.assume("tie_word_embeddings is not set: %s's default, %v", f.class, f.tied)
	}

	key, act, gated := activation(c, m)
	if gated != "" {
		m.act = gated
	} else if act != "" {
		c.errorf("%s %q is not supported for %s: its MLP is gated, and fsdpc models gated MLPs with silu (SwiGLU) or gelu (GeGLU)", key, clean(act), m.modelType)
	}

	switch m.modelType {
	case "llama":
		if v, _ := c.optBool("attention_bias"); v {
			m.qkvBias, m.outBias = true, true
		}
		if v, _ := c.optBool("mlp_bias"); v {
			m.mlpBias = true
		}
	case "gemma", "gemma2", "gemma3_text", "olmo2", "qwen3":
		if v, _ := c.optBool("attention_bias"); v {
			m.qkvBias, m.outBias = true, true
		}
	case "qwen2":
		// Qwen2Attention hard-codes bias=True on q, k and v and none on o.
		m.qkvBias = true
	case "mixtral":
		m.experts = c.need("num_local_experts")
		m.topK = c.need("num_experts_per_tok")
	}

	m.maxPosKey = "max_position_embeddings"
	// Only seq_len comes from it, and long-context models go far past the
	// bound on sizes that shape parameters.
	if n, ok := c.optIntUpTo("max_position_embeddings", 1<<40); ok {
		m.maxPos = n
	} else if !c.has("max_position_embeddings") {
		m.maxPos = f.maxPos
		m.assume("max_position_embeddings is not set: %s's default, %d", f.class, f.maxPos)
	}
	switch m.modelType {
	case "mistral", "mixtral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text":
		on := true
		if m.modelType == "qwen2" || m.modelType == "qwen3" {
			on, _ = c.optBool("use_sliding_window")
		}
		if w, ok := c.optIntUpTo("sliding_window", 1<<40); ok && on {
			m.slidingWindow = w
		}
	}
	checkShape(c, m)
}

func readGPT2(c *config, m *model) {
	m.vocab = c.need("vocab_size")
	m.hidden = c.need("n_embd")
	m.layers = c.need("n_layer")
	m.heads = c.need("n_head")
	m.kvHeads = m.heads
	// n_positions sizes wpe, so unlike max_position_embeddings elsewhere it
	// is a parameter shape and cannot be guessed.
	m.maxPos = c.need("n_positions")
	m.maxPosKey = "n_positions"
	if n, ok := c.optInt("n_inner"); ok {
		m.inter = n
	} else if !c.has("n_inner") && m.hidden > 0 {
		m.inter = 4 * m.hidden
		m.assume("n_inner is not set: the MLP is 4 × n_embd = %d wide (GPT2Config's default)", m.inter)
	}
	m.tied = true
	if v, ok := c.optBool("tie_word_embeddings"); ok {
		m.tied = v
	}
	if v, _ := c.optBool("add_cross_attention"); v {
		c.errorf("add_cross_attention = true is not supported: only decoder-only GPT-2 models are")
	}
	_, act, _ := activation(c, m)
	switch {
	case strings.HasPrefix(act, "gelu"):
		m.act = "gelu"
	case act == "relu":
		m.act = "relu"
	case act == "silu" || act == "swish":
		m.act = "silu"
	case act != "":
		c.errorf("activation_function %q is not supported (supported: gelu variants, relu, silu)", clean(act))
	}
	m.qkvBias, m.outBias, m.mlpBias = true, true, true
	checkShape(c, m)
}

// activation returns the config's activation, the key it was read from,
// and, for a gated MLP, the ir activation it makes.
func activation(c *config, m *model) (key, act, gated string) {
	f := m.family
	key = f.actKey
	act, ok := c.optString(key)
	if !ok && m.modelType == "gemma" && !c.has(key) {
		// Older Gemma configs have only hidden_act.
		key = "hidden_act"
		act, ok = c.optString(key)
	}
	switch {
	case ok && act == "":
		c.errorf("%s is empty: name the activation, for example %q (%s's default)", key, f.act, f.class)
		return key, "", ""
	case ok:
		m.actNote = fmt.Sprintf("%s = %q", key, clean(act))
	case c.has(key):
		return key, "", "" // mistyped: already reported
	default:
		act = f.act
		m.actNote = fmt.Sprintf("%s's default, %q", f.class, act)
	}
	if !f.gpt2 {
		// The config names the activation only; the gate comes with the family.
		m.actNote += ", gated"
	}
	switch {
	case act == "silu" || act == "swish":
		return key, act, "swiglu"
	case strings.HasPrefix(act, "gelu"):
		return key, act, "geglu"
	}
	return key, act, ""
}

// checkShape reports configs whose sizes do not fit together, in the
// config's terms, before ir would in its own.
func checkShape(c *config, m *model) {
	if len(c.errs) > 0 {
		return
	}
	if m.layers > maxLayers {
		c.errorf("%d layers is more than fsdpc imports (%d)", m.layers, maxLayers)
	}
	if !m.mla && m.heads%m.kvHeads != 0 {
		c.errorf("num_attention_heads (%d) is not a multiple of num_key_value_heads (%d)", m.heads, m.kvHeads)
	}
	if !m.mla && m.headDim == 0 && m.hidden%m.heads != 0 {
		c.errorf("hidden size %d is not a multiple of the %d attention heads", m.hidden, m.heads)
	}
	if m.experts > 0 {
		switch {
		case m.experts > maxExperts:
			c.errorf("num_local_experts = %d is more than fsdpc imports (%d)", m.experts, maxExperts)
		case m.topK > m.experts:
			c.errorf("num_experts_per_tok (%d) exceeds num_local_experts (%d)", m.topK, m.experts)
		case m.layers*m.experts > maxExpertModules:
			c.errorf("%d layers × %d experts is more than fsdpc imports (%d expert MLPs)", m.layers, m.experts, maxExpertModules)
		}
	}
}

// setTraining picks the training setup: the options, or defaults that fit
// the model.
func (m *model) setTraining(opt Options) error {
	m.gpu, m.worldSize, m.gpusPerNode = opt.GPU, opt.WorldSize, opt.GPUsPerNode
	m.microBatch, m.checkpointing = opt.MicroBatch, opt.Checkpointing
	switch {
	case opt.SeqLen > 0:
		if m.family.gpt2 && opt.SeqLen > m.maxPos {
			return fmt.Errorf("seq-len %d exceeds n_positions %d: GPT-2's position embedding has no rows past it", opt.SeqLen, m.maxPos)
		}
		m.seqLen = opt.SeqLen
		m.seqLenNote = fmt.Sprintf("from --seq-len; %s = %d", m.maxPosKey, m.maxPos)
		if opt.SeqLen > m.maxPos {
			m.seqLenNote += ", so longer than the model was trained for"
		}
	default:
		m.seqLen = min(m.maxPos, DefaultMaxSeqLen)
		m.seqLenNote = fmt.Sprintf("min(%s = %d, %d)", m.maxPosKey, m.maxPos, DefaultMaxSeqLen)
	}
	if m.slidingWindow > 0 && m.slidingWindow < m.seqLen {
		m.assume("sliding_window = %d is not modelled: attention costs assume each token sees all earlier ones", m.slidingWindow)
	}
	return nil
}

func jsonString(raw json.RawMessage, out *string) bool {
	return json.Unmarshal(raw, out) == nil
}

// readDeepSeek reads DeepSeek-V2 and V3: multi-head latent attention, and
// MoE layers of shared and routed experts after first_k_dense_replace
// dense layers.
func readDeepSeek(c *config, m *model) {
	f := m.family
	m.mla = true
	m.vocab = c.need("vocab_size")
	m.hidden = c.need("hidden_size")
	m.inter = c.need("intermediate_size")
	m.layers = c.need("num_hidden_layers")
	m.heads = c.need("num_attention_heads")
	m.kvHeads = m.heads
	// q_lora_rank null (V2-Lite) means a plain q_proj.
	if r, ok := c.optInt("q_lora_rank"); ok {
		m.qLoraRank = r
	}
	m.kvLoraRank = c.need("kv_lora_rank")
	m.qkNope = c.need("qk_nope_head_dim")
	m.qkRope = c.need("qk_rope_head_dim")
	m.vHeadDim = c.need("v_head_dim")
	if v, _ := c.optBool("attention_bias"); v {
		m.qkvBias = true
	}
	if v, ok := c.optBool("tie_word_embeddings"); ok {
		m.tied = v
	}
	if n, ok := c.optInt("n_routed_experts"); ok {
		m.experts = n
		m.topK = c.need("num_experts_per_tok")
		m.moeInter = c.need("moe_intermediate_size")
		if n, ok := c.optInt("n_shared_experts"); ok {
			m.sharedExperts = n
		}
		if raw, ok := c.raw("first_k_dense_replace"); ok && raw != "0" {
			m.firstDense = c.need("first_k_dense_replace")
		}
		if freq, ok := c.optInt("moe_layer_freq"); ok && freq != 1 {
			c.errorf("moe_layer_freq = %d is not supported: only every layer after first_k_dense_replace being MoE (1), as in every published DeepSeek-V2/V3", freq)
		}
		method, ok := c.optString("topk_method")
		if !ok && m.modelType == "deepseek_v3" {
			method = "noaux_tc" // DeepseekV3Config's default
		}
		// V3's gate carries a learned bias on the routing scores.
		m.scoreBias = method == "noaux_tc"
		if m.firstDense > m.layers {
			c.errorf("first_k_dense_replace (%d) exceeds num_hidden_layers (%d)", m.firstDense, m.layers)
		}
	} else {
		m.firstDense = m.layers
		m.assume("n_routed_experts is not set: every layer has a dense MLP")
	}
	_, act, gated := activation(c, m)
	if gated != "swiglu" && act != "" { // "": already reported
		c.errorf("hidden_act %q is not supported for %s: its MLPs are SwiGLU (silu)", clean(act), m.modelType)
	}
	m.act = gated
	m.maxPosKey = "max_position_embeddings"
	if n, ok := c.optIntUpTo("max_position_embeddings", 1<<40); ok {
		m.maxPos = n
	} else if !c.has("max_position_embeddings") {
		m.maxPos = f.maxPos
		m.assume("max_position_embeddings is not set: %s's default, %d", f.class, f.maxPos)
	}
	if n, ok := c.optInt("num_nextn_predict_layers"); ok {
		m.assume("num_nextn_predict_layers = %d: the multi-token-prediction module is not part of the transformers model and is left out", n)
	}
	checkShape(c, m)
}
