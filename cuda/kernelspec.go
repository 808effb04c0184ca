package cuda

import "github.com/fsdpc/fsdpc/ir"

// This file is build-tag free on purpose: it is what the untagged tests
// (ptx_test.go) check the committed PTX against, on machines without a
// GPU. The cuda-tagged code launches exactly the kernels listed here.

// The PTX is compiled for the oldest architecture fsdpc supports (Volta);
// the driver JIT-compiles it for the device at load. --fmad=false keeps
// nvcc from contracting a*b+c into one rounding, which the host's check
// would not reproduce. Debian's nvcc (11.8) drives its own gcc-11 wrapper
// under /usr/lib/nvidia-cuda-toolkit/bin, so no -ccbin or
// -allow-unsupported-compiler is needed; TestPTXUpToDate runs this line.
//
//go:generate nvcc -ptx -arch=compute_70 --fmad=false -o kernels.ptx kernels.cu

// kernel indexes the kernels of kernels.cu.
type kernel int

const (
	kCast kernel = iota
	kReduce
	kDivide
	kAdd
	kFillPattern
	kSpin
	kBurn
	kPacedCopy
	kMoves
	numKernels
)

// kernelNames are the kernels' extern "C" names in kernels.cu.
var kernelNames = [numKernels]string{
	kCast:        "cast",
	kReduce:      "reduce",
	kDivide:      "divide",
	kAdd:         "add",
	kFillPattern: "fill_pattern",
	kSpin:        "spin",
	kBurn:        "burn",
	kPacedCopy:   "paced_copy",
	kMoves:       "moves",
}

// maxReduceSrcs is kernels.cu's MAX_SRCS: reduce takes its source
// pointers by value in a fixed array of this many.
const maxReduceSrcs = 64

// dtypeCode is the code kernels.cu uses for a dtype (its DT_* enum, which
// is ir.DType's numbering), and whether the kernels handle the dtype at
// all: the float dtypes fp64, fp32, bf16 and fp16.
func dtypeCode(dt ir.DType) (int64, bool) {
	switch dt {
	case ir.FP64, ir.FP32, ir.BF16, ir.FP16:
		return int64(dt), true
	}
	return 0, false
}
