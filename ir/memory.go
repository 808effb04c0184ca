package ir

import "github.com/fsdpc/fsdpc/hardware"

// memoryProfile adds elementwise_efficiency for [cluster.gpu] memory, the
// share of bandwidth element-wise kernels reach on that memory
// (hardware/elementwise.go), unless the profile file sets it.
func memoryProfile(prof []ProfileValue, memory string) []ProfileValue {
	share, ok := hardware.ElementwiseShare(memory)
	if !ok {
		return prof
	}
	return withDefaults(prof, ProfileValue{hardware.KeyElementwise, share})
}
