package calibrate

import (
	"math"
	"strings"
	"testing"
)

// TestScaling: runs that differ only in GPU count form a series set
// against its smallest run; a run with any other difference, one that ran
// out of memory and one predicted not to fit are in none.
func TestScaling(t *testing.T) {
	base := run{source: "S", layers: 32, hidden: 4096, gpu: "h100-sxm", gpusPerNode: 8, microBatch: 2, accum: 1, seq: 8192}
	at := func(id string, world int, meas, pred float64) Result {
		r := base
		r.id, r.world, r.shard, r.tokensPerGPU = id, world, world, meas
		return Result{run: r, fits: true, predTPS: pred}
	}
	other := at("other-batch", 16, 900, 900)
	other.microBatch = 4
	oom := at("oom", 32, 0, 0)
	oom.oom = true
	unfit := at("unfit", 64, 800, 0)
	unfit.fits = false
	steps := Scaling([]Result{at("b", 128, 900, 990), at("a", 8, 1000, 1000), other, oom, unfit})
	if len(steps) != 1 {
		t.Fatalf("steps = %+v, want one (a → b)", steps)
	}
	s := steps[0]
	if s.From != "a" || s.To != "b" || s.FromNodes != 1 || s.ToNodes != 16 {
		t.Errorf("step = %+v, want a (1 node) → b (16 nodes)", s)
	}
	if math.Abs(s.MeasuredDrop-10) > 1e-9 || math.Abs(s.PredDrop-1) > 1e-9 || math.Abs(s.Factor()-10) > 1e-9 {
		t.Errorf("drops %.3f%% measured, %.3f%% predicted, factor %.3f; want 10%%, 1%%, 10", s.MeasuredDrop, s.PredDrop, s.Factor())
	}
	if f := (Step{MeasuredDrop: 2, PredDrop: -1}).Factor(); f != 0 {
		t.Errorf("factor of drops of opposite sign = %g, want 0", f)
	}
	var b strings.Builder
	WriteScaling(&b, steps)
	if !strings.Contains(b.String(), "| a | b | 8 → 128 | 1 → 16 | +10.0% | +1.0% | 10.00 |") || !strings.Contains(b.String(), "0 of 1 steps") {
		t.Errorf("table:\n%s", b.String())
	}
}
