package calibrate

import (
	"math"
	"testing"
)

// TestLeaveOneSourceOut: each source's rows are predicted with the GEMM
// efficiency refitted over the other sources' rows on the same chip only,
// so the fitted value differs from the built-in one (fitted over all), the
// fold counts only other sources' runs, and the in-sample figure is the
// rows' error under the built-in profiles.
func TestLeaveOneSourceOut(t *testing.T) {
	set := loadSet(t)
	hs, err := set.LeaveOneSourceOut()
	if err != nil {
		t.Fatal(err)
	}
	results, err := set.Predict(nil)
	if err != nil {
		t.Fatal(err)
	}
	bySource := map[string]HeldOut{}
	for _, h := range hs {
		bySource[h.Source] = h
	}
	for _, src := range []string{"S3", "S6", "S7"} {
		h, ok := bySource[src]
		if !ok {
			t.Fatalf("no held-out figure for %s (%+v)", src, hs)
		}
		var sum float64
		rows, others := 0, map[string]int{}
		for i, r := range set.Runs {
			if r.oom || r.tokensPerGPU == 0 {
				continue
			}
			if r.source == src {
				sum += absErr(results[i])
				rows++
			} else {
				others[r.gpu]++
			}
		}
		if h.Rows != rows || math.Abs(h.InSample-sum/float64(rows)) > 1e-9 {
			t.Errorf("%s: %d rows in-sample %.3f%%, want %d rows %.3f%%", src, h.Rows, h.InSample, rows, sum/float64(rows))
		}
		for _, f := range h.Fitted {
			want := 0
			for _, g := range f.GPUs {
				want += others[g]
			}
			if f.RunsFittedOver != want || f.Fit == f.BuiltIn {
				t.Errorf("%s: %v refitted over %d runs to %.4f (built-in %.4f); want the %d runs of other sources and a different value", src, f.GPUs, f.RunsFittedOver, f.Fit, f.BuiltIn, want)
			}
		}
		if h.HeldOut == h.InSample {
			t.Errorf("%s: held-out error equals in-sample (%.2f%%): the fold changed nothing", src, h.HeldOut)
		}
	}
}
