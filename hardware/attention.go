package hardware

// attentionKernels are the fused attention kernels [train]
// attention_kernel names, with the fractions of dense bf16 peak their
// forward and backward reach on the GPU presets fsdpc has a measurement
// for. "flash2" has none here: it is what the cost model's built-in
// profiles describe (docs/cost-model.md).
//
// cuDNN on H100: PyTorch's SDPA runs cuDNN's kernel when asked to
// (SDPBackend.CUDNN_ATTENTION), or by default where the trainer or
// PyTorch version prefers it. Forward: 631.3 TFLOP/s at batch 1, 24
// heads, 4,608 tokens, head dim 128 on H100, against 329.5 for SDPA's
// FlashAttention-2 (tritonbench, pytorch/pytorch#142132): 631.3 / 989.4 =
// 0.638. Training (forward and backward): cuDNN is "consistently 1.7–2.3×
// faster for training shapes" on Hopper (huggingface/transformers#48163);
// at the low end, 1.7×, against FlashAttention-2's 0.35 forward and 0.30
// backward with backward 2.5× the forward's FLOPs, the backward reaches
// 2.5 / (1/1.7 · (1/0.35 + 2.5/0.30) − 1/0.638) = 0.50. On Ampere cuDNN
// is slower than FlashAttention-2 (0.82× on A100, the same thread): no
// figure, so the GPU's FlashAttention-2 figures stay.
//
// cuDNN on H200, timed on an H200: NVIDIA's SDPA training benchmark with
// cuDNN 9.19.1, Llama 3.1's heads (64 query, 8 key-value, head dim 128),
// causal, batch 1 at 4,096 tokens, 591 TFLOP/s forward and 474 backward
// (NVIDIA/cudnn-frontend, benchmark/sdpa_benchmark_training/results/
// h200_919_only_cudnn/llama3.1_20260227_034703.csv at df73764,
// 2026-03-09): 0.597 and 0.479 of 989.4. It counts the causal half and a
// backward of 2.5 forwards, as fsdpc does. The figure is the one at 4,096
// tokens, the sequence of the H200 runs that use it (KempnerForge's,
// whose uv.lock pins cuDNN 9.19.0); efficiency rises with the sequence
// (644 and 541 at 8,192 tokens, 688 and 581 at 32,768), which one
// constant per GPU does not follow. The benchmark builds cudnn-frontend's
// sdpa graph itself; PyTorch's cuDNN SDPA builds the same graph, one sdpa
// node with a causal mask (aten/src/ATen/native/cudnn/MHA.cpp).
//
// cuDNN on B200: PyTorch's SDPA with SDPBackend.CUDNN_ATTENTION, causal,
// head dim 128, 8,192 tokens (batch 1, 128 query and 8 key-value heads),
// 1,197.4 TFLOP/s forward and 940.0 backward (NVIDIA/cudnn-frontend,
// benchmark/sdpa_benchmark_training/artifacts/
// sdpa_bf16_benchmark_results_NVIDIA_B200.csv at 9793df5, 2025-07-16,
// row pyt_cudnn; cuDNN 9.10.2, PyTorch 2.8.0): 0.532 and 0.418 of the
// B200's 2,250. The benchmark counts the causal half and the backward as
// 2.5 forwards, as fsdpc does. torchtitan puts cuDNN first on compute
// capability 10.0 and above since pytorch/torchtitan#1196 (3b85aa31f,
// 2025-05-14).
var attentionKernels = map[string]map[string][2]float64{
	"flash2": nil,
	"cudnn": {
		"h100-sxm": {0.638, 0.50},
		"h200":     {0.597, 0.479},
		"b200":     {0.532, 0.418},
	},
}

// AttentionKernelNames lists the attention kernels in name order.
func AttentionKernelNames() []string { return sortedKeys(attentionKernels) }

// AttentionKernelEfficiency is the forward and backward fraction of dense
// bf16 peak that attention_kernel kernel reaches on GPU preset preset, and
// whether fsdpc has a measurement of it.
func AttentionKernelEfficiency(kernel, preset string) (forward, backward float64, ok bool) {
	eff, ok := attentionKernels[kernel][preset]
	return eff[0], eff[1], ok
}

// AttentionKernelMeasured reports whether fsdpc keeps its own figures
// for kernel, by GPU preset; false for the kernel the chips' built-in
// profiles already describe ("flash2").
func AttentionKernelMeasured(kernel string) bool { return attentionKernels[kernel] != nil }
