package hf

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

// readWindows reads which layers attend through a sliding window or in
// chunks, as transformers 5 derives its layer_types when the config does
// not list them (checked against transformers' own configs in
// TestAgainstTransformers): m.layerAttn per layer, m.window its size. The
// emitter gives those layers' attention a window or chunk, which the
// cost model counts (ir: attention's window and chunk).
func readWindows(c *config, m *model) {
	types, listed := c.optStringList("layer_types", m.layers, layerTypes...)
	noRope := func() []int64 { // SmolLM3 and Llama 4: 1 where the layer uses RoPE
		k := int64(4)
		if n, ok := c.optInt("no_rope_layer_interval"); ok {
			k = n
		}
		if l, ok := c.optIntList("no_rope_layers", m.layers); ok {
			return l
		}
		l := make([]int64, m.layers)
		for i := range l {
			if int64(i+1)%k != 0 {
				l[i] = 1
			}
		}
		return l
	}
	derived := make([]string, m.layers)
	on, window := false, int64(0)
	switch m.modelType {
	case "llama4_text":
		rope := noRope()
		if w, ok := c.optIntUpTo("attention_chunk_size", 1<<40); ok {
			on, window = true, w
			for i := range derived {
				if rope[i] != 0 {
					derived[i] = "chunked_attention"
				}
			}
		}
	case "mistral", "mixtral", "phi3", "gemma2", "gemma3_text", "olmo3", "gpt_oss", "qwen2", "qwen3", "qwen3_moe", "smollm3":
		w, ok := c.optIntUpTo("sliding_window", 1<<40)
		on, window = ok, w
		every := func(k int64) {
			for i := range derived {
				if int64(i+1)%k != 0 {
					derived[i] = "sliding_attention"
				}
			}
		}
		switch m.modelType {
		case "qwen2", "qwen3", "qwen3_moe", "smollm3":
			use, _ := c.optBool("use_sliding_window")
			on = on && use
			from := int64(0)
			if n, ok := c.optInt("max_window_layers"); ok && m.modelType != "qwen3_moe" && m.modelType != "smollm3" {
				from = n
			}
			rope := noRope()
			for i := range derived {
				if int64(i) >= from && (m.modelType != "smollm3" || rope[i] == 0) {
					derived[i] = "sliding_attention"
				}
			}
		case "gemma2", "gpt_oss":
			every(2)
		case "gemma3_text":
			p := int64(6)
			if n, ok := c.optInt("sliding_window_pattern"); ok {
				p = n
			}
			every(p)
		case "olmo3":
			every(4)
		default: // Mistral, Mixtral, Phi-3: every layer
			every(1 << 62)
		}
	default:
		return
	}
	if !listed {
		types = derived
	}
	if !on {
		return
	}
	m.window = window
	m.layerAttn = make([]string, m.layers)
	n := 0
	for i, t := range types {
		switch t {
		case "sliding_attention":
			m.layerAttn[i] = "sliding"
			n++
		case "chunked_attention":
			m.layerAttn[i] = "chunked"
			n++
		}
	}
	if n == 0 {
		m.layerAttn = nil
	}
}
