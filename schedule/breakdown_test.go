package schedule_test

import (
	"math"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestBreakdownAddsUp: the parts of every zoo plan's step, and of
// communication-bound, offloaded and accumulating plans, add up to the
// step time, and none is negative.
func TestBreakdownAddsUp(t *testing.T) {
	cases := convergenceCases(t)
	for name, src := range map[string]string{
		// The optimizer runs on the host: the GPU waits for the CPU.
		"offload": `
[train]
micro_batch = 2
seq_len = 512
[cluster]
gpu = "h100-sxm"
world_size = 8
[policy]
offload = true
param_dtype = "bf16"
reduce_dtype = "fp32"
[[module]]
name = "layers"
repeat = 4
[[module.module]]
name = "ff"
kind = "linear"
in = 4096
out = 4096
`,
		"accumulate": `
[train]
micro_batch = 1
seq_len = 2048
grad_accum = 4
accumulate = "unsharded"
[cluster]
gpu = "a100-80gb"
world_size = 16
gpus_per_node = 8
[[module]]
name = "layers"
repeat = 4
[[module.module]]
name = "ff"
kind = "linear"
in = 4096
out = 4096
`,
	} {
		m, err := ir.Load(name+".toml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, err := planner.Plan(m, planner.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases[name] = p
	}
	for name, p := range cases {
		sim, err := schedule.Simulate(p, schedule.NewModel(p))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := sim.Breakdown
		sum := 0.0
		for _, part := range b.Parts() {
			if part.Seconds < 0 || math.IsNaN(part.Seconds) {
				t.Errorf("%s: %s = %g s", name, part.Key, part.Seconds)
			}
			sum += part.Seconds
		}
		if d := math.Abs(sum - sim.StepTime); d > 1e-9*sim.StepTime {
			t.Errorf("%s: parts add up to %.9g s, the step is %.9g s (%+v)", name, sum, sim.StepTime, b)
		}
		if b.ExposedComm != sim.ExposedComm {
			t.Errorf("%s: breakdown's exposed communication %g, the simulation's %g", name, b.ExposedComm, sim.ExposedComm)
		}
		if b.Compute+b.Optimizer > sim.ComputeTime*(1+1e-12) {
			t.Errorf("%s: compute %g + optimizer %g exceed the compute alone %g", name, b.Compute, b.Optimizer, sim.ComputeTime)
		}
	}
}
