package ir

import "github.com/fsdpc/fsdpc/hardware"

// The attention kernels and their measured efficiencies are package
// hardware's (hardware/attention.go).

// attentionKernelProfile adds the attention kernel's efficiencies to a
// cluster's profile for its GPU preset, unless the profile file set them
// (a fitted value is the target system's own).
func (d *decoder) attentionKernelProfile(prof []ProfileValue, kernel, preset string) []ProfileValue {
	if !hardware.AttentionKernelMeasured(kernel) {
		return prof
	}
	fwd, bwd, ok := hardware.AttentionKernelEfficiency(kernel, preset)
	if !ok {
		d.warnf("train.attention_kernel", "fsdpc has no measured efficiency of attention_kernel %q on %s; the GPU's FlashAttention-2 figures are used", kernel, presetLabel(preset))
		return prof
	}
	return withDefaults(prof, ProfileValue{hardware.KeyAttentionBackward, bwd}, ProfileValue{hardware.KeyAttentionForward, fwd})
}

func presetLabel(preset string) string {
	if preset == "" {
		return "a GPU given as figures"
	}
	return preset
}
