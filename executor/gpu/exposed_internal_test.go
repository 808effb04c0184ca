package gpu

import (
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// TestExposedWithin: a collective's exposed time is the part of it the
// compute stream's ops, merged, do not cover.
func TestExposedWithin(t *testing.T) {
	p := &schedule.Plan{Ops: []schedule.Op{
		{Kind: schedule.OpForward, Stream: schedule.StreamCompute},
		{Kind: schedule.OpAllGather, Stream: schedule.StreamAllGather},
		{Kind: schedule.OpForward, Stream: schedule.StreamCompute},
		{Kind: schedule.OpBackward, Stream: schedule.StreamCompute},
		{Kind: schedule.OpReduceScatter, Stream: schedule.StreamReduceScatter},
	}}
	spans := [][2]float64{{0, 1}, {0.5, 3}, {2, 2.5}, {2.25, 2.75}, {4, 5}}
	got := exposedWithin(p, func(op int) (float64, float64, bool) { return spans[op][0], spans[op][1], true })
	// The all-gather, [0.5, 3): covered on [0.5, 1) and [2, 2.75).
	if e := got[1]; e != 1.25 {
		t.Errorf("all-gather exposed %v, want 1.25", e)
	}
	if e := got[4]; e != 1 {
		t.Errorf("reduce-scatter exposed %v, want all of it, 1", e)
	}
	if len(got) != 2 {
		t.Errorf("exposure of %d ops, want the 2 collectives", len(got))
	}
}
