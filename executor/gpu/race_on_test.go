//go:build race

package gpu_test

// slowdown stretches the timing-bound tests' clocks under the race
// detector, which slows every goroutine several times over.
const slowdown = 5
