//go:build !race

// (The race detector's shadow memory needs more address space than any
// useful limit leaves.)

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRunUnderAddressSpaceLimit: under ulimit -v, fsdpc run sizes itself
// from RLIMIT_AS and refuses with its own message, naming the limit and a
// scale that fits, instead of dying in the Go runtime's out-of-memory dump
// (it sized itself from /proc/meminfo alone: gpt2-124m at scale 8, about
// 2.1 GiB, under a 1.9 GiB limit died with "fatal error: out of memory").
func TestRunUnderAddressSpaceLimit(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set the limit with")
	}
	cmd := exec.Command("sh", "-c", `ulimit -v 2000000 && exec "$0" "$@"`, os.Args[0], "run", "--scale", "8", "gpt2-124m")
	cmd.Env = append(os.Environ(), "FSDPC_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %v (want 1):\n%s", err, text)
	}
	for _, want := range []string{"needs about", "RLIMIT_AS, ulimit -v", "shrink the tensors with --scale"} {
		if !strings.Contains(text, want) {
			t.Errorf("the message lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "fatal error") || strings.Contains(text, "goroutine") {
		t.Errorf("the Go runtime's dump instead of a message:\n%s", text)
	}
}
