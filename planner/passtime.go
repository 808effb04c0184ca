package planner

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// PassTimes adds up the time each planner pass takes over one plan or a
// whole tune (every candidate, planned concurrently), as Go's ssa
// reports -d ssa/<pass>/time: which pass dominates. Safe for concurrent
// use.
type PassTimes struct {
	mu    sync.Mutex
	total map[string]time.Duration
	runs  map[string]int
}

func (t *PassTimes) add(pass string, d time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total == nil {
		t.total, t.runs = map[string]time.Duration{}, map[string]int{}
	}
	t.total[pass] += d
	t.runs[pass]++
}

// Runs and Total are a pass's count of runs and its summed time.
func (t *PassTimes) Runs(pass string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs[pass]
}

func (t *PassTimes) Total(pass string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total[pass]
}

// Write prints one line per pass in pipeline order: runs, summed time,
// mean and share of all passes' time.
func (t *PassTimes) Write(w io.Writer) {
	var sum time.Duration
	for _, p := range passes {
		sum += t.Total(p.name)
	}
	fmt.Fprintf(w, "%-10s %7s %12s %12s %6s\n", "pass", "runs", "total", "mean", "share")
	for _, p := range passes {
		n, d := t.Runs(p.name), t.Total(p.name)
		mean, share := time.Duration(0), 0.0
		if n > 0 {
			mean = d / time.Duration(n)
		}
		if sum > 0 {
			share = 100 * float64(d) / float64(sum)
		}
		fmt.Fprintf(w, "%-10s %7d %12v %12v %5.1f%%\n", p.name, n, d.Round(time.Microsecond), mean.Round(time.Microsecond), share)
	}
}
