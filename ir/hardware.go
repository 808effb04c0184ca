package ir

import "sort"

// GPU and link presets, dense (no sparsity) datasheet figures. Sources are
// listed in docs/model-format.md; bandwidths are per GPU and per direction.

type gpuPreset struct {
	name   string
	hbm    int64
	hbmBW  float64
	tflops map[DType]float64
}

// gpuSMs is each preset's count of streaming multiprocessors (compute
// units on AMD), what a GEMM's output tiles are spread over in waves
// (docs/cost-model.md): H100 SXM5 132 and H100 PCIe 114 ("NVIDIA H100
// Tensor Core GPU Architecture" whitepaper, table 3), H200 the same GH100
// configuration as H100 SXM5, A100 108 ("NVIDIA A100 Tensor Core GPU
// Architecture" whitepaper, table 1), L40S 142 (L40S datasheet), B200 148
// (the CUDA runtime's multiProcessorCount on B200), MI300X 304 compute
// units (AMD CDNA 3 architecture whitepaper).
var gpuSMs = map[string]int{
	"h100-sxm": 132, "h100-pcie": 114, "h200": 132, "b200": 148,
	"a100-40gb": 108, "a100-80gb": 108, "l40s": 142, "mi300x": 304,
}

// gpuRefClockMHz is the SM clock each preset's dense peak assumes: the
// datasheet peak over SMs × dense bf16 FLOP per SM per clock. H100 SXM5
// and H200: 989.4 TFLOP/s = 132 SMs × 4,096 × 1,830 MHz; H100 PCIe:
// 756 TFLOP/s = 114 × 4,096 × 1,620 MHz; A100: 312 TFLOP/s = 108 × 2,048 ×
// 1,410 MHz, the A100's boost clock ("NVIDIA A100 Tensor Core GPU
// Architecture", table 1; Hopper's 4,096 FLOP per SM per clock is twice
// Ampere's, H100 whitepaper). [cluster] sm_clock_mhz scales the peaks by
// the clock a power limit sustains against this one.
var gpuRefClockMHz = map[string]int64{
	"h100-sxm": 1830, "h200": 1830, "h100-pcie": 1620, "a100-40gb": 1410, "a100-80gb": 1410,
}

// SMCount returns the streaming multiprocessors of the GPU preset whose
// device name is name, 0 for a GPU given as figures (its GEMMs are then
// charged without wave quantisation).
func SMCount(name string) int { return gpuSMs[GPUPresetOf(name)] }

// Memory is what the device reports as its total (nvidia-smi, rocm-smi),
// not the marketing figure: an "80GB" H100 shows 81,559 MiB.
const (
	mib = 1 << 20
	gib = 1 << 30
)

var gpuPresets = map[string]gpuPreset{
	"h100-sxm":  {"NVIDIA H100 SXM5 80GB", 81559 * mib, 3.35e12, map[DType]float64{FP64: 67, FP32: 67, BF16: 989.4, FP16: 989.4, FP8E4M3: 1978.9, FP8E5M2: 1978.9, INT8: 1978.9}},
	"h100-pcie": {"NVIDIA H100 PCIe 80GB", 81559 * mib, 2.0e12, map[DType]float64{FP64: 51, FP32: 51, BF16: 756, FP16: 756, FP8E4M3: 1513, FP8E5M2: 1513, INT8: 1513}},
	"h200":      {"NVIDIA H200 SXM 141GB", 143771 * mib, 4.8e12, map[DType]float64{FP64: 67, FP32: 67, BF16: 989.4, FP16: 989.4, FP8E4M3: 1978.9, FP8E5M2: 1978.9, INT8: 1978.9}},
	"b200":      {"NVIDIA B200 180GB", 183359 * mib, 8.0e12, map[DType]float64{FP64: 40, FP32: 80, BF16: 2250, FP16: 2250, FP8E4M3: 4500, FP8E5M2: 4500, INT8: 4500}},
	"a100-40gb": {"NVIDIA A100 SXM4 40GB", 40960 * mib, 1.555e12, map[DType]float64{FP64: 19.5, FP32: 19.5, BF16: 312, FP16: 312, INT8: 624}},
	"a100-80gb": {"NVIDIA A100 SXM4 80GB", 81920 * mib, 2.039e12, map[DType]float64{FP64: 19.5, FP32: 19.5, BF16: 312, FP16: 312, INT8: 624}},
	"l40s":      {"NVIDIA L40S 48GB", 46068 * mib, 864e9, map[DType]float64{FP32: 91.6, BF16: 362.05, FP16: 362.05, FP8E4M3: 733, FP8E5M2: 733, INT8: 733}},
	"mi300x":    {"AMD Instinct MI300X 192GB", 192 * gib, 5.3e12, map[DType]float64{FP64: 81.7, FP32: 163.4, BF16: 1307.4, FP16: 1307.4, FP8E4M3: 2614.9, FP8E5M2: 2614.9, INT8: 2614.9}},
}

// linkPresets are per-GPU, per-direction bandwidths in bytes per second.
var linkPresets = map[string]float64{
	"nvlink3":     300e9, // A100: 600 GB/s bidirectional
	"nvlink4":     450e9, // H100/H200: 900 GB/s bidirectional
	"nvlink5":     900e9, // B200: 1.8 TB/s bidirectional
	"xgmi":        448e9, // MI300X: 7 Infinity Fabric links × 64 GB/s
	"pcie4":       32e9,  // x16
	"pcie5":       64e9,  // x16
	"ndr400":      50e9,  // InfiniBand NDR, 400 Gb/s per GPU
	"hdr200":      25e9,  // InfiniBand HDR, 200 Gb/s per GPU
	"roce400":     50e9,  // 400 GbE RoCE v2 per GPU
	"roce200":     25e9,  // 200 GbE RoCE v2 per GPU
	"ethernet100": 12.5e9,
}

// defaultHostLink is each GPU preset's PCIe generation, its link to the host.
var defaultHostLink = map[string]string{
	"h100-sxm": "pcie5", "h100-pcie": "pcie5", "h200": "pcie5", "b200": "pcie5",
	"a100-40gb": "pcie4", "a100-80gb": "pcie4", "l40s": "pcie4", "mi300x": "pcie5",
}

// defaultInterNode is the NIC each GPU preset's reference system has, one
// per GPU: DGX/HGX H100 and H200 carry eight ConnectX-7 at 400 Gb/s, DGX
// A100 eight ConnectX-6 at 200 Gb/s (docs/cost-model.md cites the
// datasheets).
var defaultInterNode = map[string]string{
	"h100-sxm": "ndr400", "h200": "ndr400", "b200": "ndr400", "a100-40gb": "hdr200", "a100-80gb": "hdr200",
}

// defaultIntraNode is the intra-node link each GPU preset ships with.
var defaultIntraNode = map[string]string{
	"h100-sxm": "nvlink4", "h100-pcie": "pcie5", "h200": "nvlink4", "b200": "nvlink5",
	"a100-40gb": "nvlink3", "a100-80gb": "nvlink3", "l40s": "pcie4", "mi300x": "xgmi",
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// GPUPresetHBM is a GPU preset's device memory in bytes, as PyTorch
// reports the card's total, and whether the preset exists.
func GPUPresetHBM(preset string) (int64, bool) {
	p, ok := gpuPresets[preset]
	return p.hbm, ok
}

// GPUPresetNames lists the GPU presets.
func GPUPresetNames() []string { return sortedKeys(gpuPresets) }

// LinkPresetNames lists the link presets.
func LinkPresetNames() []string { return sortedKeys(linkPresets) }

func (p gpuPreset) gpu() GPU {
	g := GPU{Name: p.name, HBMBytes: p.hbm, HBMBandwidth: p.hbmBW}
	for t, v := range p.tflops {
		g.PeakFLOPS[t] = v * 1e12
	}
	return g
}

// Device memory a training process holds outside PyTorch's caching
// allocator, so outside what the plan's reserved peak counts. The CUDA
// context is about 300 MB with lazy module loading (CUDA 11.7 and later;
// pytorch/pytorch#107667), rounded up here for the kernels a training
// step loads (cuBLAS, NCCL, attention). NCCL allocates its own buffers
// per communicator: NCCL_BUFFSIZE, 4 MiB by default, for each channel and
// direction of a ring connection, and LL/LL128 buffers beside it; 256 MiB
// stands for 16 channels × 2 directions × 8 MiB.
const (
	CUDAContextBytes         = 512 * mib
	NCCLBytesPerCommunicator = 256 * mib
)

// GPUPresetDevice is a GPU preset's device name ("h100-sxm" gives
// "NVIDIA H100 SXM5 80GB"), "" for an unknown preset.
func GPUPresetDevice(preset string) string { return gpuPresets[preset].name }

// GPUPresetOf returns the preset whose device name is name ("NVIDIA H100
// SXM5 80GB" gives "h100-sxm"), or "" for a GPU given as figures.
func GPUPresetOf(name string) string {
	for _, k := range GPUPresetNames() {
		if gpuPresets[k].name == name {
			return k
		}
	}
	return ""
}
