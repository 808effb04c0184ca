package checked

import (
	"math"
	"testing"
)

func TestMulAdd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a, b     int64
		mul, add int64
		mulOK    bool
		addOK    bool
	}{
		{"small", 6, 7, 42, 13, true, true},
		{"zero", 0, math.MaxInt64, 0, math.MaxInt64, true, true},
		{"2^31 squared", 1 << 31, 1 << 31, 1 << 62, 1 << 32, true, true},
		{"2^32 squared wraps", 1 << 32, 1 << 32, 0, 1 << 33, false, true},
		{"2^30 x 2^33 is 2^63", 1 << 30, 1 << 33, 0, 1<<30 + 1<<33, false, true},
		{"max plus one", math.MaxInt64, 1, math.MaxInt64, 0, true, false},
		{"negative", -1, 5, 0, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := Mul(tc.a, tc.b); ok != tc.mulOK || ok && got != tc.mul {
				t.Errorf("Mul(%d, %d) = %d, %v; want %d, %v", tc.a, tc.b, got, ok, tc.mul, tc.mulOK)
			}
			if got, ok := Add(tc.a, tc.b); ok != tc.addOK || ok && got != tc.add {
				t.Errorf("Add(%d, %d) = %d, %v; want %d, %v", tc.a, tc.b, got, ok, tc.add, tc.addOK)
			}
		})
	}
}

func TestSum(t *testing.T) {
	var s Sum
	s.AddProduct(1<<20, 1<<20)
	s.AddProduct(3, 4)
	if v, ok := s.Value(); !ok || v != 1<<40+12 {
		t.Fatalf("sum = %d, %v; want %d, true", v, ok, int64(1<<40+12))
	}
	s.AddProduct(1<<32, 1<<32) // overflows
	s.AddProduct(1)            // and stays overflowed
	if _, ok := s.Value(); ok {
		t.Fatal("an overflowed product left the sum valid")
	}
	var t2 Sum
	for i := 0; i < 3; i++ {
		t2.Add(math.MaxInt64/2, true)
	}
	if _, ok := t2.Value(); ok {
		t.Fatal("a sum past MaxInt64 was valid")
	}
}
