//go:build !amd64

package executor

import "github.com/fsdpc/fsdpc/ir"

// The assembly folds, pattern fills and checks and poison fill exist only
// on amd64 (fold_amd64.s, pattern_amd64.s). Elsewhere these do nothing and
// say so, and the Go loops do all the work.

const haveFoldSIMD = false

var useFoldSIMD = haveFoldSIMD

// foldSIMD folds nothing.
func foldSIMD(dt ir.DType, acc []float32, row []byte, s float32, mode int) (poison bool) {
	return false
}

func storeSIMD(dt ir.DType, acc []float32, out []byte) {}

func fillPatternSIMD(words []uint32, seed uint64) int  { return 0 }
func checkPatternSIMD(words []uint32, seed uint64) int { return 0 }
func fillOnesSIMD(b []byte) int                        { return 0 }

func simdElems(dt ir.DType, n int) int { return 0 }
