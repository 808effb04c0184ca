package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestCalibrate(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI("calibrate", "-fit", "max_efficiency", "-gpu", "a100-80gb", "-o", dir, "../../calibrate/published-runs.csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"a100-80gb: 16 runs", "max_efficiency", "S3-L3-70B", "wrote "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	profile, err := os.ReadFile(filepath.Join(dir, "a100-80gb.profile.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(profile), "[profile]") || !strings.Contains(string(profile), "max_efficiency = 0.8") {
		t.Errorf("profile:\n%s", profile)
	}
	// A model file names the profile in [cluster]; the plan carries it
	// and the simulator uses it.
	src, err := os.ReadFile("../../plans/llama3-8b.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), `gpu = "h100-sxm"`, `gpu = "a100-80gb"`, 1)
	plain := filepath.Join(dir, "plain.toml")
	named := filepath.Join(dir, "named.toml")
	if err := os.WriteFile(plain, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	withProfile := strings.Replace(text, "[cluster]\n", "[cluster]\nprofile = \"a100-80gb.profile.toml\"\n", 1)
	withProfile = strings.Replace(withProfile, "max_efficiency", "max_efficiency", 1)
	if err := os.WriteFile(named, []byte(withProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	// Make the profile's GEMM efficiency differ from the built-in one.
	slow := regexp.MustCompile(`max_efficiency = [0-9.]+`).ReplaceAllString(string(profile), "max_efficiency = 0.4")
	if err := os.WriteFile(filepath.Join(dir, "a100-80gb.profile.toml"), []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	step := func(model string) string {
		code, out, errOut := runCLI("plan", "-o", filepath.Join(dir, "p.bin"), model)
		if code != 0 {
			t.Fatalf("plan %s: exit %d: %s", model, code, errOut)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "predicted per rank: step") {
				return l
			}
		}
		t.Fatalf("no prediction in:\n%s", out)
		return ""
	}
	if a, b := step(plain), step(named); a == b {
		t.Errorf("the profile changed nothing: %s", a)
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

// TestCalibrateRefusesUnphysicalFit: the default three-parameter fit
// pushes a parameter to the edge of its physical range on the calibration
// set (the runs disagree with the model elsewhere): calibrate says so and
// -o writes no profile.
func TestCalibrateRefusesUnphysicalFit(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI("calibrate", "-o", dir, "../../calibrate/published-runs.csv")
	if code != 1 || !strings.Contains(errOut, "no profile written") || !strings.Contains(out, "at the edge of its physical range") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote %d files", len(entries))
	}
}
