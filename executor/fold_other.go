//go:build !amd64

package executor

import "github.com/fsdpc/fsdpc/ir"

const haveFoldSIMD = false

var useFoldSIMD = haveFoldSIMD

// foldSIMD folds nothing: only amd64 has the assembly folds.
func foldSIMD(dt ir.DType, acc []float32, row []byte, s float32, mode int) (done int, poison bool) {
	return 0, false
}

func storeSIMD(dt ir.DType, acc []float32, out []byte) int { return 0 }

func fillPatternSIMD(words []uint32, seed uint64) int  { return 0 }
func checkPatternSIMD(words []uint32, seed uint64) int { return 0 }
func fillOnesSIMD(b []byte) int                        { return 0 }

func simdElems(dt ir.DType, n int) int { return 0 }
