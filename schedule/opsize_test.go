package schedule

import (
	"testing"
	"unsafe"
)

// TestOpSize pins the size of an Op. A reader holds every op of a plan in
// memory: the largest plan the planner writes (planner.MaxOpsPerRank,
// 4,194,304 ops) is about 384 MiB of []Op at 96 bytes an op, and every
// reader must stay within 1 GiB on it (issue 28). The indices are int32,
// the enums uint8 and the lists Spans into the plan's tables for this; a
// field added to Op must fit in what the others leave, or take the bytes
// from somewhere else.
func TestOpSize(t *testing.T) {
	if n := unsafe.Sizeof(Op{}); n > 96 {
		t.Fatalf("schedule.Op is %d bytes, over the 96 the readers' memory bound assumes", n)
	}
}
