package hardware

// Hardware profiles: the calibration constants that differ by chip.
// Sourced figures are cited where they are set; fitted ones come from
// `fsdpc calibrate -fit max_efficiency calibrate/published-runs.csv`
// (docs/cost-model.md, "Fidelity"), one value per chip, fitted over every
// measured run on that chip, nothing per run. Keys are the names GPU
// presets give as their Profile; a GPU given as a table of figures gets
// DefaultCalibration.
var profiles = map[string]func(*Calibration){
	"GA100":     ga100Profile,
	"GH100":     gh100Profile,
	"B200":      b200Profile,
	"MI300X":    mi300xProfile,
	"L40S":      l40sProfile,
	"H100 PCIe": h100PCIeProfile,
}

// Element-wise kernels: eager PyTorch runs a Llama RMSNorm as seven
// kernels (the fp32 upcast, pow, mean, rsqrt, multiply, the bf16 cast,
// the weight), 36 bytes of HBM traffic per element in forward by fsdpc's
// count (ir/elementwise.go) and twice that in backward. Liger-Kernel
// times exactly that module (Hugging Face's LlamaRMSNorm, provider
// "huggingface") forward and backward together ("full") in bf16 at
// 2,048 rows × 16,384, 33.6 M elements, the size of a 7–13B block's
// activations at 8,192 tokens (linkedin/Liger-Kernel,
// benchmark/data/{a100,h100}_all_benchmark_data.csv, liger 0.5.2,
// 2025-01-25): 3.609 ms on an A100 80GB PCIe and 2.214 ms on an H100
// NVL, for 3.62 GB by that count: 1.00 TB/s, 0.519 of the A100 PCIe's
// 1,935 GB/s, and 1.64 TB/s, 0.420 of the H100 NVL's 3.9 TB/s. Forward
// alone reaches 0.629 and 0.508, backward 0.476 and 0.392; at 8,192
// columns 0.597 and 0.475 forward. On the SXM parts: the same module in
// the same benchmark on an A100-SXM4-80GB (liger 0.2.1, 2024-09-03)
// takes 3.544 ms, 0.501 of its 2,039 GB/s, as the PCIe card's 0.519. The
// H100 NVL is a 350–400 W PCIe card, and the SXM H100 runs the same eager
// kernels faster than its bandwidth says: Liger-Kernel's Hugging Face
// add-and-RMSNorm (fused_add_rms_norm, provider "huggingface", fp32,
// 2,048 × 16,384, forward and backward) takes 2.070 ms on an H100 NVL
// (liger 0.6.0, 2025-07-16) and 1.874 ms on an H100 80GB HBM3 (liger
// 0.7.0, 2026-04-07), 1.104× faster on a datasheet bandwidth 0.86× the
// NVL's (ratios 1.04–1.22 over the sizes from 4,096 columns). The NVL's
// RMSNorm at the SXM's speed, 2.214 / 1.104 = 2.005 ms, is 1.81 TB/s:
// 0.539 of the H100 SXM's 3.35 TB/s, what elementwiseHBM3 holds. Hopper's
// element-wise kernels gain 1.8× over A100 where the datasheets'
// bandwidths give 1.6× and the tensor cores 3.2×: what made eager Hopper
// runs lean fast at one copy efficiency for both.

// ga100Profile: FlashAttention-2 reaches 50–73% of the A100's peak in
// forward and about two thirds of that in backward (Dao 2023, arXiv
// 2307.08691, figures 4–7). Element-wise kernels at 0.519 of HBM
// (above). GEMMs at 0.869 of peak, the best shape measured on an A100
// SXM (stas00/ml-engineering, "Maximum Achievable Matmul FLOPS"): the
// fit over the 16 measured A100 runs (torchtitan, fms-fsdp; `fsdpc
// calibrate -fit max_efficiency`) puts it at 0.874, just above what any
// A100 GEMM was measured to reach, so the profile holds the measurement.
func ga100Profile(c *Calibration) {
	c.AttentionForward, c.AttentionBackward = 0.6, 0.45
	c.ElementwiseEfficiency = elementwiseHBM2e
	c.MaxEfficiency = 0.869
}

// gh100Profile: H100 and H200 SXM share the GH100 die and its 700 W
// limit. Element-wise kernels at 0.539 of HBM (above: the H100 NVL's
// timing at the SXM's measured speed). GEMMs at 0.690 of peak, what the Llama 3 8B and 70B
// layer shapes timed on an H200 at 700 W give
// (calibrate/testdata/kernels-h200.csv: the model's median error over its
// 34 GEMMs is -0.7%, MAPE 5.8% over the 31 of at least 1e11 FLOPs;
// TestKernelShapesH200); the fit over the 12 measured H100 and H200 runs
// would put it at 0.775, pulled up by KempnerForge's H200 runs, which
// report more FLOP/s than those kernels reach (docs/cost-model.md).
// Attention keeps the default, FlashAttention-2's 35% of peak on H100.
func gh100Profile(c *Calibration) {
	c.ElementwiseEfficiency = elementwiseHBM3
	c.MaxEfficiency = 0.690
}

// b200Profile: B200, from published kernel measurements, nothing fitted
// (no measured B200 training run is in the calibration set).
//
// GEMM: 1,745.0 of 2,250 TFLOP/s dense bf16 for the best shape found
// (1792×16128×3072, torch 2.7.1+cu128; stas00/ml-engineering,
// compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS
// comparison table", added 2025-07-07 in 176443c): 0.776. It is a best
// shape at the benchmark's clocks, so it is an upper bound for real
// shapes, as the same table's H100 SXM figure (0.803) is above the GH100
// profile's fitted 0.690.
//
// Attention: what PyTorch's SDPA FlashAttention-2 kernel (its default
// flash backend, the "flash2" attention_kernel) reaches on B200 for a
// causal, head-dim-128 layer at 8,192 tokens: 375.1 TFLOP/s forward and
// 308.8 backward, 0.167 and 0.137 of 2,250 (NVIDIA/cudnn-frontend,
// benchmark/sdpa_benchmark_training/artifacts/
// sdpa_bf16_benchmark_results_NVIDIA_B200.csv at 9793df5, 2025-07-16,
// row pyt_flash_attention; PyTorch 2.8.0, NGC 25.06). Its FLOPs count
// the causal half and the backward as 2.5 forwards, as fsdpc's do
// (ir/kindcost.go). FlashAttention-2 is an Ampere kernel and does not
// use Blackwell's tensor-core instructions; cuDNN's kernel is
// attention_kernel = "cudnn" (attention.go).
func b200Profile(c *Calibration) {
	c.MaxEfficiency = 0.776
	c.AttentionForward, c.AttentionBackward = 0.167, 0.137
}

// mi300xProfile: MI300X, from a published kernel measurement, nothing
// fitted. GEMM: 668.4 TFLOP/s dense bf16 for the best shape found
// (10240×15360×8192, torch 2.5.1 with ROCm 6.3, PYTORCH_TUNABLEOP_ENABLED=1;
// stas00/ml-engineering, compute/accelerator/README.md, "Maximum Achievable
// Matmul FLOPS comparison table", the v2 table that flushes the cache
// between iterations, e695968 2025-09-02): 0.511 of the preset's 1,307.4.
// The same table's earlier v1 figure, 781.9 with ROCm 6.2 (60.1%), did
// not flush the cache. Attention keeps the default: no published
// measurement of PyTorch's ROCm SDPA kernel (AOTriton) at a training
// shape was found (docs/cost-model.md).
func mi300xProfile(c *Calibration) {
	c.MaxEfficiency = 0.511
}

// The MAMF table has no L40S or H100 PCIe row. zzc0721/
// torch-performance-test-data (database.md) publishes contributed
// torch.mm measurements: square bf16 matrices of 1,024 to 10,240, 10
// warm-up and 30 timed iterations on CUDA events, the best size kept
// (test.py). On the chips both tables hold it reads 0–3% below MAMF (H100
// SXM 797.5 against 794.5, A100 SXM4 80GB 264.5 against 271.2, B200
// 1,696.0 against 1,745.0), close enough to stand in for it. Attention
// keeps the default: no measurement at a training shape was found.

// l40sProfile: 269.15 TFLOP/s bf16 on an L40S (database.md, added in
// 0785868, 2025-10-05, "docker"), 0.743 of the preset's 362.05.
func l40sProfile(c *Calibration) {
	c.MaxEfficiency = 0.743
}

// h100PCIeProfile: 495.93 TFLOP/s bf16 on an H100 PCIe (database.md,
// added in 85af2af, 2025-12-14, bare metal, PyTorch 2.7.0), 0.656 of the
// preset's 756: the 350 W card holds a lower clock under dense work than
// its datasheet peak assumes.
func h100PCIeProfile(c *Calibration) {
	c.MaxEfficiency = 0.656
}

// CalibrationFor returns the calibration for a GPU by its device name, as
// plans store it: its preset's chip profile over DefaultCalibration, or
// DefaultCalibration for a GPU given as figures.
func CalibrationFor(device string) Calibration {
	c := DefaultCalibration
	if f, ok := profiles[gpus[PresetByDevice(device)].Profile]; ok {
		f(&c)
	}
	return c
}
