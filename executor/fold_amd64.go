package executor

import (
	"unsafe"

	"github.com/fsdpc/fsdpc/ir"
)

// The host reductions' AVX2 folds (fold_amd64.s), used when the CPU and the
// operating system support AVX2 and F16C; fastpath.go's Go loops otherwise,
// and for the tail of a row that is not a whole number of their groups
// (simdElems).

//go:noescape
func foldBF16AVX2(acc *float32, x *uint16, n int, s float32, mode int) int

//go:noescape
func foldFP16AVX2(acc *float32, x *uint16, n int, s float32, mode int) int

//go:noescape
func foldFP32AVX2(acc *float32, x *float32, n int, s float32, mode int) int

//go:noescape
func storeBF16AVX2(out *uint16, acc *float32, n int)

//go:noescape
func storeFP16AVX2(out *uint16, acc *float32, n int)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)
func xgetbv0() uint32

// haveFoldSIMD: CPUID says AVX, AVX2, F16C and OSXSAVE, and the operating
// system saves the YMM registers (XCR0 bits 1 and 2).
var haveFoldSIMD = func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const osxsave, avx, f16c = 1 << 27, 1 << 28, 1 << 29
	if c1&osxsave == 0 || c1&avx == 0 || c1&f16c == 0 {
		return false
	}
	if xgetbv0()&6 != 6 {
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<5) != 0 // AVX2
}()

// simdElems is how many of n elements the assembly folds and stores: whole
// groups of 16 bf16s (whose accumulators it keeps in its own order within
// each group) or 8 of the others.
func simdElems(dt ir.DType, n int) int {
	if dt == ir.BF16 {
		return n &^ 15
	}
	return n &^ 7
}

// foldSIMD folds the first simdElems elements of one input row (raw bytes
// of dt) into acc with the given mode (foldAdd ...), and says whether any
// of them was the poison pattern. It folds nothing where the CPU lacks the
// instructions.
func foldSIMD(dt ir.DType, acc []float32, row []byte, s float32, mode int) (poison bool) {
	n := simdElems(dt, len(acc))
	if !useFoldSIMD || n == 0 {
		return false
	}
	_ = row[n*int(dt.Size())-1]
	var p int
	switch dt {
	case ir.BF16:
		p = foldBF16AVX2(&acc[0], (*uint16)(unsafe.Pointer(&row[0])), n, s, mode)
	case ir.FP16:
		p = foldFP16AVX2(&acc[0], (*uint16)(unsafe.Pointer(&row[0])), n, s, mode)
	case ir.FP32:
		p = foldFP32AVX2(&acc[0], (*float32)(unsafe.Pointer(&row[0])), n, s, mode)
	default:
		return false
	}
	return p != 0
}

// storeSIMD encodes the first simdElems accumulators into out as dt
// (bf16 ones already rounded: their high halves; fp16 ones rounded to
// nearest even); nothing where the CPU lacks the instructions.
func storeSIMD(dt ir.DType, acc []float32, out []byte) {
	n := simdElems(dt, len(acc))
	if !useFoldSIMD || n == 0 {
		return
	}
	_ = out[n*int(dt.Size())-1]
	switch dt {
	case ir.BF16:
		storeBF16AVX2((*uint16)(unsafe.Pointer(&out[0])), &acc[0], n)
	case ir.FP16:
		storeFP16AVX2((*uint16)(unsafe.Pointer(&out[0])), &acc[0], n)
	case ir.FP32:
		copy(f32s(out, n), acc[:n])
	}
}

// useFoldSIMD is haveFoldSIMD; tests turn it off to run the Go loops.
var useFoldSIMD = haveFoldSIMD
