package executor

import "unsafe"

// Assembly fills and checks of the activation pattern and the poison
// (pattern_amd64.s), where the CPU has AVX2 (haveFoldSIMD); Go loops do
// the rest.

//go:noescape
func fillPatternAVX2(dst *uint32, n int, init *[8]uint64, step uint64)

//go:noescape
func checkPatternAVX2(src *uint32, n int, init *[8]uint64, step uint64) int

//go:noescape
func fillOnesAVX2(dst *byte, n int)

// patternStep advances every product by 8 words (mod 2^64).
const patternStep = actPatternK * 8 % (1 << 64)

// patternStart is the products the assembly starts from: words 0, 2, 4, 6
// then 1, 3, 5, 7.
func patternStart(seed uint64) *[8]uint64 {
	var init [8]uint64
	for i := range 4 {
		init[i] = (uint64(2*i) + seed) * actPatternK
		init[4+i] = (uint64(2*i+1) + seed) * actPatternK
	}
	return &init
}

// fillPatternSIMD writes the pattern into the first len(words)&^7 words
// and says how many it wrote.
func fillPatternSIMD(words []uint32, seed uint64) int {
	n := len(words) &^ 7
	if !useFoldSIMD || n == 0 {
		return 0
	}
	fillPatternAVX2(&words[0], n, patternStart(seed), patternStep)
	return n
}

// checkPatternSIMD returns where to look for the first word that differs
// from the pattern: the start of the first group of 8 that does, or the
// first word it did not check.
func checkPatternSIMD(words []uint32, seed uint64) int {
	n := len(words) &^ 7
	if !useFoldSIMD || n == 0 {
		return 0
	}
	return checkPatternAVX2(&words[0], n, patternStart(seed), patternStep)
}

// fillOnesSIMD sets the first len(b)&^127 bytes to 0xff and says how many.
func fillOnesSIMD(b []byte) int {
	n := len(b) &^ 127
	if !useFoldSIMD || n == 0 {
		return 0
	}
	fillOnesAVX2(unsafe.SliceData(b), n)
	return n
}
