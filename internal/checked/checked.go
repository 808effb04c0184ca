// Package checked is fsdpc's one way to multiply sizes, counts and bytes
// that come from user input: int64 arithmetic that reports overflow instead
// of wrapping to a negative "fits". Every product of input figures in the
// front end goes through it, so the check is never re-derived by hand.
package checked

import (
	"math"
	"math/bits"
)

// Mul returns a·b for non-negative a and b, and false when either is
// negative or the product does not fit in an int64.
func Mul(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}
