package ir

import (
	"sort"

	"github.com/fsdpc/fsdpc/hardware"
)

// The GPU and link presets, the cost model's constants and their sources
// are package hardware's; this file turns a preset into the IR's GPU.

// presetGPU returns the GPU preset named name as the IR's GPU, and
// whether it exists.
func presetGPU(name string) (GPU, bool) {
	p, ok := hardware.Preset(name)
	if !ok {
		return GPU{}, false
	}
	g := GPU{Name: p.Device, HBMBytes: p.HBMBytes, HBMBandwidth: p.HBMBandwidth}
	for _, f := range []struct {
		t      DType
		tflops float64
	}{
		{FP64, p.Peak.FP64}, {FP32, p.Peak.FP32}, {BF16, p.Peak.BF16}, {FP16, p.Peak.FP16},
		{FP8E4M3, p.Peak.FP8}, {FP8E5M2, p.Peak.FP8}, {INT8, p.Peak.INT8},
	} {
		if f.tflops != 0 {
			g.PeakFLOPS[f.t] = f.tflops * 1e12
		}
	}
	return g, true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
