//go:build race

package executor

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = true
