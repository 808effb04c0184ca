package calibrate

import (
	"os"
	"runtime"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// planBytes, which the cache's budget counts in, is not far below what a
// plan holds on the heap: measured over ten rows of the calibration set.
func TestPlanBytesEstimate(t *testing.T) {
	f, err := os.Open("published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, _, err := readRuns("published-runs.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	var keep []*schedule.Plan
	var heap, est int64
	for _, x := range runs[:10] {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		p, err := planRow(x.id, modelFile(x))
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&b)
		if p == nil {
			continue
		}
		keep = append(keep, p)
		heap += int64(b.HeapAlloc) - int64(a.HeapAlloc)
		est += planBytes(p)
	}
	runtime.KeepAlive(keep)
	if r := float64(est) / float64(heap); r < 0.8 || r > 1.5 {
		t.Errorf("planBytes estimates %d bytes for plans holding %d on the heap (ratio %.2f)", est, heap, r)
	}
}

// A cache too small for every plan predicts exactly what an unbounded
// one does, planning again what it let go, and holds no more than its
// budget.
func TestPlanCacheBounded(t *testing.T) {
	f, err := os.Open("published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := Load("published-runs.csv", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := set.Predict(nil)
	if err != nil {
		t.Fatal(err)
	}
	saved := plans
	defer func() { plans = saved }()
	plans = newPlanCache(3 << 20)
	got, err := set.Predict(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i].predTPS != want[i].predTPS || got[i].fits != want[i].fits {
			t.Errorf("%s: %v tokens/s from a small cache, %v from a large one", want[i].id, got[i].predTPS, want[i].predTPS)
		}
	}
	if plans.used > plans.budget || len(plans.byKey) == 0 || len(plans.byKey) >= len(set.Runs) {
		t.Errorf("the cache holds %d bytes in %d plans of %d runs, budget %d", plans.used, len(plans.byKey), len(set.Runs), plans.budget)
	}
}
