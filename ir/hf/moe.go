package hf

import "fmt"

// readMoE reads the experts of the Llama-style MoE families and which
// layers have them. transformers 5 builds every one with fused expert
// tensors (moeLayouts).
func readMoE(c *config, m *model) {
	switch m.modelType {
	case "mixtral", "gpt_oss":
		m.experts, m.expertsKey = c.need("num_local_experts"), "num_local_experts"
		m.topK = c.need("num_experts_per_tok")
		m.moeInter = m.inter
	case "qwen3_moe":
		m.experts, m.expertsKey = c.need("num_experts"), "num_experts"
		m.topK = c.need("num_experts_per_tok")
		m.moeInter = c.need("moe_intermediate_size")
		// Qwen3MoeDecoderLayer: MoE where (i+1) is a multiple of
		// decoder_sparse_step and i is not in mlp_only_layers.
		step := int64(1)
		if n, ok := c.optInt("decoder_sparse_step"); ok {
			step = n
		}
		only, _ := c.optIntList("mlp_only_layers", m.layers)
		dense := map[int64]bool{}
		for _, i := range only {
			dense[i] = true
		}
		m.layerMoE = make([]bool, m.layers)
		for i := range m.layerMoE {
			m.layerMoE[i] = !dense[int64(i)] && int64(i+1)%step == 0
		}
	case "llama4_text":
		m.experts, m.expertsKey = c.need("num_local_experts"), "num_local_experts"
		m.topK = c.need("num_experts_per_tok")
		m.moeInter = m.inter
		m.sharedExperts = 1
		m.ffnName = "feed_forward"
		// Dense layers' MLP is intermediate_size_mlp wide.
		m.inter = c.need("intermediate_size_mlp")
		// moe_layers, else every interleave_moe_layer_step-th layer
		// counted from 1 (Llama4TextConfig.__post_init__).
		m.layerMoE = make([]bool, m.layers)
		if list, ok := c.optIntList("moe_layers", m.layers); ok {
			c.raw("interleave_moe_layer_step") // moe_layers wins
			for _, i := range list {
				m.layerMoE[i] = true
			}
		} else {
			step := int64(1)
			if n, ok := c.optInt("interleave_moe_layer_step"); ok {
				step = n
			}
			for i := step - 1; i < m.layers; i += step {
				m.layerMoE[i] = true
			}
		}
	default:
		return
	}
	m.moe = moeLayouts[m.modelType]
	uniform := true
	for _, v := range m.layerMoE {
		uniform = uniform && v == m.layerMoE[0]
	}
	if uniform && len(m.layerMoE) > 0 {
		if !m.layerMoE[0] {
			m.experts = 0 // no layer has the experts
			m.assume("no layer is an MoE layer (%s): every feed-forward is a dense MLP", m.expertsKey)
		}
		m.layerMoE = nil
	}
}

// layerTypes are the attention kinds transformers' layer_types may name.
var layerTypes = []string{"full_attention", "sliding_attention", "chunked_attention"}

// readWindows reads the sliding window and the layers it applies to. It
// shapes no parameter; the header says where it is not modelled.
func readWindows(c *config, m *model) {
	types, listed := c.optStringList("layer_types", m.layers, layerTypes...)
	sliding := int64(0)
	for _, t := range types {
		if t == "sliding_attention" {
			sliding++
		}
	}
	every := func(k int64) int64 { // layers i with (i+1) % k != 0
		return m.layers - m.layers/k
	}
	on := true
	switch m.modelType {
	case "mistral", "mixtral", "phi3", "gemma2", "gemma3_text", "olmo3", "gpt_oss":
	case "qwen2", "qwen3", "qwen3_moe", "smollm3":
		on, _ = c.optBool("use_sliding_window")
		c.raw("max_window_layers")
		c.raw("no_rope_layers") // SmolLM3: which layers skip RoPE (element-wise)
		c.raw("no_rope_layer_interval")
	case "llama4_text":
		// Chunked attention on the RoPE layers: a window of its own.
		c.raw("no_rope_layers")
		c.raw("no_rope_layer_interval")
		if w, ok := c.optIntUpTo("attention_chunk_size", 1<<40); ok {
			m.slidingWindow = w
			m.windowNote = fmt.Sprintf("attention_chunk_size = %d (chunked attention on the RoPE layers)", w)
		}
		return
	default:
		return
	}
	w, ok := c.optIntUpTo("sliding_window", 1<<40)
	if !ok || !on {
		return
	}
	m.slidingWindow = w
	switch {
	case listed:
		m.windowNote = fmt.Sprintf("sliding_window = %d (on the %d of %d layers that layer_types marks sliding_attention)", w, sliding, m.layers)
	case m.modelType == "gpt_oss" || m.modelType == "gemma2":
		m.windowNote = fmt.Sprintf("sliding_window = %d (on every other layer, %d of %d)", w, every(2), m.layers)
	case m.modelType == "gemma3_text":
		p := int64(6)
		if n, ok := c.optInt("sliding_window_pattern"); ok {
			p = n
		}
		m.windowNote = fmt.Sprintf("sliding_window = %d (on %d of %d layers: all but every sliding_window_pattern-th)", w, every(p), m.layers)
	case m.modelType == "olmo3":
		m.windowNote = fmt.Sprintf("sliding_window = %d (on three layers of every four, %d of %d)", w, every(4), m.layers)
	default:
		m.windowNote = fmt.Sprintf("sliding_window = %d", w)
	}
}
