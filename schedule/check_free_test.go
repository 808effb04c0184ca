package schedule_test

import (
	"strings"
	"testing"

	. "github.com/fsdpc/fsdpc/schedule"
)

// TestFreeWithoutBuffer: a free whose buffer is -1 (one bit flip turns a
// wait into one) is refused by Check, so Verify, Simulate and the executors
// never index the buffer table with it.
func TestFreeWithoutBuffer(t *testing.T) {
	for i, o := range tinyPlan().Ops {
		if o.Kind != OpWait && o.Kind != OpFree {
			continue
		}
		p := tinyPlan()
		p.Ops[i] = Op{Kind: OpFree, Stream: o.Stream, Phase: o.Phase, Group: o.Group, Module: -1, Buffer: -1, Source: -1, Event: -1}
		err := Verify(p)
		if err == nil || !strings.Contains(err.Error(), "frees no buffer") {
			t.Errorf("op %d turned into a free of buffer -1: Verify = %v, want a 'frees no buffer' error", i, err)
		}
	}
}
