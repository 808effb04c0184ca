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
