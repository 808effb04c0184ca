package checked

import (
	"math"
	"testing"
)

func TestMul(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b int64
		want int64
		ok   bool
	}{
		{"small", 6, 7, 42, true},
		{"zero", 0, math.MaxInt64, 0, true},
		{"2^31 squared", 1 << 31, 1 << 31, 1 << 62, true},
		{"2^32 squared wraps", 1 << 32, 1 << 32, 0, false},
		{"2^30 x 2^33 is 2^63", 1 << 30, 1 << 33, 0, false},
		{"max times one", math.MaxInt64, 1, math.MaxInt64, true},
		{"negative", -1, 5, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := Mul(tc.a, tc.b); ok != tc.ok || ok && got != tc.want {
				t.Errorf("Mul(%d, %d) = %d, %v; want %d, %v", tc.a, tc.b, got, ok, tc.want, tc.ok)
			}
		})
	}
}
