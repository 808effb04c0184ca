package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputNamesUpFront: an output name no write could use fails before
// the work with a message saying why, and two outputs naming one file
// (through ./, or a hard link) are refused.
func TestOutputNamesUpFront(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("a", 250)+".bin")
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	os.WriteFile(filepath.Join(dir, "x.py"), nil, 0o644)
	os.Link(filepath.Join(dir, "x.py"), filepath.Join(dir, "hard.toml"))
	plan := filepath.Join(dir, "p.bin")
	if code, _, errOut := runCLI("plan", "-o", plan, "gpt2-124m"); code != 0 {
		t.Fatal(errOut)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plan", "-o", "", "gpt2-124m"}, 1, "the output file name is empty"},
		{[]string{"plan", "-o", long, "gpt2-124m"}, 1, "the limit is 240"},
		{[]string{"report", "-o", long, plan}, 1, "the limit is 240"},
		{[]string{"sim", "-trace", filepath.Join(dir, "no", "t.json"), plan}, 1, "its directory"},
		{[]string{"calibrate", "-o", file, "../../calibrate/published-runs.csv"}, 1, "is not a directory"},
		{[]string{"emit", "torch", "--model", "gpt2-124m", plan, "-o", filepath.Join(dir, "y.py"), "--torchtitan", dir + "/./y.py"}, 2, "the same file"},
		{[]string{"emit", "torch", "--model", "gpt2-124m", plan, "-o", filepath.Join(dir, "x.py"), "--torchtitan", filepath.Join(dir, "hard.toml")}, 2, "the same file"},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "rename") {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
		if strings.Contains(stdout, "predicted") || strings.Contains(stdout, "runs,") {
			t.Errorf("%q: did the work before refusing its output:\n%s", tc.args, stdout)
		}
	}
}

// TestBadFlagValuesSayWhy: a timeout that is not positive, an unknown
// format, a storage bandwidth outside 1 MB/s … 1 PB/s are usage errors
// that name the flag and what it takes.
func TestBadFlagValuesSayWhy(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--timeout", "0s", "gpt2-124m"}, 2, "--timeout positive"},
		{[]string{"run", "--timeout", "-1s", "gpt2-124m"}, 2, "--timeout positive"},
		{[]string{"diff", "-format", "yaml", "gpt2-124m", "gpt2-124m"}, 2, "the formats are text, markdown and json"},
		{[]string{"reshard", "-format", "yaml", "gpt2-124m", "gpt2-124m"}, 2, "the formats are text, markdown and json"},
		{[]string{"checkpoint", "--storage", "1e-300GB/s", "gpt2-124m"}, 2, "from 1 MB/s to 1 PB/s"},
		{[]string{"checkpoint", "--aggregate", "1e300TB/s", "gpt2-124m"}, 2, "from 1 MB/s to 1 PB/s"},
		{[]string{"reshard", "--storage", "NaNGB/s", "gpt2-124m", "gpt2-124m"}, 0, ""},
	} {
		code, _, stderr := runCLI(tc.args...)
		if tc.want == "" {
			if code == 0 {
				t.Errorf("%q: accepted", tc.args)
			}
			continue
		}
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}
