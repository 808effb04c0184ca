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

// Those shares are of a forward and a backward pass together, and a
// forward kernel reaches more of the bandwidth than a gradient kernel:
// Liger-Kernel's RMSNorm (profiles.go) reaches 0.629 of the A100 PCIe's
// HBM forward alone and 0.476 backward alone, where both together reach
// 0.519 (the bytes-weighted mean: 36 bytes an element forward, 72
// backward); on the H100 NVL 0.508 and 0.392 against 0.420. The two cards'
// ratios agree to 2% (1.212 and 1.210 forward, 0.917 and 0.933 backward),
// so the A100's apply to whatever share is in force: forward kernels, and
// the forward kernels backward reruns under activation checkpointing, at
// elementwiseForward times it; gradient kernels at elementwiseBackward
// times it. A pass of the usual mix, one byte forward to two backward,
// takes as long as at the share itself (0.2% apart).
const (
	elementwiseForward  = 0.629 / 0.519
	elementwiseBackward = 0.476 / 0.519
)

// ElementwiseShares splits c's ElementwiseEfficiency into the shares of
// HBM bandwidth forward and gradient kernels reach. Neither exceeds
// MemoryEfficiency, a large copy's: an element-wise kernel streams no
// faster than one (DefaultCalibration's share, the copies' 0.8 where no
// chip measurement exists, keeps 0.8 forward).
func (c *Calibration) ElementwiseShares() (forward, backward float64) {
	forward, backward = c.ElementwiseEfficiency*elementwiseForward, c.ElementwiseEfficiency*elementwiseBackward
	if c.MemoryEfficiency > 0 {
		forward, backward = min(forward, c.MemoryEfficiency), min(backward, c.MemoryEfficiency)
	}
	return forward, backward
}

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
