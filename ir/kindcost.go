package ir

import (
	"fmt"
	"strconv"

	"github.com/fsdpc/fsdpc/internal/checked"
)

// Cost formulas. FLOPs count matrix multiplies at 2 per multiply-add; the
// element-wise work of norms, activations and softmax is memory-bound and
// not counted (the convention behind MFU figures). Activation bytes are what
// autograd saves for backward, in the activation dtype. docs/model-format.md
// states every formula.

// matmul is one matrix multiply of a module's forward.
type matmul struct {
	flops float64
	// weights are the module-relative names of the parameters whose gradient
	// this matmul produces in backward; none for the attention core.
	weights []string
	// readsInput: its input gradient is needed only when the module's
	// inputs need one.
	readsInput bool
	// dxFactor is the input-gradient cost relative to flops: 1 for a
	// linear, 2.5 for FlashAttention's backward (5 matmuls against 2), 2 for
	// unfused attention.
	dxFactor float64
	// attention: the attention core, charged at FlashAttention's
	// efficiency rather than a GEMM's.
	attention bool
	// gemm is the forward multiply's shape (output rows M = tokens, N =
	// output features, K = input features); zero when the shape is not a
	// plain GEMM (the attention core) or not known.
	gemm GEMM
	// output: this multiply's output is the module's output, which no
	// backward inside the module reads (an MLP's down projection, an
	// attention's output projection, a linear).
	output bool
}

type work struct {
	mms []matmul
	// saved is what forward keeps for backward without checkpointing;
	// savedSelective under selective checkpointing, which recomputes
	// recomputeSelective FLOPs in backward to make up the difference.
	saved, savedSelective int64
	recomputeSelective    float64
	// opPolicy: under selective-op checkpointing what this module keeps
	// is decided by torchtitan's per-op policy over its matmuls in order
	// (see opSAC), not by savedSelective; coreSaved is what the policy
	// keeps of its attention core (SDPA's output and log-sum-exp).
	opPolicy  bool
	coreSaved int64
	// inputBytes is the size of the module's input, what a full
	// checkpoint region keeps of its first module.
	inputBytes int64
	// elemFwd is the HBM traffic of the module's memory-bound forward
	// kernels (see elementwise.go); backward moves twice as much, or
	// elemBwd where a kind counts its backward's kernels itself.
	elemFwd, elemBwd int64
	// elemBefore is the part of elemFwd that computes the module's input
	// rather than reading it (a norm's residual add): a checkpoint region
	// that starts at the module keeps that input and never reruns it.
	elemBefore int64
	// scratchBwd is memory the module's backward holds only while it runs
	// (the loss's logit gradients).
	scratchBwd int64
	// attnDense is the attention core's forward FLOPs counted over every
	// (query, key) pair, causal or not: the convention MFU formulas use.
	attnDense float64
	// experts names the child holding a MoE's routed experts, and
	// expertShare the fraction of them a token visits (top_k/experts), so
	// MFU counts only a token's active parameters.
	experts     string
	expertShare float64
}

type costCtx struct {
	batch, seq, tokens int64
	act                int64 // activation element size
	compile            bool  // torch.compile fuses element-wise kernels
}

// sizer multiplies sizes, remembering the first overflow.
type sizer struct{ err error }

func (z *sizer) mul(xs ...int64) int64 {
	p := int64(1)
	for _, x := range xs {
		var ok bool
		if p, ok = checked.Mul(p, x); !ok {
			if z.err == nil {
				z.err = fmt.Errorf("an activation size overflows 64 bits")
			}
			return 0
		}
	}
	return p
}

func (z *sizer) add(xs ...int64) int64 {
	s := int64(0)
	for _, x := range xs {
		if s+x < s {
			if z.err == nil {
				z.err = fmt.Errorf("an activation size overflows 64 bits")
			}
			return 0
		}
		s += x
	}
	return s
}

func f(xs ...int64) float64 {
	p := 1.0
	for _, x := range xs {
		p *= float64(x)
	}
	return p
}

// linearMM is the matmul of a Linear(in, out) child named name over n
// tokens, plus its LoRA adapter when it has one.
func linearMM(name string, n, in, out, loraRank int64, readsInput bool) []matmul {
	prefix := ""
	if name != "" {
		prefix = name + "."
	}
	mms := []matmul{{flops: 2 * f(n, in, out), weights: []string{prefix + "weight", prefix + "bias"}, readsInput: readsInput, dxFactor: 1,
		gemm: GEMM{n, out, in, 1}}}
	if loraRank > 0 {
		mms = append(mms,
			matmul{flops: 2 * f(n, in, loraRank), weights: []string{prefix + "lora_A.weight"}, readsInput: readsInput, dxFactor: 1,
				gemm: GEMM{n, loraRank, in, 1}},
			matmul{flops: 2 * f(n, loraRank, out), weights: []string{prefix + "lora_B.weight"}, dxFactor: 1,
				gemm: GEMM{n, out, loraRank, 1}})
	}
	return mms
}

func (k Kind) work(a attrValues, c costCtx) (work, error) {
	var z sizer
	var w work
	T, b := c.tokens, c.act
	switch k {
	case KindLinear:
		in, out, r := a.int("in", 0), a.int("out", 0), a.int("lora_rank", 0)
		w.mms = linearMM("", T, in, out, r, true)
		w.mms[len(w.mms)-1].output = true
		w.inputBytes = z.mul(T, in, b)
		w.saved = z.add(w.inputBytes, z.mul(T, r, b))
		w.savedSelective = w.saved
		w.opPolicy = true

	case KindEmbedding:
		// A gather: no FLOPs; backward keeps the int64 token ids.
		w.inputBytes = z.mul(T, 8)
		w.saved, w.savedSelective = w.inputBytes, w.inputBytes
		w.elemFwd = z.mul(T, a.int("dim", 0), 2*b) // read the rows, write the output

	case KindNorm:
		dim := a.int("dim", 0)
		w.inputBytes = z.mul(T, dim, b)
		stats := z.mul(T, 4) // fp32 rstd (and mean) per token
		w.saved = z.add(w.inputBytes, stats)
		fused := a.bool("fused", false)
		if !c.compile && !fused && a.str("norm", "rms") == "rms" {
			// Eager RMSNorm as torchtitan and Hugging Face write it,
			// (x.float() · rsqrt(mean(x²) + eps)).type_as(x) · weight
			// (derivatives.yaml): pow and the product keep the fp32
			// copy, the weight's product keeps the normed tensor cast
			// back, and nothing keeps x: 4 bytes an element more than
			// x (measured, bench/torchmem/blockmem.py). Compiled, the
			// partitioner keeps x and recomputes the rest; a fused
			// kernel (fused = true: torchtitan's Triton fused_rmsnorm)
			// keeps x and its statistics. Its kernels' bytes are still
			// charged as eager's (normPasses).
			w.saved = z.add(w.saved, z.mul(T, dim, 4))
		}
		w.savedSelective = stats
		w.opPolicy = true // recomputed from the region's input
		w.elemFwd = z.mul(T, dim, normPasses(b, c.compile))
		w.elemBefore = z.mul(T, dim, normAddPasses(b, c.compile))

	case KindAttention:
		return attentionWork(a, c)

	case KindMLA:
		return mlaWork(a, c)

	case KindMLP:
		dim, hidden, act := a.int("dim", 0), a.int("hidden", 0), a.str("activation", "swiglu")
		names := []string{roleName(a, "up", "w1"), roleName(a, "down", "w2")}
		roles := []string{"up", "down"}
		if isGated(act) {
			names = []string{roleName(a, "gate", "w1"), roleName(a, "up", "w3"), roleName(a, "down", "w2")}
			roles = []string{"gate", "up", "down"}
		}
		rank := a.int("lora_rank", 0)
		lora := loraTargets(a, []string{"gate", "up", "down"})
		if a.bool("fused_gate_up", false) {
			// One [2·hidden, dim] projection does the gate's and up's work.
			names, roles = []string{roleName(a, "gate_up", "w13"), roleName(a, "down", "w2")}, []string{"gate_up", "down"}
		}
		for i, n := range names {
			in, out := dim, hidden
			switch roles[i] {
			case "down":
				in, out = hidden, dim
			case "gate_up":
				out = 2 * hidden
			}
			r := int64(0)
			if lora[roles[i]] {
				r = rank
			}
			w.mms = append(w.mms, linearMM(n, T, in, out, r, roles[i] != "down")...)
			if roles[i] == "down" {
				w.mms[len(w.mms)-1].output = true
			}
		}
		w.inputBytes = z.mul(T, dim, b)
		w.saved, w.savedSelective = mlpSaved(&z, T, dim, hidden, b, act)
		if !c.compile && isGated(act) {
			// Eager: silu(gate) keeps its input (the gate) and the product
			// keeps silu's output, a fourth hidden-wide tensor.
			w.saved = z.add(w.saved, z.mul(T, hidden, b))
		}
		w.opPolicy = true
		w.elemFwd = z.mul(T, hidden, activationPasses(act, b, c.compile))

	case KindMoE:
		return moeWork(a, c)

	case KindLoss:
		vocab, u := a.int("vocab", 0), int64(4)
		if !a.bool("upcast", true) {
			u = b
		}
		w.inputBytes = z.mul(T, vocab, b)
		if a.bool("compiled", c.compile) {
			// torch.compile'd (torchtitan compiles the loss with
			// training.compile since pytorch/torchtitan bbb1b616e,
			// 2025-04-02): Inductor fuses the upcast, log-softmax and
			// the gather, and the min-cut partitioner recomputes the
			// element-wise softmax in backward from the logits, so what
			// crosses to backward is the logits themselves and an fp32
			// log-sum-exp per token; backward writes the logits'
			// gradient in their own dtype, never an fp32 one.
			w.saved = z.add(z.mul(T, vocab, b), z.mul(T, 4))
			w.savedSelective = w.saved
			// The max and sum pass and the gather read the logits twice.
			w.elemFwd = z.mul(T, vocab, 2*b)
			w.scratchBwd = z.mul(T, vocab, b)
			break
		}
		// Eager, torchtitan's cross_entropy(logits.float(), labels): the
		// upcast logits feed log_softmax, whose fp32 output is what
		// backward keeps. Backward (PyTorch's derivatives.yaml):
		// nll_loss_backward writes a dense gradient of the
		// log-probabilities (u per element), and
		// _log_softmax_backward_data(grad, output) writes the logits'
		// gradient (u) while both are live; the cast back to the
		// activation dtype follows once the first is freed (u + b < 2u).
		// Without the upcast (cross_entropy on the bf16 logits: fms-fsdp,
		// KempnerForge) u is b and there is no cast either way.
		w.saved = z.mul(T, vocab, u)
		w.savedSelective = w.saved
		// A vocabulary-wide row does not fit in shared memory, so
		// log_softmax reads its input three times (max, sum of
		// exponentials, output) and writes once: 4u. The upcast reads b
		// and writes u before it.
		cast := int64(0)
		if u != b {
			cast = b + u
		}
		w.elemFwd = z.mul(T, vocab, cast+4*u)
		// Backward: nll_loss_backward's zero fill (write u), then
		// _log_softmax_backward_data, grad − exp(output)·Σgrad, reads the
		// gradient twice (the sum, then the result) and the output once
		// and writes once (4u), then the cast back (read u, write b): the
		// kernels themselves, not twice the forward, which would count
		// the upcast and the max and sum passes again.
		w.elemBwd = z.mul(T, vocab, 5*u+cast)
		w.scratchBwd = z.mul(T, vocab, max(2*u, u+b))

	case KindConv:
		in, out, groups := a.int("in", 0), a.int("out", 0), a.int("groups", 1)
		kernel, outSize, err := convGeometry(a)
		if err != nil {
			return w, err
		}
		pos := c.batch
		for _, o := range outSize {
			pos = z.mul(pos, o)
		}
		macs := f(pos, out, in/groups)
		for _, kk := range kernel {
			macs *= float64(kk)
		}
		// An implicit GEMM per group: output positions × the group's
		// output channels, reducing over its input channels and the kernel.
		red := in / max(groups, 1)
		for _, kk := range kernel {
			red *= kk
		}
		w.mms = []matmul{{flops: 2 * macs, weights: []string{"weight", "bias"}, readsInput: true, dxFactor: 1,
			gemm: GEMM{pos, out / max(groups, 1), red, groups}}}
		w.inputBytes = z.mul(c.batch, in, b)
		for _, s := range a.ints("input_size") {
			w.inputBytes = z.mul(w.inputBytes, s)
		}
		w.saved, w.savedSelective = w.inputBytes, w.inputBytes
	}
	return w, z.err
}

// expertGEMM is the shape of one projection over every expert under
// balanced routing: experts multiplies of top_k·T/experts tokens each, or
// no shape when the tokens do not divide evenly.
func expertGEMM(topK, tokens, experts, dim, hidden int64, down bool) GEMM {
	routed, ok := checked.Mul(topK, tokens)
	if !ok || experts <= 0 || routed%experts != 0 {
		return GEMM{}
	}
	in, out := dim, hidden
	if down {
		in, out = hidden, dim
	}
	return GEMM{routed / experts, out, in, experts}
}

// mlpSaved: a gated MLP keeps its input, the gate and up outputs and their
// product (the down projection's input); selective checkpointing drops the
// product and recomputes it element-wise. An ungated one keeps the input, the
// pre-activation and the activation.
func mlpSaved(z *sizer, tokens, dim, hidden, b int64, act string) (saved, selective int64) {
	in, h := z.mul(tokens, dim, b), z.mul(tokens, hidden, b)
	if isGated(act) {
		return z.add(in, h, h, h), z.add(in, h, h)
	}
	return z.add(in, h, h), z.add(in, h)
}

// attentionPairs counts the (query, key) pairs causal attention over seq
// tokens computes, which fused kernels (FlashAttention's sliding-window
// and block masks, FlexAttention) restrict to: all earlier tokens; with a
// sliding window of w, the last w (itself included: Mistral's and
// transformers' mask, i − j < w); with chunked attention of c (Llama 4's
// attention_chunk_size), the earlier tokens of its own chunk of c.
func attentionPairs(seq, window, chunk int64) float64 {
	causal := func(n int64) float64 { return float64(n) * float64(n+1) / 2 }
	switch {
	case chunk > 0 && chunk < seq:
		return float64(seq/chunk)*causal(chunk) + causal(seq%chunk)
	case window > 0 && window < seq:
		return causal(window) + float64(seq-window)*float64(window)
	}
	return causal(seq)
}

func attentionWork(a attrValues, c costCtx) (work, error) {
	var z sizer
	var w work
	d, err := attentionDims(a)
	if err != nil {
		return w, err
	}
	T, b := c.tokens, c.act
	kvSeq := a.int("kv_seq_len", c.seq)
	cross := a.has("kv_seq_len") || a.has("kv_dim")
	Tkv := z.mul(c.batch, kvSeq)
	rank := a.int("lora_rank", 0)
	lora := loraTargets(a, []string{"q", "v"})
	r := func(role string) int64 {
		if lora[role] {
			return rank
		}
		return 0
	}
	if d.fused {
		lora = loraTargets(a, []string{"qkv"})
		w.mms = append(w.mms, linearMM(roleName(a, "qkv", "wqkv"), T, d.dim, d.qOut+2*d.kvOut, r("qkv"), true)...)
	} else {
		w.mms = append(w.mms, linearMM(roleName(a, "q", "wq"), T, d.dim, d.qOut, r("q"), true)...)
		w.mms = append(w.mms, linearMM(roleName(a, "k", "wk"), Tkv, d.kvDim, d.kvOut, r("k"), true)...)
		w.mms = append(w.mms, linearMM(roleName(a, "v", "wv"), Tkv, d.kvDim, d.kvOut, r("v"), true)...)
	}
	// The core: scores QKᵀ and the weighted sum PV, 2·head_dim FLOPs each per
	// (query, key) pair and head. A causal mask over one sequence keeps
	// seq·(seq+1)/2 of the seq² pairs, which fused kernels skip; a sliding
	// window or chunked attention keeps fewer (attentionPairs). An unfused
	// core (flash = false: matmul, masked softmax, matmul) multiplies every
	// pair and masks the scores afterwards, so it computes all seq·kv_seq.
	flash := a.bool("flash", true)
	pairs := f(c.seq, kvSeq)
	if a.bool("causal", true) && !cross && flash {
		pairs = attentionPairs(c.seq, a.int("window", 0), a.int("chunk", 0))
	}
	w.attnDense = 4 * float64(c.batch) * f(c.seq, kvSeq) * f(d.heads, d.headDim)
	core := matmul{flops: 4 * float64(c.batch) * pairs * f(d.heads, d.headDim), dxFactor: 2.5, attention: true}
	if !flash {
		core.dxFactor = 2
	}
	w.mms = append(w.mms, core)
	if d.out {
		w.mms = append(w.mms, linearMM(roleName(a, "o", "wo"), T, d.qOut, d.dim, r("o"), false)...)
		w.mms[len(w.mms)-1].output = true
	}

	// Saved: the input (and the key/value source for cross-attention),
	// q, k, v, the core's output and its fp32 log-sum-exp; unfused attention
	// also keeps the probabilities.
	w.inputBytes = z.mul(T, d.dim, b)
	q := z.mul(T, d.qOut, b)
	kv := z.mul(Tkv, d.kvOut, b)
	coreOut := z.mul(T, d.qOut, b)
	lse := z.mul(T, d.heads, 4)
	src := int64(0)
	if cross {
		src = z.mul(Tkv, d.kvDim, b)
	}
	w.saved = z.add(w.inputBytes, src, q, kv, kv, coreOut, lse)
	if d.kvOut < d.qOut {
		// Grouped-query attention (torchtitan's repeat_kv, and Hugging
		// Face's): keys and values are expanded to every query head and
		// copied before SDPA, which saves the expanded ones, not the
		// projections' outputs. Compiled too: Inductor's partitioner
		// saves the expanded copies SDPA's backward reads rather than
		// recomputing them (measured, bench/torchmem/blockmem.py).
		expanded := z.mul(Tkv, d.qOut-d.kvOut, b)
		w.saved = z.add(w.saved, expanded, expanded)
	}
	if !flash {
		w.saved = z.add(w.saved, z.mul(c.batch, d.heads, c.seq, kvSeq, b))
	}
	// Element-wise: RoPE on q and k, and for an unfused core the layout
	// copy of its output back to (tokens, heads·head_dim). A fused core
	// needs none: SDPA's flash, efficient and cuDNN kernels write their
	// output as (batch, seq, heads, head_dim), the layout of the q the
	// projections made, and return it transposed (torch/_meta_registrations.py:
	// flash's output is empty_like(query), query being that transposed
	// view), so the model's transpose(1, 2).contiguous() after the core
	// (torchtitan's, Hugging Face's) returns the tensor as it is, eager and
	// traced. Backward moves twice forward's, but complex, matrix or fused
	// RoPE's backward what its forward does (ropePasses, matrixRoPEPasses).
	form := a.str("rope", "real")
	complexRoPE := form == "complex"
	passes := ropePasses(b, c.compile && !complexRoPE)
	if form == "matrix" {
		passes = matrixRoPEPasses(b, c.compile)
	}
	rope := z.mul(T, d.qOut+d.kvOut, passes)
	w.elemFwd = rope
	if !flash {
		w.elemFwd = z.add(w.elemFwd, z.mul(T, d.qOut, 2*b))
	}
	ropeOnce := complexRoPE || form == "matrix" || c.compile
	// Selective checkpointing recomputes the core from q, k, v.
	w.savedSelective = z.add(w.inputBytes, src, q, kv, kv)
	w.recomputeSelective = core.flops
	w.opPolicy = !cross
	w.coreSaved = z.add(coreOut, lse)
	if a.str("qk_norm", "none") != "none" {
		// RMSNorm on q and k: backward keeps their inputs and an fp32
		// rstd per token and head (per token over the whole projection);
		// each is a norm's passes over q and k, with no residual add.
		stats := z.mul(T, d.heads+d.kvHeads, 4)
		qkIn := z.add(q, kv, stats)
		w.saved = z.add(w.saved, qkIn)
		w.savedSelective = z.add(w.savedSelective, qkIn)
		w.elemFwd = z.add(w.elemFwd, z.mul(T, d.qOut+d.kvOut, plainNormPasses(b, c.compile)))
	}
	if ropeOnce {
		w.elemBwd = z.add(satMul2(w.elemFwd-rope), rope)
	}
	return w, z.err
}

// mlaWork is multi-head latent attention: its projections, and a core
// whose scores use the nope+rope head size and whose weighted sum uses
// v_head_dim.
func mlaWork(a attrValues, c costCtx) (work, error) {
	var z sizer
	var w work
	d, err := mlaSizes(a)
	if err != nil {
		return w, err
	}
	T, b := c.tokens, c.act
	if d.qRank == 0 {
		w.mms = append(w.mms, linearMM(roleName(a, "q", "wq"), T, d.dim, d.heads*d.qk, 0, true)...)
	} else {
		w.mms = append(w.mms, linearMM(roleName(a, "q_a", "wq_a"), T, d.dim, d.qRank, 0, true)...)
		w.mms = append(w.mms, linearMM(roleName(a, "q_b", "wq_b"), T, d.qRank, d.heads*d.qk, 0, true)...)
	}
	w.mms = append(w.mms, linearMM(roleName(a, "kv_a", "wkv_a"), T, d.dim, d.kvRank+d.rope, 0, true)...)
	w.mms = append(w.mms, linearMM(roleName(a, "kv_b", "wkv_b"), T, d.kvRank, d.heads*(d.nope+d.v), 0, true)...)
	// An unfused core computes every pair and masks afterwards (as in
	// attentionWork).
	flash := a.bool("flash", true)
	pairs := f(c.seq, c.seq)
	if a.bool("causal", true) && flash {
		pairs = f(c.seq) * float64(c.seq+1) / 2
	}
	w.attnDense = 2 * float64(c.batch) * f(c.seq, c.seq) * f(d.heads) * float64(d.qk+d.v)
	core := matmul{flops: 2 * float64(c.batch) * pairs * f(d.heads) * float64(d.qk+d.v), dxFactor: 2.5, attention: true}
	if !flash {
		core.dxFactor = 2
	}
	w.mms = append(w.mms, core)
	w.mms = append(w.mms, linearMM(roleName(a, "o", "wo"), T, d.heads*d.v, d.dim, 0, false)...)
	w.mms[len(w.mms)-1].output = true

	// Saved: the input, the latents and their norms' inputs (with fp32
	// rstd), q, k (nope and the shared rope part broadcast to every head),
	// v, the core output and its log-sum-exp.
	w.inputBytes = z.mul(T, d.dim, b)
	latents := z.add(z.mul(T, d.qRank, 2*b), z.mul(T, d.kvRank+d.rope, b), z.mul(T, d.kvRank, b), z.mul(T, 8))
	q := z.mul(T, d.heads, d.qk, b)
	k := z.mul(T, d.heads, d.qk, b)
	v := z.mul(T, d.heads, d.v, b)
	coreOut := z.mul(T, d.heads, d.v, b)
	lse := z.mul(T, d.heads, 4)
	w.saved = z.add(w.inputBytes, latents, q, k, v, coreOut, lse)
	if !flash {
		w.saved = z.add(w.saved, z.mul(c.batch, d.heads, c.seq, c.seq, b))
	}
	w.savedSelective = z.add(w.inputBytes, latents, q, k, v)
	w.recomputeSelective = core.flops
	// Element-wise: the latent norms, RoPE on the rope parts, assembling
	// q and k per head, and the core output's layout copy. Backward moves
	// twice forward's, but fused RoPE's backward what its forward does
	// (ropePasses).
	rope := z.mul(T, d.heads+1, d.rope, ropePasses(b, c.compile))
	w.elemFwd = z.add(z.mul(T, d.qRank+d.kvRank, plainNormPasses(b, c.compile)), rope,
		z.mul(T, d.heads, 2*d.qk, 2*b), z.mul(T, d.heads, d.v, 2*b))
	if c.compile {
		w.elemBwd = z.add(satMul2(w.elemFwd-rope), rope)
	}
	return w, z.err
}

func moeWork(a attrValues, c costCtx) (work, error) {
	var z sizer
	var w work
	dim, hidden, experts, topK := a.int("dim", 0), a.int("hidden", 0), a.int("experts", 0), a.int("top_k", 0)
	act := a.str("activation", "swiglu")
	T, b := c.tokens, c.act
	router := roleName(a, "router", "gate")
	w.mms = linearMM(router, T, dim, experts, 0, true)

	// Each token visits top_k experts; with balanced routing every expert
	// sees top_k·T/experts tokens.
	routed := float64(topK) * float64(T)
	gate, up, down := roleName(a, "gate", "w1"), roleName(a, "up", "w3"), roleName(a, "down", "w2")
	projections := []string{gate, up, down}
	if !isGated(act) {
		projections = []string{up, down}
	}
	exName := roleName(a, "experts", "experts")
	w.experts, w.expertShare = exName, float64(topK)/float64(experts)
	if a.bool("fused_gate_up", false) {
		// Fused experts: the gate and up projections are one matmul of
		// twice the width over every routed token, then down.
		gateUp := exName + "." + roleName(a, "gate_up", "w13")
		dn := exName + "." + down
		w.mms = append(w.mms,
			matmul{flops: 4 * routed * f(dim, hidden), weights: []string{gateUp, gateUp + "_bias"}, readsInput: true, dxFactor: 1,
				gemm: expertGEMM(topK, T, experts, dim, 2*hidden, false)},
			matmul{flops: 2 * routed * f(dim, hidden), weights: []string{dn, dn + "_bias"}, dxFactor: 1,
				gemm: expertGEMM(topK, T, experts, dim, hidden, true)})
	} else if a.bool("grouped", false) {
		// One tensor per projection holds every expert: one matmul each
		// over all the routed tokens, not one per expert (65536 experts
		// repeated over many layers would take minutes to list).
		for _, p := range projections {
			w.mms = append(w.mms, matmul{flops: 2 * routed * f(dim, hidden), weights: []string{exName + "." + p}, readsInput: p != down, dxFactor: 1,
				gemm: expertGEMM(topK, T, experts, dim, hidden, p == down)})
		}
	} else {
		for e := int64(0); e < experts; e++ {
			for _, p := range projections {
				ref := exName + "." + strconv.FormatInt(e, 10) + "." + p + ".weight"
				g := expertGEMM(topK, T, experts, dim, hidden, p == down)
				g.Count = 1
				if !g.known() {
					g = GEMM{}
				}
				w.mms = append(w.mms, matmul{flops: 2 * routed / float64(experts) * f(dim, hidden), weights: []string{ref}, readsInput: p != down, dxFactor: 1,
					gemm: g})
			}
		}
	}
	w.inputBytes = z.mul(T, dim, b)
	w.elemFwd = z.mul(topK, T, hidden, activationPasses(act, b, c.compile))
	logits := z.mul(T, experts, 4)
	dispatched, dispatchedSel := mlpSaved(&z, z.mul(topK, T), dim, hidden, b, act)
	w.saved = z.add(w.inputBytes, logits, dispatched)
	w.savedSelective = z.add(w.inputBytes, logits, dispatchedSel)
	if n := a.int("shared_experts", 0); n > 0 {
		sh := roleName(a, "shared", "shared_experts")
		h := z.mul(n, hidden)
		for _, p := range projections {
			in, out := dim, h
			if p == down {
				in, out = h, dim
			}
			w.mms = append(w.mms, linearMM(sh+"."+p, T, in, out, 0, p != down)...)
		}
		s, sel := mlpSaved(&z, T, dim, h, b, act)
		w.saved = z.add(w.saved, s)
		w.savedSelective = z.add(w.savedSelective, sel)
	}
	return w, z.err
}
