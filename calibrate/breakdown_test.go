package calibrate

import (
	"strings"
	"testing"
)

// TestCompilePairs: two rows pair only when everything but compile is
// the same; the gains are compiled over eager, measured and predicted.
func TestCompilePairs(t *testing.T) {
	base := run{source: "S", gpu: "h100-sxm", layers: 32, hidden: 4096, world: 8, gpusPerNode: 8, checkpointing: "none", microBatch: 2, seq: 4096}
	row := func(id string, compile bool, meas, pred float64, change func(*run)) Result {
		r := base
		r.id, r.compile, r.tokensPerGPU = id, compile, meas
		if change != nil {
			change(&r)
		}
		return Result{run: r, fits: true, predTPS: pred}
	}
	results := []Result{
		row("eager", false, 1000, 1100, nil),
		row("compiled", true, 1250, 1320, func(r *run) { r.compileLoss = true }),
		row("other-ac", true, 1300, 1300, func(r *run) { r.checkpointing = "full" }),
		row("other-gpu", false, 500, 500, func(r *run) { r.gpu = "a100-80gb" }),
	}
	pairs := CompilePairs(results)
	if len(pairs) != 1 {
		t.Fatalf("pairs %+v, want eager with compiled only", pairs)
	}
	p := pairs[0]
	if p.Eager != "eager" || p.Compiled != "compiled" || p.Measured < 24.99 || p.Measured > 25.01 || p.Predicted < 19.99 || p.Predicted > 20.01 {
		t.Errorf("pair %+v, want measured +25%%, predicted +20%%", p)
	}
	var b strings.Builder
	WriteCompilePairs(&b, pairs)
	if !strings.Contains(b.String(), "| eager | compiled | h100-sxm | none | +25.0% | +20.0% | -5.0 |") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	WriteBias(&b, results)
	for _, want := range []string{"| h100-sxm eager | 1 | +10.0% | +10.0% | +10.0% |", "| h100-sxm compile | 2 | +2.8% | +0.0% | +5.6% |", "| a100-80gb eager | 1 | +0.0% |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("bias table lacks %q:\n%s", want, b.String())
		}
	}
}
