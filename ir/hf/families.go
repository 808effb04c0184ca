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
	experts, topK             int64 // the MoE families
	// moe is the family's MoE layout; moeInter the experts' width
	// (intermediate_size for Mixtral, gpt-oss and Llama 4).
	moe        *moeLayout
	expertsKey string // the config key that gave experts
	moeInter   int64
	// layerMoE says, per layer, whether its feed-forward is the MoE; nil
	// when every layer's is the same (MoE when experts > 0).
	layerMoE []bool
	// ffnName is the decoder layer's feed-forward child: "mlp", or
	// Llama 4's "feed_forward".
	ffnName string
	// sinks: gpt-oss's learned attention sinks, one logit per head.
	sinks bool
	// bidirectional: Gemma's use_bidirectional_attention.
	bidirectional bool
	// layerAttn says, per layer, whether its attention is "sliding"
	// (a window of window tokens) or "chunked" (chunks of window tokens);
	// "" is full attention. nil when every layer's is full.
	layerAttn []string
	window    int64
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
	mla                       bool
	qLoraRank, kvLoraRank     int64
	qkNope, qkRope, vHeadDim  int64
	sharedExperts, firstDense int64

	maxPos    int64
	maxPosKey string

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

// moeLayout is how a family's transformers 5 MoE block registers its
// parts: every one holds its experts as fused 3-D tensors (gate_up_proj,
// down_proj), not one module per expert as the published safetensors do.
type moeLayout struct {
	class        string // the block's transformers class, for notes
	router       string // the router's child name
	shared       string // the shared expert's child name, if any
	expertsFirst bool   // experts registered before the router
	// transposed: [experts, in, out] tensors (Llama 4, gpt-oss), not
	// [experts, out, in].
	transposed bool
	// bias: gpt-oss's router and expert biases.
	bias bool
}

var moeLayouts = map[string]*moeLayout{
	"mixtral":     {class: "MixtralSparseMoeBlock", router: "gate"},
	"qwen3_moe":   {class: "Qwen3MoeSparseMoeBlock", router: "gate", expertsFirst: true},
	"deepseek_v2": {class: "DeepseekV2Moe", router: "gate", shared: "shared_experts", expertsFirst: true},
	"deepseek_v3": {class: "DeepseekV3MoE", router: "gate", shared: "shared_experts", expertsFirst: true},
	"llama4_text": {class: "Llama4TextMoe", router: "router", shared: "shared_expert", expertsFirst: true, transposed: true},
	"gpt_oss":     {class: "GptOssMLP", router: "router", transposed: true, bias: true},
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
	"gpt_oss":     {class: "GptOssConfig", read: readDecoder, maxPos: 131072, actKey: "hidden_act", act: "silu"},
	"qwen3_moe":   {class: "Qwen3MoeConfig", read: readDecoder, maxPos: 32768, actKey: "hidden_act", act: "silu"},
	"llama4_text": {class: "Llama4TextConfig", read: readDecoder, maxPos: 4096 * 32, actKey: "hidden_act", act: "silu"},
	"smollm3":     {class: "SmolLM3Config", read: readDecoder, tied: true, maxPos: 32768, actKey: "hidden_act", act: "silu"},
	"granite":     {class: "GraniteConfig", read: readDecoder, maxPos: 2048, actKey: "hidden_act", act: "silu"},
	"olmo3":       {class: "Olmo3Config", read: readDecoder, maxPos: 2048, actKey: "hidden_act", act: "silu"},
}

// refused are model types with a reason more useful than "not supported".
var refused = map[string]string{
	"gemma3": "multimodal Gemma 3 (a SigLIP vision tower beside the language model) is not supported; import the language model alone from a text-only config (model_type \"gemma3_text\", as Gemma 3 1B ships, or the text_config of this one saved with model_type \"gemma3_text\")",
	"llama4": "multimodal Llama 4 (a vision encoder beside the language model) is not supported; import the language model alone: save its text_config as a config.json with model_type \"llama4_text\"",
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
	m.ffnName = "mlp"
	switch m.modelType {
	case "llama", "phi3", "olmo2", "olmo3", "granite", "llama4_text":
		// These config classes document the fallback (None means one
		// key/value head per query head), and Llama 1 configs rely on it.
		if kv, ok := c.optInt("num_key_value_heads"); ok {
			m.kvHeads = kv
		} else if !c.has("num_key_value_heads") {
			m.kvHeads = m.heads
			m.assume("num_key_value_heads is not set: every head has its own keys and values (%s's default)", f.class)
		}
	default:
		// The other config classes default it to one model size's figure,
		// which would silently be wrong for the rest.
		m.kvHeads = c.need("num_key_value_heads")
	}
	switch m.modelType {
	case "gemma", "gemma2", "gemma3_text":
		m.headDim = c.need("head_dim")
	case "qwen3", "llama4_text":
		if hd, ok := c.optInt("head_dim"); ok {
			m.headDim = hd
		} else if !c.has("head_dim") {
			m.headDim = 128
			m.assume("head_dim is not set: %s's default, 128", f.class)
		}
	case "gpt_oss":
		if hd, ok := c.optInt("head_dim"); ok {
			m.headDim = hd
		} else if !c.has("head_dim") {
			m.headDim = 64
			m.assume("head_dim is not set: GptOssConfig's default, 64")
		}
	default:
		if hd, ok := c.optInt("head_dim"); ok {
			m.headDim = hd
		}
	}
	switch m.modelType {
	case "phi3":
		m.fused = true
	case "olmo2", "olmo3":
		m.qkNorm, m.norms = "full", "olmo2"
	case "qwen3", "qwen3_moe":
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
	if m.modelType == "gpt_oss" {
		// GptOssExperts hard-codes its clamped SwiGLU (alpha 1.702,
		// limit 7) and never reads hidden_act.
		m.act, m.actNote = "swiglu", "GptOssExperts' clamped SwiGLU; hidden_act is not read"
		gated, act = "swiglu", ""
	}
	if gated != "" {
		m.act = gated
	} else if act != "" {
		c.errorf("%s %q is not supported for %s: its MLP is gated, and fsdpc models gated MLPs with silu (SwiGLU) or gelu (GeGLU)", key, clean(act), m.modelType)
	}

	switch m.modelType {
	case "llama", "granite", "smollm3":
		if v, _ := c.optBool("attention_bias"); v {
			m.qkvBias, m.outBias = true, true
		}
		if v, _ := c.optBool("mlp_bias"); v {
			m.mlpBias = true
		}
	case "gemma", "gemma2", "gemma3_text", "olmo2", "olmo3", "qwen3", "qwen3_moe", "llama4_text":
		if v, _ := c.optBool("attention_bias"); v {
			m.qkvBias, m.outBias = true, true
		}
	case "gpt_oss":
		// GptOssConfig's attention_bias defaults to true, as gpt-oss has.
		m.qkvBias, m.outBias = true, true
		if v, ok := c.optBool("attention_bias"); ok {
			m.qkvBias, m.outBias = v, v
		}
		m.sinks = true
	case "qwen2":
		// Qwen2Attention hard-codes bias=True on q, k and v and none on o.
		m.qkvBias = true
	}
	switch m.modelType {
	case "gemma", "gemma2", "gemma3_text":
		m.bidirectional, _ = c.optBool("use_bidirectional_attention")
	case "granite":
		for _, k := range []string{"embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"} {
			c.raw(k) // element-wise scales: no parameter, no matmul
		}
	}
	readMoE(c, m)

	m.maxPosKey = "max_position_embeddings"
	// Only seq_len comes from it, and long-context models go far past the
	// bound on sizes that shape parameters.
	if n, ok := c.optIntUpTo("max_position_embeddings", 1<<40); ok {
		m.maxPos = n
	} else if !c.has("max_position_embeddings") {
		m.maxPos = f.maxPos
		m.assume("max_position_embeddings is not set: %s's default, %d", f.class, f.maxPos)
	}
	readWindows(c, m)
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
			c.errorf("%s = %d is more than fsdpc imports (%d)", m.expertsKey, m.experts, maxExperts)
		case m.topK > m.experts:
			c.errorf("num_experts_per_tok (%d) exceeds %s (%d)", m.topK, m.expertsKey, m.experts)
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
	m.mla, m.ffnName = true, "mlp"
	m.vocab = c.need("vocab_size")
	m.hidden = c.need("hidden_size")
	m.inter = c.need("intermediate_size")
	m.layers = c.need("num_hidden_layers")
	m.heads = c.need("num_attention_heads")
	m.kvHeads = m.heads
	// MLA projects keys and values for every head; transformers' eager
	// attention would repeat them num_attention_heads / num_key_value_heads
	// times more, which only works when the two are equal.
	if kv, ok := c.optInt("num_key_value_heads"); ok && m.heads > 0 && kv != m.heads {
		c.errorf("num_key_value_heads = %d differs from num_attention_heads (%d): multi-head latent attention has keys and values for every head", kv, m.heads)
	}
	c.raw("head_dim") // the rotary embedding's width only
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
	if v, _ := c.optBool("mlp_bias"); v && m.modelType == "deepseek_v2" {
		c.errorf("mlp_bias = true is not supported for deepseek_v2: it puts biases on the dense and shared MLPs but not on the fused experts, a layout fsdpc's moe kind does not describe")
	}
	if n, ok := c.optInt("n_routed_experts"); ok {
		m.experts, m.expertsKey = n, "n_routed_experts"
		m.moe = moeLayouts[m.modelType]
		m.topK = c.need("num_experts_per_tok")
		m.moeInter = c.need("moe_intermediate_size")
		if n, ok := c.optInt("n_shared_experts"); ok {
			m.sharedExperts = n
		}
		if raw, ok := c.raw("first_k_dense_replace"); ok && raw != "0" {
			m.firstDense = c.need("first_k_dense_replace")
		} else if !ok && m.modelType == "deepseek_v3" {
			m.firstDense = 3
			m.assume("first_k_dense_replace is not set: DeepseekV3Config's default, 3")
		}
		if freq, ok := c.optInt("moe_layer_freq"); ok && freq != 1 {
			c.errorf("moe_layer_freq = %d is not supported: transformers' DeepSeek makes every layer after first_k_dense_replace MoE (1), as every published DeepSeek-V2/V3 has", freq)
		}
		if m.firstDense > m.layers {
			c.errorf("first_k_dense_replace (%d) exceeds num_hidden_layers (%d)", m.firstDense, m.layers)
		}
		if m.firstDense > 0 && m.firstDense < m.layers {
			m.layerMoE = make([]bool, m.layers)
			for i := m.firstDense; i < m.layers; i++ {
				m.layerMoE[i] = true
			}
		}
		if m.firstDense >= m.layers {
			m.experts = 0
		}
	} else if c.has("n_routed_experts") {
		// mistyped: reported
	} else if _, present := c.fields["n_routed_experts"]; present {
		// transformers 5 builds the MoE layers whatever it says, and with
		// no expert count cannot build them at all.
		c.errorf("n_routed_experts is null; transformers' %s builds MoE layers after first_k_dense_replace and needs the expert count", m.modelType)
	} else {
		n := map[string]int64{"deepseek_v2": 64, "deepseek_v3": 256}[m.modelType]
		c.errorf("n_routed_experts is missing; transformers' %s would build %d experts per MoE layer (its default): give the count", m.family.class, n)
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
