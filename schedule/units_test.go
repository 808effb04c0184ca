package schedule_test

import (
	"math"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestThroughput: a training log's units from a step, worked by hand.
func TestThroughput(t *testing.T) {
	src, file, _ := plans.Source("llama3-8b")
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const step = 2.0 // seconds, a round figure to check against
	perToken := m.FLOPsPerToken()
	got := schedule.NewThroughput(p, step, perToken)
	perGPU := m.Train.MicroBatch * m.Train.SeqLen * m.Train.GradAccum
	var hw float64
	for _, o := range p.Ops {
		if o.Kind == schedule.OpForward || o.Kind == schedule.OpBackward {
			hw += o.FLOPs
		}
	}
	peak := 989.4e12 // H100 SXM, bf16 dense
	want := schedule.Throughput{
		TokensPerStepPerGPU:   perGPU,
		TokensPerStep:         perGPU * 8,
		TokensPerSecondPerGPU: float64(perGPU) / step,
		PeakFLOPS:             peak,
		PeakDType:             ir.BF16,
		ModelFLOPsPerToken:    perToken,
		ModelFLOPS:            perToken * float64(perGPU) / step,
		MFU:                   perToken * float64(perGPU) / step / peak,
		HardwareFLOPS:         hw / step,
		HFU:                   hw / step / peak,
	}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	// Without the model there is no MFU, but the rest stands.
	if n := schedule.NewThroughput(p, step, 0); n.MFU != 0 || n.ModelFLOPS != 0 || n.HFU != want.HFU {
		t.Errorf("without the model: %+v", n)
	}
	for _, c := range []struct{ tokens, want float64 }{
		{float64(want.TokensPerStep), step},
		{float64(want.TokensPerStep) + 1, 2 * step}, // a partial step is a step
		{1e12, math.Ceil(1e12/float64(want.TokensPerStep)) * step},
	} {
		if d := got.TrainTime(c.tokens, step); d != c.want {
			t.Errorf("TrainTime(%g) = %g s, want %g", c.tokens, d, c.want)
		}
	}
}
