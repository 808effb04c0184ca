package executor

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestPatternSIMDMatchesGo: the assembly writes the activation pattern's
// words exactly, finds the first word that differs wherever it is (in a
// group of 8 or in the tail), and fills poison over any length.
func TestPatternSIMDMatchesGo(t *testing.T) {
	defer func() { useFoldSIMD = haveFoldSIMD }()
	r := rand.New(rand.NewPCG(9, 10))
	for _, simd := range []bool{false, true} {
		useFoldSIMD = simd && haveFoldSIMD
		for _, bytesLen := range []int{0, 3, 4, 31, 32, 36, 64, 260, 4096 + 12} {
			seed := r.Uint64()
			b := make([]byte, bytesLen)
			fillPattern(b, seed)
			for w := 0; w < bytesLen/4; w++ {
				if got, want := binary.LittleEndian.Uint32(b[4*w:]), actPattern(seed, int64(w)); got != want {
					t.Fatalf("simd %v, %d bytes: word %d is %#x, want %#x", useFoldSIMD, bytesLen, w, got, want)
				}
			}
			if got := patternMismatch(b, seed); got != -1 {
				t.Fatalf("simd %v, %d bytes: the pattern itself differs at word %d", useFoldSIMD, bytesLen, got)
			}
			if bytesLen >= 4 {
				if got := patternMismatch(b, seed+1); got != 0 {
					t.Fatalf("simd %v, %d bytes: another seed's pattern differs at word %d, want 0", useFoldSIMD, bytesLen, got)
				}
			}
			for range 20 {
				if bytesLen < 4 {
					break
				}
				c := bytes.Clone(b)
				first := r.IntN(bytesLen / 4)
				c[4*first+r.IntN(4)] ^= 1 << r.IntN(8)
				if later := first + 1 + r.IntN(bytesLen/4); later < bytesLen/4 {
					c[4*later] ^= 0x80
				}
				if got := patternMismatch(c, seed); got != int64(first) {
					t.Fatalf("simd %v, %d bytes: first differing word %d found at %d", useFoldSIMD, bytesLen, first, got)
				}
			}
			for off := range 3 {
				p := make([]byte, bytesLen+off+200)
				fillPoison(p[off : off+bytesLen])
				for i, x := range p {
					if want := byte(0); i >= off && i < off+bytesLen {
						if x != poisonByte {
							t.Fatalf("simd %v: poison of %d bytes at %d: byte %d is %#x", useFoldSIMD, bytesLen, off, i, x)
						}
					} else if x != want {
						t.Fatalf("simd %v: poison of %d bytes at %d wrote byte %d", useFoldSIMD, bytesLen, off, i)
					}
				}
			}
		}
	}
}
