// Package checked is fsdpc's one way to compute sizes, counts, bytes and
// FLOPs that come from user input: int64 arithmetic that reports overflow
// instead of wrapping to a negative "fits", and float figures that refuse
// NaN and infinities. Every stage from the model file to the plan uses it
// where a product or sum of input figures could leave int64, so a check
// is never re-derived by hand.
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

// Add returns a+b for non-negative a and b, and false when either is
// negative or the sum does not fit in an int64.
func Add(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// Product multiplies all its factors, false on the first overflow.
func Product(factors ...int64) (int64, bool) {
	p := int64(1)
	for _, f := range factors {
		var ok bool
		if p, ok = Mul(p, f); !ok {
			return 0, false
		}
	}
	return p, true
}

// Sum is a running total of non-negative terms that remembers overflow:
// once a term overflows, Value reports false for good, so a loop can add
// freely and check once.
type Sum struct {
	v    int64
	over bool
}

// Add adds a term (itself possibly an overflowed product: pass ok false).
func (s *Sum) Add(term int64, ok bool) {
	if s.over {
		return
	}
	if !ok {
		s.over = true
		return
	}
	s.v, s.over = Add(s.v, term)
	s.over = !s.over
}

// AddProduct adds the product of factors.
func (s *Sum) AddProduct(factors ...int64) {
	s.Add(Product(factors...))
}

// Value is the total, and false if any term or the sum overflowed.
func (s *Sum) Value() (int64, bool) { return s.v, !s.over }

// Finite reports whether a float figure is a number (not NaN or ±Inf).
func Finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
