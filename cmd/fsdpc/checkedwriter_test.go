package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullWriter accepts its first ok bytes and then fails as a full disk does.
type fullWriter struct {
	ok int
}

func (w *fullWriter) Write(p []byte) (int, error) {
	if len(p) <= w.ok {
		w.ok -= len(p)
		return len(p), nil
	}
	n := w.ok
	w.ok = 0
	return n, syscall.ENOSPC
}

// TestOutputErrorsExitNonZero: every command whose standard output or
// error cannot be written exits non-zero (2 for diff, whose 1 means
// "different") and says so, though its work succeeded.
func TestOutputErrorsExitNonZero(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plan.bin")
	if code, _, errOut := runCLI("plan", "-o", bin, "gpt2-124m"); code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut)
	}
	cases := []struct {
		name string
		args []string
	}{
		{"help", []string{"help"}},
		{"version", []string{"--version"}},
		{"inspect", []string{"inspect", "gpt2-124m"}},
		{"import", []string{"import", "hf", llamaConfig}},
		{"zoo", []string{"zoo"}},
		{"plan", []string{"plan", "-o", filepath.Join(dir, "p2.bin"), "gpt2-124m"}},
		{"plan -d help", []string{"plan", "-d", "help"}},
		{"fit", []string{"fit", "-checkpointing", "full", "-max-micro-batch", "4", "-max-seq", "2048", "gpt2-124m"}},
		{"show", []string{"show", bin}},
		{"devices", []string{"devices"}},
		{"sim", []string{"sim", bin}},
		{"report", []string{"report", "-o", filepath.Join(dir, "r.html"), bin}},
		{"verify", []string{"verify", bin}},
		{"diff", []string{"diff", bin, "llama3-8b"}},
		{"checkpoint", []string{"checkpoint", "--async", bin}},
		{"reshard", []string{"reshard", bin, "gpt2-124m"}},
		{"textconv", []string{"textconv", bin}},
		{"run", []string{"run", "--scale", "64", bin}},
		{"emit", []string{"emit", "torch", "--model", "gpt2-124m"}},
		{"export", []string{"export", bin}},
		{"completion", []string{"completion", "bash"}},
		{"calibrate", []string{"calibrate", "-fit", "max_efficiency", "-gpu", "a100-80gb", "../../calibrate/published-runs.csv"}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.args[0]] = true
	}
	for name := range commands {
		if !covered[name] {
			t.Errorf("command %s has no case here", name)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var good, errOut bytes.Buffer
			okCode := run(c.args, &good, &errOut)
			if c.args[0] == "devices" && okCode != 0 {
				t.Skipf("no GPU to list: %s", errOut.String())
			}
			if okCode > 1 || okCode == 1 && troubleCode[c.args[0]] == 0 || good.Len() == 0 {
				t.Fatalf("with a working stdout: exit %d, %d bytes out; stderr:\n%s", okCode, good.Len(), errOut.String())
			}
			want := 1
			if code, ok := troubleCode[c.args[0]]; ok {
				want = code
			}
			// Failing at once, and after part of the output.
			for _, ok := range []int{0, good.Len() / 2} {
				errOut.Reset()
				code := run(c.args, &fullWriter{ok: ok}, &errOut)
				if code != want || !strings.Contains(errOut.String(), "fsdpc: writing standard output: "+syscall.ENOSPC.Error()) {
					t.Errorf("stdout full after %d bytes: exit %d, stderr:\n%s\nwant exit %d and the write error", ok, code, errOut.String(), want)
				}
			}
		})
	}
}

// TestStderrErrorsExitNonZero: a command that succeeds but cannot write
// its standard error (run's progress) exits 1.
func TestStderrErrorsExitNonZero(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"run", "--scale", "64", "gpt2-124m"}, &out, &fullWriter{}); code != 1 {
		t.Errorf("run with stderr full: exit %d, want 1", code)
	}
	if code := run([]string{"run", "--scale", "64", "gpt2-124m"}, &out, &bytes.Buffer{}); code != 0 {
		t.Errorf("run with stderr working: exit %d, want 0", code)
	}
}

func TestCheckedWriterLatches(t *testing.T) {
	w := &checkedWriter{w: &fullWriter{ok: 3}}
	if n, err := w.Write([]byte("abcdef")); n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("first write: %d, %v", n, err)
	}
	if n, err := w.Write([]byte("x")); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a write after the error: %d, %v; want 0 and the first error", n, err)
	}
	if !errors.Is(w.Err(), syscall.ENOSPC) {
		t.Errorf("Err() = %v", w.Err())
	}
}
