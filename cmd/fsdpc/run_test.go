package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plan.bin")
	if code, _, errOut := runCLI("plan", "gpt2-124m", "-o", bin); code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut)
	}
	code, out, errOut := runCLI("run", bin, "--scale", "64", "--steps", "2")
	if code != 0 {
		t.Fatalf("run exited %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"run gpt2-124m on the host backend: 8 ranks, scale 1/64", "exact", "equal the reference, max error 0", "OK:"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	// Not a terminal: a line per step, no bar.
	if !strings.Contains(errOut, "step 1/2 done") || !strings.Contains(errOut, "step 2/2 done") || strings.Contains(errOut, "\r") {
		t.Errorf("progress on a non-terminal:\n%q", errOut)
	}

	// An impossible world size.
	if code, _, errOut := runCLI("run", bin, "--scale", "64", "--ranks", "3"); code != 1 || !strings.Contains(errOut, "world_size = 3") {
		t.Errorf("--ranks 3: exit %d, %s", code, errOut)
	}
	// Bad usage.
	if code, _, _ := runCLI("run", bin, "--backend", "tpu"); code != 2 {
		t.Errorf("an unknown backend: exit %d", code)
	}
	if code, _, _ := runCLI("run"); code != 2 {
		t.Errorf("no plan: exit %d", code)
	}

	// A corrupt plan.bin, and one from a newer fsdpc.
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), raw...)
	corrupt[len(corrupt)/2] ^= 0x5a
	os.WriteFile(filepath.Join(dir, "corrupt.bin"), corrupt, 0o644)
	if code, _, errOut := runCLI("run", filepath.Join(dir, "corrupt.bin")); code != 1 || !strings.Contains(errOut, "corrupt.bin") {
		t.Errorf("a corrupt plan: exit %d, %s", code, errOut)
	}
	newer := append([]byte(nil), raw...)
	newer[4] = byte(schedule.FormatVersion + 1)
	os.WriteFile(filepath.Join(dir, "newer.bin"), newer, 0o644)
	if code, _, errOut := runCLI("run", filepath.Join(dir, "newer.bin")); code != 1 || !strings.Contains(errOut, "upgrade fsdpc") {
		t.Errorf("a newer plan: exit %d, %s", code, errOut)
	}
}

func TestRunSuggestsScale(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "405b.bin")
	if code, _, errOut := runCLI("plan", "llama3.1-405b", "-o", bin); code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut)
	}
	code, _, errOut := runCLI("run", bin)
	if code != 1 || !strings.Contains(errOut, "512 ranks") || !strings.Contains(errOut, "--scale") {
		t.Errorf("the 405B plan at full size: exit %d, %s", code, errOut)
	}
}

// TestRunRefusesWhatVerifyRefuses: a plan.bin that decodes but that
// verify refuses (forged: a buffer smaller than its layout, so the memory
// verdict is about another plan; or over its memory budget) is not run on
// any backend. The host executor sizes buffers from the layout itself, so
// without the refusal it ran the first one and reported success.
func TestRunRefusesWhatVerifyRefuses(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plan.bin")
	if code, _, errOut := runCLI("plan", "gpt2-124m", "-o", bin); code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut)
	}
	forge := func(name string, f func(p *schedule.Plan)) string {
		p, err := schedule.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		f(p)
		path := filepath.Join(dir, name)
		if err := schedule.WriteFile(path, p); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := map[string]string{
		forge("shrunk.bin", func(p *schedule.Plan) {
			for i := range p.Buffers {
				if p.Buffers[i].Kind == schedule.BufUnsharded {
					p.Buffers[i].Bytes /= 2
					return
				}
			}
		}): "the group's layout makes it",
		forge("over-budget.bin", func(p *schedule.Plan) { p.Cluster.MemoryBudget = 1 << 20 }): "over its budget",
	}
	for path, reason := range cases {
		if code, _, errOut := runCLI("verify", path); code != 1 || !strings.Contains(errOut, reason) {
			t.Errorf("verify %s: exit %d, %s", filepath.Base(path), code, errOut)
		}
		for _, backend := range []string{"host", "cuda", "torch"} {
			args := []string{"run", "--backend", backend, path}
			if backend == "host" {
				args = append(args, "--scale", "64")
			}
			if backend == "torch" {
				args = append(args, "--model", "gpt2-124m")
			}
			if backend == "cuda" {
				args = append(args, "--worker", os.Args[0])
			}
			code, out, errOut := runCLI(args...)
			if code != 1 || !strings.Contains(errOut, "refusing to run a plan that fsdpc verify refuses") || !strings.Contains(errOut, reason) {
				t.Errorf("run --backend %s %s: exit %d\n%s\n%s", backend, filepath.Base(path), code, out, errOut)
			}
		}
	}
}

// --backend torch runs the plan's first step (--scale shrinks it with
// its model): a flag it would ignore is refused, before any plan is read
// or any Python started.
func TestRunTorchRefusesHostFlags(t *testing.T) {
	for _, flag := range [][]string{{"--steps", "2"}, {"--ranks", "8"}} {
		args := append([]string{"run", "--backend", "torch", "--model", "gpt2-124m"}, flag...)
		code, _, errOut := runCLI(append(args, "gpt2-124m")...)
		if code != 2 || !strings.Contains(errOut, "runs the plan's first step") {
			t.Errorf("%v: exit %d, %s", flag, code, errOut)
		}
	}
}

// --accelerate belongs to --backend torch and needs --hf (the transformers
// config accelerate's model is built from); a misuse is refused as bad
// usage before any file is read or any Python started.
func TestRunAccelerateUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--accelerate", "a.yaml"}, "--accelerate is for --backend torch"},
		{[]string{"--backend", "torch", "--hf", "config.json"}, "--hf needs --accelerate"},
		{[]string{"--backend", "torch", "--accelerate", "a.yaml", "--hf", "config.json", "--scale", "2", "--model", "m.toml"}, "--scale does not apply"},
		{[]string{"--backend", "torch", "--accelerate", "a.yaml", "--model", "m.toml"}, "--hf config.json"},
	} {
		code, _, errOut := runCLI(append(append([]string{"run"}, c.args...), "plan.bin")...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %s", c.args, code, errOut)
		}
	}
}
