package gputest

import (
	"testing"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

// TestMovesTableSharedByStreams: two streams run Moves with the same runs
// and no ordering between them, on disjoint bytes, as two virtual ranks
// of a rehearsal do. They share one table; its upload must be ordered
// before the second stream's read, and before a graph captured later
// reads it (issue 29, N1). A table uploaded on its first user's stream
// fails this with a hazard on the second.
func TestMovesTableSharedByStreams(t *testing.T) {
	d := New(WithRaceDetection())
	defer d.Close()
	s1, _ := d.NewStream(0)
	s2, _ := d.NewStream(0)
	s3, _ := d.NewStream(0)
	runs := []gpu.Run{{DstOff: 0, SrcOff: 64, N: 8, DstDType: ir.FP32, SrcDType: ir.FP32}, {DstOff: 32, SrcOff: 0, N: 8, DstDType: ir.BF16, SrcDType: ir.FP32}}
	var src, dst [3]gpu.Ptr
	for i, s := range []gpu.Stream{s1, s2, s3} {
		src[i], _ = d.Alloc(128)
		dst[i], _ = d.Alloc(128)
		ok(t, d.Fill(src[i], ir.FP32, 32, uint64(i), s))
	}
	ok(t, d.Moves(dst[0], src[0], runs, s1))
	ok(t, d.Moves(dst[1], src[1], runs, s2))
	// A capture on a third stream reads the table too.
	ok(t, d.BeginCapture(s3))
	ok(t, d.Moves(dst[2], src[2], runs, s3))
	g, err := d.EndCapture(s3)
	ok(t, err)
	ok(t, d.LaunchGraph(g, s3))
	if err := drainAll(t, d, []gpu.Stream{s1, s2, s3}); err != nil {
		t.Fatal(err)
	}
	if errs := d.Errors(); len(errs) > 0 {
		t.Fatalf("device: %v", errs[0])
	}
	st := d.Stats()
	if st.TableBytes != 2*tableEntryBytes {
		t.Errorf("TableBytes %d, want one table of two runs (%d)", st.TableBytes, 2*tableEntryBytes)
	}
	if st.LiveBytes != 6*128 {
		t.Errorf("LiveBytes %d: the table counted as an Alloc", st.LiveBytes)
	}
}
