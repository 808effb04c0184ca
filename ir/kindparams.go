package ir

import (
	"fmt"
	"slices"

	"github.com/fsdpc/fsdpc/internal/checked"
)

// The parameters each kind creates, as child modules named like PyTorch's
// (torchtitan's by default, overridable with `names`).

type paramSpec struct {
	local string
	shape []int64
	// trainable forces requires_grad (LoRA adapters train under a frozen base).
	trainable bool
}

type childSpec struct {
	name     string
	kind     Kind
	params   []paramSpec
	children []childSpec
}

// kindShape is what a kind makes: its own parameters and its children.
type kindShape struct {
	params   []paramSpec
	children []childSpec
}

func roleName(a attrValues, role, def string) string {
	if n, ok := a.names("names")[role]; ok {
		return n
	}
	return def
}

// linearChild makes a Linear(in, out) child; transposed gives GPT-2's
// Conv1D layout [in, out].
func linearChild(name string, in, out int64, bias, transposed bool, loraRank int64) childSpec {
	w := []int64{out, in}
	if transposed {
		w = []int64{in, out}
	}
	c := childSpec{name: name, kind: KindLinear, params: []paramSpec{{local: "weight", shape: w}}}
	if bias {
		c.params = append(c.params, paramSpec{local: "bias", shape: []int64{out}})
	}
	if loraRank > 0 {
		c.children = []childSpec{
			{name: "lora_A", kind: KindLinear, params: []paramSpec{{local: "weight", shape: []int64{loraRank, in}, trainable: true}}},
			{name: "lora_B", kind: KindLinear, params: []paramSpec{{local: "weight", shape: []int64{out, loraRank}, trainable: true}}},
		}
	}
	return c
}

func isGated(act string) bool { return act == "swiglu" || act == "geglu" }

// attnDims are an attention module's derived sizes.
type attnDims struct {
	dim, heads, kvHeads, headDim, kvDim int64
	qOut, kvOut                         int64
	fused                               bool
	// out: the module holds the output projection (out_proj, default
	// true); BERT's BertSelfAttention holds q, k and v only, and its
	// sibling BertSelfOutput projects.
	out bool
}

func attentionDims(a attrValues) (attnDims, error) {
	d := attnDims{dim: a.int("dim", 0), heads: a.int("heads", 0)}
	d.kvHeads = a.int("kv_heads", d.heads)
	if d.heads%d.kvHeads != 0 {
		return d, fmt.Errorf("heads (%d) must be a multiple of kv_heads (%d)", d.heads, d.kvHeads)
	}
	d.headDim = a.int("head_dim", 0)
	if d.headDim == 0 {
		if d.dim%d.heads != 0 {
			return d, fmt.Errorf("dim (%d) is not a multiple of heads (%d); give head_dim", d.dim, d.heads)
		}
		d.headDim = d.dim / d.heads
	}
	d.kvDim = a.int("kv_dim", d.dim)
	var ok bool
	if d.qOut, ok = checked.Mul(d.heads, d.headDim); !ok {
		return d, fmt.Errorf("heads × head_dim overflows")
	}
	if d.kvOut, ok = checked.Mul(d.kvHeads, d.headDim); !ok {
		return d, fmt.Errorf("kv_heads × head_dim overflows")
	}
	d.fused = a.bool("fused_qkv", false)
	d.out = a.bool("out_proj", true)
	if !d.out {
		_, named := a.names("names")["o"]
		switch {
		case a.bool("out_bias", false):
			return d, fmt.Errorf("out_bias with out_proj = false: the attention has no output projection")
		case named:
			return d, fmt.Errorf("names gives \"o\" with out_proj = false: the attention has no output projection")
		case slices.Contains(a.strs("lora_targets"), "o"):
			return d, fmt.Errorf("lora_targets names \"o\" with out_proj = false: the attention has no output projection")
		}
	}
	if d.fused && a.bool("q_last", false) {
		return d, fmt.Errorf("q_last orders separate q, k and v projections; fused_qkv has one")
	}
	if d.fused && (a.has("kv_dim") || a.has("kv_seq_len")) {
		return d, fmt.Errorf("fused_qkv cannot be combined with cross-attention (kv_dim, kv_seq_len)")
	}
	if a.has("window") || a.has("chunk") {
		switch {
		case a.has("window") && a.has("chunk"):
			return d, fmt.Errorf("window and chunk cannot both be set: an attention is either sliding-window or chunked")
		case !a.bool("causal", true) || a.has("kv_dim") || a.has("kv_seq_len"):
			return d, fmt.Errorf("window and chunk restrict causal self-attention; this attention is not causal or is cross-attention")
		}
	}
	return d, nil
}

func loraTargets(a attrValues, def []string) map[string]bool {
	targets := a.strs("lora_targets")
	if targets == nil {
		targets = def
	}
	out := map[string]bool{}
	for _, t := range targets {
		out[t] = true
	}
	return out
}

func (k Kind) shape(a attrValues) (kindShape, error) {
	switch k {
	case KindLinear:
		lin := linearChild("", a.int("in", 0), a.int("out", 0), a.bool("bias", false), a.bool("transposed", false), a.int("lora_rank", 0))
		return kindShape{params: lin.params, children: lin.children}, nil

	case KindEmbedding:
		return kindShape{params: []paramSpec{{local: "weight", shape: []int64{a.int("num", 0), a.int("dim", 0)}}}}, nil

	case KindNorm:
		dim := a.int("dim", 0)
		isLayer := a.str("norm", "rms") == "layer"
		var s kindShape
		if a.bool("affine", true) {
			s.params = append(s.params, paramSpec{local: "weight", shape: []int64{dim}})
			if a.bool("bias", isLayer) {
				s.params = append(s.params, paramSpec{local: "bias", shape: []int64{dim}})
			}
		} else if a.has("bias") && a.bool("bias", false) {
			return s, fmt.Errorf("a norm with affine = false has no bias")
		}
		return s, nil

	case KindAttention:
		d, err := attentionDims(a)
		if err != nil {
			return kindShape{}, err
		}
		qkvBias, outBias, tr := a.bool("qkv_bias", false), a.bool("out_bias", false), a.bool("transposed", false)
		rank := a.int("lora_rank", 0)
		lora := loraTargets(a, []string{"q", "v"})
		if d.fused {
			lora = loraTargets(a, []string{"qkv"})
		}
		r := func(role string) int64 {
			if lora[role] {
				return rank
			}
			return 0
		}
		var s kindShape
		if d.fused {
			for _, role := range []string{"q", "k", "v"} {
				if lora[role] && rank > 0 {
					return s, fmt.Errorf("lora_targets names %q, but fused_qkv has a single \"qkv\" projection", role)
				}
			}
			s.children = append(s.children, linearChild(roleName(a, "qkv", "wqkv"), d.dim, d.qOut+2*d.kvOut, qkvBias, tr, r("qkv")))
		} else {
			if lora["qkv"] && rank > 0 {
				return s, fmt.Errorf("lora_targets names \"qkv\", but q, k and v are separate projections")
			}
			q := linearChild(roleName(a, "q", "wq"), d.dim, d.qOut, qkvBias, tr, r("q"))
			kv := []childSpec{
				linearChild(roleName(a, "k", "wk"), d.kvDim, d.kvOut, qkvBias, tr, r("k")),
				linearChild(roleName(a, "v", "wv"), d.kvDim, d.kvOut, qkvBias, tr, r("v"))}
			if a.bool("q_last", false) {
				// fairseq's order, which BART, OPT, Whisper and CLIP keep:
				// k_proj, v_proj, then q_proj.
				s.children = append(append(s.children, kv...), q)
			} else {
				s.children = append(append(s.children, q), kv...)
			}
		}
		o := linearChild(roleName(a, "o", "wo"), d.qOut, d.dim, outBias, tr, r("o"))
		switch {
		case !d.out:
			// No output projection of its own (BERT's self-attention).
		case d.fused && s.children[0].name == "qkv_proj":
			// Hugging Face's Phi3Attention registers o_proj before qkv_proj.
			s.children = append([]childSpec{o}, s.children...)
		default:
			s.children = append(s.children, o)
		}
		// q/k norms register after the projections (Qwen3, OLMo-2, Gemma 3):
		// per head over head_dim, or over the whole projection (OLMo-2).
		switch a.str("qk_norm", "none") {
		case "head":
			s.children = append(s.children, normChild(roleName(a, "q_norm", "q_norm"), d.headDim), normChild(roleName(a, "k_norm", "k_norm"), d.headDim))
		case "full":
			s.children = append(s.children, normChild(roleName(a, "q_norm", "q_norm"), d.qOut), normChild(roleName(a, "k_norm", "k_norm"), d.kvOut))
		}
		if a.bool("sinks", false) {
			// gpt-oss: a learned logit per head that joins every query's
			// softmax, a parameter of the attention module itself.
			s.params = append(s.params, paramSpec{local: "sinks", shape: []int64{d.heads}})
		}
		return s, nil

	case KindMLA:
		return mlaShape(a)

	case KindMLP:
		dim, hidden, act := a.int("dim", 0), a.int("hidden", 0), a.str("activation", "swiglu")
		bias, tr, rank := a.bool("bias", false), a.bool("transposed", false), a.int("lora_rank", 0)
		lora := loraTargets(a, []string{"gate", "up", "down"})
		r := func(role string) int64 {
			if lora[role] {
				return rank
			}
			return 0
		}
		var s kindShape
		if a.bool("fused_gate_up", false) {
			// Phi-3's one gate_up_proj [2·hidden, dim], chunked in two.
			if !isGated(act) {
				return s, fmt.Errorf("fused_gate_up needs a gated activation (swiglu or geglu), not %s", act)
			}
			if rank > 0 {
				return s, fmt.Errorf("lora_rank is not supported with fused_gate_up")
			}
			s.children = []childSpec{
				linearChild(roleName(a, "gate_up", "w13"), dim, 2*hidden, bias, tr, 0),
				linearChild(roleName(a, "down", "w2"), hidden, dim, bias, tr, 0),
			}
			return s, nil
		}
		if isGated(act) {
			gate := linearChild(roleName(a, "gate", "w1"), dim, hidden, bias, tr, r("gate"))
			up := linearChild(roleName(a, "up", "w3"), dim, hidden, bias, tr, r("up"))
			down := linearChild(roleName(a, "down", "w2"), hidden, dim, bias, tr, r("down"))
			s.children = gatedOrder(gate, up, down)
		} else {
			if lora["gate"] && rank > 0 && a.strs("lora_targets") != nil {
				return s, fmt.Errorf("lora_targets names \"gate\", but a %s MLP has no gate projection", act)
			}
			s.children = []childSpec{
				linearChild(roleName(a, "up", "w1"), dim, hidden, bias, tr, r("up")),
				linearChild(roleName(a, "down", "w2"), hidden, dim, bias, tr, r("down")),
			}
		}
		return s, nil

	case KindMoE:
		return moeShape(a)

	case KindConv:
		return convShape(a)
	}
	return kindShape{}, nil
}

// gatedOrder puts a gated MLP's projections in the order the implementation
// registers them, which is FSDP2's parameter order: torchtitan's
// FeedForward and Mixtral's experts register w1, w2, w3 (gate, down, up);
// Hugging Face's LlamaMLP and its kin register gate_proj, up_proj,
// down_proj. The numbered names mark the first convention.
func gatedOrder(gate, up, down childSpec) []childSpec {
	if gate.name == "w1" && down.name == "w2" && up.name == "w3" {
		return []childSpec{gate, down, up}
	}
	return []childSpec{gate, up, down}
}

func moeShape(a attrValues) (kindShape, error) {
	dim, hidden, experts, topK := a.int("dim", 0), a.int("hidden", 0), a.int("experts", 0), a.int("top_k", 0)
	if topK > experts {
		return kindShape{}, fmt.Errorf("top_k (%d) must not exceed experts (%d)", topK, experts)
	}
	if experts > 1<<16 {
		return kindShape{}, fmt.Errorf("experts (%d) must be at most 65536", experts)
	}
	act, bias := a.str("activation", "swiglu"), a.bool("bias", false)
	gate, up, down := roleName(a, "gate", "w1"), roleName(a, "up", "w3"), roleName(a, "down", "w2")
	router := linearChild(roleName(a, "router", "gate"), dim, experts, a.bool("router_bias", false), false, 0)
	if a.bool("router_score_bias", false) {
		// DeepSeek-V3's gate: a per-expert bias added to the routing
		// scores (aux-loss-free balancing), a parameter of its own.
		router.params = append(router.params, paramSpec{local: "e_score_correction_bias", shape: []int64{experts}})
	}
	expertsName := roleName(a, "experts", "experts")

	mlp := func(name string, hidden int64) childSpec {
		c := childSpec{name: name, kind: KindMLP}
		if isGated(act) {
			c.children = gatedOrder(linearChild(gate, dim, hidden, bias, false, 0), linearChild(up, dim, hidden, bias, false, 0), linearChild(down, hidden, dim, bias, false, 0))
		} else {
			c.children = []childSpec{linearChild(up, dim, hidden, bias, false, 0), linearChild(down, hidden, dim, bias, false, 0)}
		}
		return c
	}
	fused, tr := a.bool("fused_gate_up", false), a.bool("transposed", false)
	switch {
	case (fused || tr) && !a.bool("grouped", false):
		return kindShape{}, fmt.Errorf("fused_gate_up and transposed describe grouped experts' tensors; set grouped = true")
	case fused && !isGated(act):
		return kindShape{}, fmt.Errorf("fused_gate_up needs a gated activation (swiglu or geglu), not %s", act)
	case tr && !fused:
		return kindShape{}, fmt.Errorf("transposed experts are supported with fused_gate_up (Llama 4's and gpt-oss's layout)")
	}
	var ex childSpec
	if fused {
		// Hugging Face's fused experts (transformers 5): one gate_up
		// tensor [experts, 2·hidden, dim] and one down [experts, dim,
		// hidden], or [experts, in, out] transposed (Llama 4, gpt-oss);
		// with bias, gpt-oss's per-expert biases follow each tensor.
		gateUp := roleName(a, "gate_up", "w13")
		ex = childSpec{name: expertsName, kind: KindContainer}
		gu, dn := []int64{experts, 2 * hidden, dim}, []int64{experts, dim, hidden}
		if tr {
			gu, dn = []int64{experts, dim, 2 * hidden}, []int64{experts, hidden, dim}
		}
		ex.params = append(ex.params, paramSpec{local: gateUp, shape: gu})
		if bias {
			ex.params = append(ex.params, paramSpec{local: gateUp + "_bias", shape: []int64{experts, 2 * hidden}})
		}
		ex.params = append(ex.params, paramSpec{local: down, shape: dn})
		if bias {
			ex.params = append(ex.params, paramSpec{local: down + "_bias", shape: []int64{experts, dim}})
		}
	} else if a.bool("grouped", false) {
		// torchtitan's GroupedExperts: one 3-D tensor per projection.
		ex = childSpec{name: expertsName, kind: KindContainer}
		if isGated(act) {
			ex.params = []paramSpec{{local: gate, shape: []int64{experts, hidden, dim}}, {local: down, shape: []int64{experts, dim, hidden}}, {local: up, shape: []int64{experts, hidden, dim}}}
		} else {
			ex.params = []paramSpec{{local: up, shape: []int64{experts, hidden, dim}}, {local: down, shape: []int64{experts, dim, hidden}}}
		}
	} else {
		ex = childSpec{name: expertsName, kind: KindContainer}
		for i := int64(0); i < experts; i++ {
			ex.children = append(ex.children, mlp(fmt.Sprint(i), hidden))
		}
	}
	s := kindShape{children: []childSpec{router, ex}}
	if a.bool("experts_first", false) {
		// DeepSeek's MoE registers its experts before the gate.
		s.children = []childSpec{ex, router}
	}
	if n := a.int("shared_experts", 0); n > 0 {
		h, ok := checked.Mul(n, hidden)
		if !ok {
			return s, fmt.Errorf("shared_experts × hidden overflows")
		}
		s.children = append(s.children, mlp(roleName(a, "shared", "shared_experts"), h))
	}
	return s, nil
}

// convGeometry checks a convolution's sizes and returns its output size.
func convGeometry(a attrValues) (kernel, out []int64, err error) {
	kernel, size := a.ints("kernel"), a.ints("input_size")
	n := len(size)
	if n > 3 {
		return nil, nil, fmt.Errorf("input_size has %d dimensions; conv supports 1, 2 or 3", n)
	}
	switch len(kernel) {
	case n:
	case 1: // a square (cubic) kernel
		k := kernel[0]
		kernel = make([]int64, n)
		for i := range kernel {
			kernel[i] = k
		}
	default:
		return nil, nil, fmt.Errorf("kernel has %d dimensions but input_size has %d", len(kernel), n)
	}
	per := func(k string, def int64) ([]int64, error) {
		v := a.ints(k)
		switch len(v) {
		case 0:
			v = []int64{def}
			fallthrough
		case 1:
			out := make([]int64, n)
			for i := range out {
				out[i] = v[0]
			}
			return out, nil
		case n:
			return v, nil
		}
		return nil, fmt.Errorf("%s has %d values; give 1 or %d", k, len(v), n)
	}
	stride, err := per("stride", 1)
	if err != nil {
		return nil, nil, err
	}
	pad, err := per("padding", 0)
	if err != nil {
		return nil, nil, err
	}
	out = make([]int64, n)
	for i := range out {
		span := size[i] + 2*pad[i] - kernel[i]
		if span < 0 {
			return nil, nil, fmt.Errorf("kernel %d is larger than the padded input %d in dimension %d", kernel[i], size[i]+2*pad[i], i)
		}
		out[i] = span/stride[i] + 1
	}
	return kernel, out, nil
}

func convShape(a attrValues) (kindShape, error) {
	in, out, groups := a.int("in", 0), a.int("out", 0), a.int("groups", 1)
	if in%groups != 0 || out%groups != 0 {
		return kindShape{}, fmt.Errorf("in (%d) and out (%d) must be multiples of groups (%d)", in, out, groups)
	}
	kernel, _, err := convGeometry(a)
	if err != nil {
		return kindShape{}, err
	}
	w := append([]int64{out, in / groups}, kernel...)
	s := kindShape{params: []paramSpec{{local: "weight", shape: w}}}
	if a.bool("bias", true) {
		s.params = append(s.params, paramSpec{local: "bias", shape: []int64{out}})
	}
	return s, nil
}

func normChild(name string, dim int64) childSpec {
	return childSpec{name: name, kind: KindNorm, params: []paramSpec{{local: "weight", shape: []int64{dim}}}}
}

// mlaDims are a multi-head latent attention's sizes.
type mlaDims struct {
	dim, heads, qRank, kvRank, nope, rope, v int64
	qk                                       int64 // nope + rope: a query's and a key's head size
	bias                                     bool
}

func mlaSizes(a attrValues) (mlaDims, error) {
	d := mlaDims{dim: a.int("dim", 0), heads: a.int("heads", 0), qRank: a.int("q_lora_rank", 0), kvRank: a.int("kv_lora_rank", 0),
		nope: a.int("qk_nope_head_dim", 0), rope: a.int("qk_rope_head_dim", 0), v: a.int("v_head_dim", 0), bias: a.bool("bias", false)}
	d.qk = d.nope + d.rope
	for _, x := range [][2]int64{{d.heads, d.qk}, {d.heads, d.nope + d.v}, {d.heads, d.v}} {
		if _, ok := checked.Mul(x[0], x[1]); !ok {
			return d, fmt.Errorf("heads × head size overflows")
		}
	}
	return d, nil
}

// mlaShape follows DeepseekV2Attention's registration: q_proj, or q_a_proj,
// q_a_layernorm and q_b_proj with a query bottleneck; kv_a_proj_with_mqa,
// kv_a_layernorm, kv_b_proj, o_proj. bias is the config's attention_bias,
// which reaches q_a_proj, kv_a_proj_with_mqa and o_proj.
func mlaShape(a attrValues) (kindShape, error) {
	d, err := mlaSizes(a)
	if err != nil {
		return kindShape{}, err
	}
	var s kindShape
	if d.qRank == 0 {
		s.children = append(s.children, linearChild(roleName(a, "q", "wq"), d.dim, d.heads*d.qk, false, false, 0))
	} else {
		s.children = append(s.children,
			linearChild(roleName(a, "q_a", "wq_a"), d.dim, d.qRank, d.bias, false, 0),
			normChild(roleName(a, "q_a_norm", "q_norm"), d.qRank),
			linearChild(roleName(a, "q_b", "wq_b"), d.qRank, d.heads*d.qk, false, false, 0))
	}
	s.children = append(s.children,
		linearChild(roleName(a, "kv_a", "wkv_a"), d.dim, d.kvRank+d.rope, d.bias, false, 0),
		normChild(roleName(a, "kv_a_norm", "kv_norm"), d.kvRank),
		linearChild(roleName(a, "kv_b", "wkv_b"), d.kvRank, d.heads*(d.nope+d.v), false, false, 0),
		linearChild(roleName(a, "o", "wo"), d.heads*d.v, d.dim, d.bias, false, 0))
	return s, nil
}
