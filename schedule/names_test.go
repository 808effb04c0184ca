package schedule

import "testing"

// Every enum value has a name: the text and wire forms depend on it.
func TestEnumNames(t *testing.T) {
	counts := []struct {
		what  string
		names int
		count int
	}{
		{"stream", len(streamNames), int(numStreams)},
		{"pool", len(poolNames), int(numPools)},
		{"buffer kind", len(bufferKindNames), int(numBufferKinds)},
		{"op kind", len(opKindNames), int(numOpKinds)},
		{"phase", len(phaseNames), int(numPhases)},
		{"process group", len(pgNames), int(numProcessGroups)},
		{"reshard kind", len(reshardNames), int(numReshardKinds)},
		{"reduce op", len(reduceNames), int(numReduceOps)},
	}
	for _, c := range counts {
		if c.names != c.count {
			t.Errorf("%d %s names for %d values", c.names, c.what, c.count)
		}
	}
	seen := map[string]bool{}
	for _, n := range opKindNames {
		if seen[n] {
			t.Errorf("op name %q used twice", n)
		}
		seen[n] = true
	}
}
