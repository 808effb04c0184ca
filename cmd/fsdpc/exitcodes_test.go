package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
)

// TestExitCodesDocumented: docs/architecture.md's table of exit codes is
// what the commands return: each row's code is produced by a command of
// that kind, and no documented code is left untried.
func TestExitCodesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[int]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \| `).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[1])
		documented[n] = true
	}

	dir := t.TempDir()
	a, c := filepath.Join(dir, "a.bin"), filepath.Join(dir, "c.bin")
	if code, _, errOut := runCLI("plan", "-o", a, "gpt2-124m"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("plan", "-o", c, "llama3-8b"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		code int
		args []string
	}{
		{0, []string{"show", a}},
		{0, []string{"diff", a, a}},
		{1, []string{"plan", bad}},
		{1, []string{"diff", a, c}},
		{2, []string{"plan", "-no-such-flag", a}},
		{2, []string{"diff", a, filepath.Join(dir, "missing.bin")}},
		{3, []string{"sim", "-fail-if", "step>0s", a}},
	}
	tried := map[int]bool{}
	for _, tc := range cases {
		name := tc.args[0]
		for _, a := range tc.args[1:] {
			name += " " + filepath.Base(a)
		}
		t.Run(name, func(t *testing.T) {
			code, _, errOut := runCLI(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, errOut)
			}
			if !documented[code] {
				t.Errorf("exit %d is not in docs/architecture.md's table", code)
			}
		})
		tried[tc.code] = true
	}
	// Interrupted writes exit 128 + the signal: signal_test.go sends both
	// to a real fsdpc in the middle of a write.
	tried[128+int(syscall.SIGINT)], tried[128+int(syscall.SIGTERM)] = true, true
	for code := range documented {
		if !tried[code] {
			t.Errorf("docs/architecture.md documents exit %d, which this test does not produce", code)
		}
	}
	if len(documented) < 6 {
		t.Errorf("only %d exit codes found in docs/architecture.md's table", len(documented))
	}
}
