package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCalibrate(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI("calibrate", "-fit", "max_efficiency", "-gpu", "a100-80gb", "-o", dir, "../../calibrate/published-runs.csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"a100-80gb: 15 runs", "max_efficiency", "S3-L3-70B", "wrote "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	profile, err := os.ReadFile(filepath.Join(dir, "a100-80gb.profile.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(profile), "[profile]") || !strings.Contains(string(profile), "max_efficiency = 0.7") {
		t.Errorf("profile:\n%s", profile)
	}
}

// TestCalibrateBadInput: a broken row is an error naming the row and the
// column, and nothing is written.
func TestCalibrateBadInput(t *testing.T) {
	src, err := os.ReadFile("../../calibrate/published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(src), "\n", 3)
	bad := lines[0] + "\n" + strings.Replace(lines[1], ",8192,2904,", ",8192,fast,", 1) + "\n"
	dir := t.TempDir()
	csv := filepath.Join(dir, "runs.csv")
	if err := os.WriteFile(csv, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("calibrate", "-o", dir, csv)
	if code == 0 || !strings.Contains(errOut, "(row S3-L3-8B-a), column tps_per_gpu") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("a failed calibration left files behind: %v", entries)
	}
}
