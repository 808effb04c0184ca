package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFOInputRefused: a FIFO that no writer ever opens, given as any
// command's model, plan, config, CSV or log, is refused at once with an
// error naming it; before, every command blocked in open(2) for ever.
func TestFIFOInputRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "input")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "plan.bin")
	if code, _, errOut := runCLI("plan", "-o", bin, "gpt2-124m"); code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut)
	}
	for _, args := range [][]string{
		{"inspect", fifo},
		{"plan", "-o", filepath.Join(dir, "p.bin"), fifo},
		{"show", fifo},
		{"sim", fifo},
		{"verify", fifo},
		{"diff", fifo, "gpt2-124m"},
		{"diff", bin, fifo},
		{"report", "-o", filepath.Join(dir, "r.html"), fifo},
		{"run", "--scale", "64", fifo},
		{"run", "--backend", "torch", "--model", fifo, bin},
		{"emit", "torch", "--model", fifo},
		{"emit", "torch", "--model", "gpt2-124m", fifo},
		{"import", "hf", fifo},
		{"calibrate", fifo},
		{"calibrate", fifo + "=" + bin},
		{"calibrate", "../../plans/gpt2-124m.toml=" + fifo},
		{"textconv", fifo},
	} {
		name := strings.Join(args, " ")
		type result struct {
			code   int
			stderr string
		}
		done := make(chan result, 1)
		go func() {
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			done <- result{code, stderr.String()}
		}()
		select {
		case r := <-done:
			if r.code == 0 || !strings.Contains(r.stderr, fifo+" is a named pipe (FIFO)") {
				t.Errorf("fsdpc %s: exit %d, stderr %q; want an error naming the FIFO", name, r.code, r.stderr)
			}
		case <-time.After(time.Minute): // a hang guard, not a timing check
			t.Fatalf("fsdpc %s: still blocked after a minute reading a FIFO", name)
		}
	}
}
