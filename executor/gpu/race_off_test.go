//go:build !race

package gpu_test

// slowdown: see race_on_test.go.
const slowdown = 1
