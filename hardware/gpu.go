package hardware

import "sort"

// GPU is a GPU preset: dense (no sparsity) datasheet figures and what
// fsdpc's cost model knows of the chip. Sources are listed in
// docs/model-format.md; bandwidths are per GPU and per direction.
type GPU struct {
	// Device is the device name, as plans store it.
	Device string
	// HBMBytes is what the device reports as its total (nvidia-smi,
	// rocm-smi), not the marketing figure: an "80GB" H100 shows 81,559 MiB.
	HBMBytes     int64
	HBMBandwidth float64 // bytes/s
	Peak         TFLOPS
	// SMs is the count of streaming multiprocessors (compute units on
	// AMD), what a GEMM's output tiles are spread over in waves
	// (docs/cost-model.md).
	SMs int
	// RefClockMHz is the SM clock the dense peak assumes; 0 where fsdpc
	// does not know it ([cluster] sm_clock_mhz needs it).
	RefClockMHz int64
	// TDPWatts is the power limit the figures assume, IdleWatts the draw
	// of the idle GPU in its highest performance state; 0 where fsdpc does
	// not know them ([cluster] power_limit_w needs both).
	TDPWatts, IdleWatts float64
	// HostLink, IntraNode and InterNode name the link presets of the
	// preset's reference system: its PCIe generation to the host, the
	// link between GPUs of a node, and one NIC per GPU ("" where the
	// reference system has none).
	HostLink, IntraNode, InterNode string
	// Profile names the cost-model profile (profiles.go) the preset's
	// chip has: one die has one set of physical constants, so H100 SXM
	// and H200 share GH100's, the two A100s GA100's.
	Profile string
}

// TFLOPS are dense peaks in TFLOP/s by element type; 0 where the chip
// has no such unit. FP8 is both fp8 formats (e4m3 and e5m2).
type TFLOPS struct {
	FP64, FP32, BF16, FP16, FP8, INT8 float64
}

const (
	mib = 1 << 20
	gib = 1 << 30
)

// gpus are the presets.
//
// SMs: H100 SXM5 132 and H100 PCIe 114 ("NVIDIA H100 Tensor Core GPU
// Architecture" whitepaper, table 3), H200 the same GH100 configuration as
// H100 SXM5, A100 108 ("NVIDIA A100 Tensor Core GPU Architecture"
// whitepaper, table 1), L40S 142 (L40S datasheet), B200 148 (the CUDA
// runtime's multiProcessorCount on B200), MI300X 304 compute units (AMD
// CDNA 3 architecture whitepaper).
//
// RefClockMHz is the datasheet peak over SMs × dense bf16 FLOP per SM per
// clock. H100 SXM5 and H200: 989.4 TFLOP/s = 132 SMs × 4,096 × 1,830 MHz;
// H100 PCIe: 756 TFLOP/s = 114 × 4,096 × 1,620 MHz; A100: 312 TFLOP/s =
// 108 × 2,048 × 1,410 MHz, the A100's boost clock ("NVIDIA A100 Tensor
// Core GPU Architecture", table 1; Hopper's 4,096 FLOP per SM per clock is
// twice Ampere's, H100 whitepaper).
//
// TDPWatts: the datasheets' maximum TDP of the SXM modules (NVIDIA H100
// and H200 datasheets: up to 700 W). IdleWatts: 80 W on an H200
// (nvidia-smi at P0, 345 MHz, .ci/gpu-acceptance's gpu.txt of
// 2026-11-27); the H100 SXM is the same GH100 die and board power class.
//
// InterNode: DGX/HGX H100 and H200 carry eight ConnectX-7 at 400 Gb/s,
// DGX A100 eight ConnectX-6 at 200 Gb/s (docs/cost-model.md cites the
// datasheets).
var gpus = map[string]GPU{
	"h100-sxm": {Device: "NVIDIA H100 SXM5 80GB", HBMBytes: 81559 * mib, HBMBandwidth: 3.35e12,
		Peak: TFLOPS{FP64: 67, FP32: 67, BF16: 989.4, FP16: 989.4, FP8: 1978.9, INT8: 1978.9},
		SMs:  132, RefClockMHz: 1830, TDPWatts: 700, IdleWatts: 80,
		HostLink: "pcie5", IntraNode: "nvlink4", InterNode: "ndr400", Profile: "GH100"},
	"h100-pcie": {Device: "NVIDIA H100 PCIe 80GB", HBMBytes: 81559 * mib, HBMBandwidth: 2.0e12,
		Peak: TFLOPS{FP64: 51, FP32: 51, BF16: 756, FP16: 756, FP8: 1513, INT8: 1513},
		SMs:  114, RefClockMHz: 1620,
		HostLink: "pcie5", IntraNode: "pcie5", Profile: "H100 PCIe"},
	"h200": {Device: "NVIDIA H200 SXM 141GB", HBMBytes: 143771 * mib, HBMBandwidth: 4.8e12,
		Peak: TFLOPS{FP64: 67, FP32: 67, BF16: 989.4, FP16: 989.4, FP8: 1978.9, INT8: 1978.9},
		SMs:  132, RefClockMHz: 1830, TDPWatts: 700, IdleWatts: 80,
		HostLink: "pcie5", IntraNode: "nvlink4", InterNode: "ndr400", Profile: "GH100"},
	"b200": {Device: "NVIDIA B200 180GB", HBMBytes: 183359 * mib, HBMBandwidth: 8.0e12,
		Peak:     TFLOPS{FP64: 40, FP32: 80, BF16: 2250, FP16: 2250, FP8: 4500, INT8: 4500},
		SMs:      148,
		HostLink: "pcie5", IntraNode: "nvlink5", InterNode: "ndr400", Profile: "B200"},
	"a100-40gb": {Device: "NVIDIA A100 SXM4 40GB", HBMBytes: 40960 * mib, HBMBandwidth: 1.555e12,
		Peak: TFLOPS{FP64: 19.5, FP32: 19.5, BF16: 312, FP16: 312, INT8: 624},
		SMs:  108, RefClockMHz: 1410,
		HostLink: "pcie4", IntraNode: "nvlink3", InterNode: "hdr200", Profile: "GA100"},
	"a100-80gb": {Device: "NVIDIA A100 SXM4 80GB", HBMBytes: 81920 * mib, HBMBandwidth: 2.039e12,
		Peak: TFLOPS{FP64: 19.5, FP32: 19.5, BF16: 312, FP16: 312, INT8: 624},
		SMs:  108, RefClockMHz: 1410,
		HostLink: "pcie4", IntraNode: "nvlink3", InterNode: "hdr200", Profile: "GA100"},
	"l40s": {Device: "NVIDIA L40S 48GB", HBMBytes: 46068 * mib, HBMBandwidth: 864e9,
		Peak:     TFLOPS{FP32: 91.6, BF16: 362.05, FP16: 362.05, FP8: 733, INT8: 733},
		SMs:      142,
		HostLink: "pcie4", IntraNode: "pcie4", Profile: "L40S"},
	"mi300x": {Device: "AMD Instinct MI300X 192GB", HBMBytes: 192 * gib, HBMBandwidth: 5.3e12,
		Peak:     TFLOPS{FP64: 81.7, FP32: 163.4, BF16: 1307.4, FP16: 1307.4, FP8: 2614.9, INT8: 2614.9},
		SMs:      304,
		HostLink: "pcie5", IntraNode: "xgmi", Profile: "MI300X"},
}

// Preset returns the GPU preset named name ("h100-sxm") and whether it
// exists.
func Preset(name string) (GPU, bool) {
	g, ok := gpus[name]
	return g, ok
}

// PresetNames lists the GPU presets in name order.
func PresetNames() []string { return sortedKeys(gpus) }

// PresetByDevice returns the preset whose device name is device ("NVIDIA
// H100 SXM5 80GB" gives "h100-sxm"), or "" for a GPU given as figures.
// The match is exact: a GPU named otherwise is not taken for a preset.
func PresetByDevice(device string) string { return byDevice[device] }

var byDevice = func() map[string]string {
	m := make(map[string]string, len(gpus))
	for k, g := range gpus {
		m[g.Device] = k
	}
	return m
}()

// PresetsWith lists, in name order, the presets for which has is true
// (what an error names as the presets a setting needs).
func PresetsWith(has func(GPU) bool) []string {
	var out []string
	for _, k := range PresetNames() {
		if has(gpus[k]) {
			out = append(out, k)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
