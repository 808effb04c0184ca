package hardware

import "sort"

// The share of HBM bandwidth element-wise kernels reach belongs to the
// memory they stream from (profiles.go gives the measurements: Liger-
// Kernel's timings of an eager Llama RMSNorm on A100s, HBM2e, and on an
// H100 NVL carried to the H100 SXM's HBM3 by the two cards' timings of one
// module). A GPU of one chip can come with another
// memory: Meta's Grand Teton H100s are GH100s with 96 GB of HBM2e at
// 2.4 TB/s, not the H100 SXM's 80 GB of HBM3 at 3.35 TB/s, and [cluster.gpu]
// memory says so. A kernel holds a fixed number of bytes in flight per
// SM, so a slower memory is no harder to keep busy than A100's: the
// HBM2e share is what such a card's kernels reach at the least.
const (
	elementwiseHBM2e = 0.519
	elementwiseHBM3  = 0.539
)

var elementwiseByMemory = map[string]float64{
	"HBM2e": elementwiseHBM2e,
	"HBM3":  elementwiseHBM3,
}

// ElementwiseShare is the share of HBM bandwidth element-wise kernels
// reach on memory of the named generation, and whether fsdpc has a
// measurement of it.
func ElementwiseShare(memory string) (float64, bool) {
	s, ok := elementwiseByMemory[memory]
	return s, ok
}

// MemoryNames lists the memory generations ElementwiseShare knows.
func MemoryNames() []string {
	names := make([]string, 0, len(elementwiseByMemory))
	for k := range elementwiseByMemory {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
