package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyUnitRuns (issue 28, M6): a root unit that manages no
// parameters (docs/semantics.md D13: FSDP2 keeps no parameter group for
// it) plans, verifies and runs; a model with no parameters at all is
// refused by plan, saying so.
func TestEmptyUnitRuns(t *testing.T) {
	dir := t.TempDir()
	const head = "[model]\ndtype = \"fp32\"\n[train]\nseq_len = 4\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n"
	empty := head + `[policy]
units = ["act", "lin"]
[[module]]
name = "act"
flops_fwd = 1000
flops_bwd = 2000
activation_bytes = 64
[[module]]
name = "lin"
kind = "linear"
in = 8
out = 8
`
	model, plan := filepath.Join(dir, "empty.toml"), filepath.Join(dir, "empty.bin")
	os.WriteFile(model, []byte(empty), 0o644)
	for _, args := range [][]string{{"plan", "-o", plan, model}, {"verify", plan}, {"run", plan}} {
		if code, out, errOut := runCLI(args...); code != 0 {
			t.Errorf("%s: exit %d\n%s%s", args[0], code, out, errOut)
		}
	}
	none := head + "[[module]]\nname = \"act\"\nflops_fwd = 1000\nflops_bwd = 2000\nactivation_bytes = 64\n"
	os.WriteFile(model, []byte(none), 0o644)
	if code, _, errOut := runCLI("plan", "-o", filepath.Join(dir, "none.bin"), model); code != 1 || !strings.Contains(errOut, "the model has no parameters") {
		t.Errorf("a model without parameters: exit %d, %q", code, errOut)
	}
}
