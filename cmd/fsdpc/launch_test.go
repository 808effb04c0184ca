package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEmitLaunch(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "p.bin")
	if code, _, errOut := runCLI("plan", "-o", plan, "gpt2-124m"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	out := filepath.Join(dir, "launch.sh")
	code, _, errOut := runCLI("emit", "launch", "--engine", "torchrun", plan, "--script", "train.py", "-o", out, "--", "--lr", "3e-4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The export's default name is the plan's with .json; the program's
	// arguments follow --.
	if want := "-m fsdpc preflight " + filepath.Join(dir, "p.json") + " train.py --lr 3e-4\n"; !strings.Contains(string(text), want) {
		t.Errorf("launch file lacks %q:\n%s", want, text)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--engine", "mpi", plan, "--script", "t.py"}, 2, `--engine "mpi"`},
		{[]string{"--engine", "torchrun", plan}, 2, "usage"},
		{[]string{"--engine", "kubernetes", plan, "--script", "t.py"}, 2, "--image"},
		{[]string{"--engine", "slurm", plan, "--script", "t.py", "--name", "Bad Name"}, 1, `"Bad Name"`},
		{[]string{"--engine", "slurm", filepath.Join(dir, "none.bin"), "--script", "t.py"}, 1, "none.bin"},
		{[]string{"--engine", "slurm", plan, "--script", "t.py", "-o", plan}, 1, "p.bin"},
	} {
		code, _, errOut := runCLI(append([]string{"emit", "launch"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("emit launch %q: exit %d %q, want %d naming %s", c.args, code, errOut, c.code, c.want)
		}
	}
}
