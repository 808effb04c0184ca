package gpu_test

import (
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
)

// BenchmarkDeviceCalls counts the device calls a rehearsal makes per rank
// and step, in steady state (the difference between a run of 4 steps and
// one of 2, no data check), against the plan's ops per rank and step: the
// issue cost model charges one launch per op, and each call takes the
// device's mutex and makes its context current on the calling thread
// (cuda.Device.do). The target is at most 2 calls per op.
//
//	go test -run '^$' -bench DeviceCalls -benchtime 1x ./executor/gpu
func BenchmarkDeviceCalls(b *testing.B) {
	for _, c := range []rehearsalCase{
		{"llama3-8b", 2, 1, 8, 64, nil},
		{"llama3-8b", 2, 2, 4, 64, nil},
		{"gpt2-124m", 2, 1, 4, 16, nil},
	} {
		b.Run(c.String(), func(b *testing.B) {
			p := plan(b, c.model, c.layers, c.r, c.s, c.extra...)
			world := c.r * c.s
			var perStep float64
			for range b.N {
				calls := func(steps int) int64 {
					dev := gpu.Counting(gputest.New())
					defer dev.Close()
					bk := gpu.New(dev, gpu.Options{})
					if _, err := executor.Run(p, bk, executor.Options{Scale: c.scale, Steps: steps, Timeout: 20 * time.Second}); err != nil {
						b.Fatal(err)
					}
					return dev.Calls()
				}
				perStep = float64(calls(4)-calls(2)) / 2 / float64(world)
			}
			ops := float64(len(p.Ops))
			b.ReportMetric(perStep, "calls/rank/step")
			b.ReportMetric(ops, "ops/rank/step")
			b.ReportMetric(perStep/ops, "calls/op")
		})
	}
}

// TestDeviceCallsPerOp keeps the issue cost near what the model charges:
// at most 2 device calls per plan op per rank and step in steady state
// (it was 3 to 5 when each tensor of a copy-in was its own call).
func TestDeviceCallsPerOp(t *testing.T) {
	p := plan(t, "llama3-8b", 2, 1, 4)
	calls := func(steps int) int64 {
		dev := gpu.Counting(gputest.New())
		defer dev.Close()
		if _, err := executor.Run(p, gpu.New(dev, gpu.Options{}), executor.Options{Scale: 64, Steps: steps, Timeout: 20 * time.Second}); err != nil {
			t.Fatal(err)
		}
		return dev.Calls()
	}
	perStep := float64(calls(4)-calls(2)) / 2 / 4
	if ops := float64(len(p.Ops)); perStep > 2*ops {
		t.Errorf("%.0f device calls per rank and step for %.0f plan ops: more than 2 per op", perStep, ops)
	}
}
