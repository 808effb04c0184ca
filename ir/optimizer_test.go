package ir

import (
	"strings"
	"testing"
)

// TestOptimizerImplementation: fused is the default, foreach is read for
// AdamW, and any other optimizer or name is refused at the key.
func TestOptimizerImplementation(t *testing.T) {
	for _, c := range []struct {
		train   string
		foreach bool
		err     string
	}{
		{"", false, ""},
		{`optimizer_implementation = "fused"`, false, ""},
		{`optimizer_implementation = "foreach"`, true, ""},
		{"optimizer = \"adamw\"\noptimizer_implementation = \"foreach\"", true, ""},
		{"optimizer = \"lion\"\noptimizer_implementation = \"foreach\"", false, `modes.toml:5:28: train.optimizer_implementation: optimizer_implementation "foreach" is modelled for optimizer = "adamw" only, not "lion"`},
		{`optimizer_implementation = "for-loop"`, false, `optimizer_implementation "for-loop" is not one of foreach, fused`},
	} {
		m, err := loadTrain(t, c.train)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.train, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.train, err)
		}
		if m.Train.OptimizerForeach != c.foreach {
			t.Errorf("%q: OptimizerForeach = %v, want %v", c.train, m.Train.OptimizerForeach, c.foreach)
		}
	}
}

// TestMaxGradNorm: no clipping by default; a finite non-negative figure is
// read (0 is off); anything else is refused at the key's line and column.
func TestMaxGradNorm(t *testing.T) {
	for _, c := range []struct {
		train string
		want  float64
		err   string
	}{
		{"", 0, ""},
		{"max_grad_norm = 1.0", 1, ""},
		{"max_grad_norm = 1", 1, ""},
		{"max_grad_norm = 0", 0, ""},
		{"max_grad_norm = 0.5", 0.5, ""},
		{"max_grad_norm = -1.0", 0, "modes.toml:4:17: train.max_grad_norm: max_grad_norm must be a finite, non-negative number, not -1"},
		{"max_grad_norm = inf", 0, "modes.toml:4:17: train.max_grad_norm: max_grad_norm must be a finite, non-negative number, not +Inf"},
		{"max_grad_norm = nan", 0, "modes.toml:4:17: train.max_grad_norm: max_grad_norm must be a finite, non-negative number"},
		{`max_grad_norm = "1.0"`, 0, "modes.toml:4:17: train.max_grad_norm: max_grad_norm must be a number, not a string"},
		{"max_grad_norm = true", 0, "modes.toml:4:17: train.max_grad_norm: max_grad_norm must be a number"},
		{"max_grad_nrom = 1.0", 0, "max_grad_norm"}, // the unknown key's suggestion
	} {
		m, err := loadTrain(t, c.train)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.train, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.train, err)
		}
		if m.Train.MaxGradNorm != c.want {
			t.Errorf("%q: MaxGradNorm = %v, want %v", c.train, m.Train.MaxGradNorm, c.want)
		}
	}
}
