package checkpoint

import (
	"os"
	"regexp"
	"runtime"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// BenchmarkLargestWorld derives the checkpoint of gpt2-124m on 2²⁰ ranks,
// the largest world a plan has (ir: 2²⁴ is the model format's bound, but
// the planner's per-rank tables stop a plan first), estimates its save
// and load, and reshards it onto 2¹⁹ ranks, reporting the heap live after
// (MB) and allocated per op. Before the writer table kept a slot per
// tensor and rank (600 × 2²⁰) and every load read was built, the estimate
// took 112 s and `fsdpc checkpoint -json` died at 4 GB.
func BenchmarkLargestWorld(b *testing.B) {
	src, err := os.ReadFile("../plans/gpt2-124m.toml")
	if err != nil {
		b.Fatal(err)
	}
	plan := func(world string) *schedule.Plan {
		s := regexp.MustCompile(`(?m)^world_size = .*$`).ReplaceAllString(string(src), "world_size = "+world)
		m, err := ir.Load("gpt2.toml", []byte(s))
		if err != nil {
			b.Fatal(err)
		}
		p, err := planner.Plan(m, planner.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	old, new := plan("1048576"), plan("524288")
	st, _ := ParseStorage("nvme", "")
	b.ReportAllocs()
	var live runtime.MemStats
	for b.Loop() {
		ol, err := FromPlan(old)
		if err != nil {
			b.Fatal(err)
		}
		nl, err := FromPlan(new)
		if err != nil {
			b.Fatal(err)
		}
		ol.Estimate(st)
		rs, err := Plan(ol, nl)
		if err != nil {
			b.Fatal(err)
		}
		rs.Transfer(st)
		runtime.GC()
		runtime.ReadMemStats(&live)
		runtime.KeepAlive(rs)
	}
	b.ReportMetric(float64(live.HeapAlloc)/(1<<20), "live-MB")
}
