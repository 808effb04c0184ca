package torchgen

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
)

// TestProgramConformance runs `fsdpc emit torch`'s program, as a user
// launches it (2 CPU ranks over gloo, torchrun's environment, in the torch root): its
// apply_plan shards the model and its verify_first_step compares FSDP2's
// first step with the plan on every rank. One plain fp32 case that clips
// the gradients' norm as its plan priced (max_grad_norm), and one under
// mixed precision, a divide factor and reshard_after_forward=False
// through the package's gloo adapters; then the Llama zoo model scaled
// down as `emit torch --scale` does it.
func TestProgramConformance(t *testing.T) {
	py := needTorch(t)
	cases := []struct{ name, train, policy string }{
		{"fp32-prefetch-clip", "max_grad_norm = 1", "prefetch_forward = 1\nprefetch_backward = 1"},
		{"bf16-divide", "", `param_dtype = "bf16"` + "\n" + `reduce_dtype = "fp32"` + "\nreshard_after_forward = false\ngradient_divide_factor = 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ir.Load(c.name+".toml", []byte(fmt.Sprintf(decoderModel, c.train, "world_size = 2", c.policy, "", "")))
			if err != nil {
				t.Fatal(err)
			}
			runProgram(t, py, m, 1)
		})
	}
	t.Run("llama3-8b-scaled", func(t *testing.T) {
		c := zooCases[1]
		m, _, _, err := zooPlan(c)
		if err != nil {
			t.Fatal(err)
		}
		runProgram(t, py, m, 2)
	})
}

func runProgram(t *testing.T, py Python, m *ir.Model, scale int) {
	t.Helper()
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, spec, err := ScalePlan(m, p, scale)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewExport(spec, q, scale)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := RunProgram(py, e, spec.Model, m.Name, 2, 4*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%.1fs: %s", time.Since(start).Seconds(), strings.TrimSpace(string(out)))
	if !strings.Contains(string(out), "step 1: loss") || !strings.Contains(string(out), "match the plan") || !strings.Contains(string(out), "step 2: loss") {
		t.Errorf("the program did not report two steps, the first matching the plan:\n%s", out)
	}
}
