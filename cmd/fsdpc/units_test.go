package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		err  string
	}{
		{"15T", 15e12, ""},
		{"300B", 300e9, ""},
		{"2.5G", 2.5e9, ""},
		{"2M", 2e6, ""},
		{"500k", 500e3, ""},
		{"2.5e12", 2.5e12, ""},
		{"1000000", 1e6, ""},
		{" 15T tokens", 15e12, ""},
		{"15X", 0, `unknown suffix "X"`},
		{"15TB", 0, `unknown suffix "TB"`},
		{"T", 0, "not a positive number"},
		{"", 0, "not a positive number"},
		{"-5T", 0, "not a positive number"},
		{"0", 0, "not a positive number"},
		{"NaN", 0, `unknown suffix "N"`},
		{"1e400", 0, "not a positive number"},
		{"1e18", 1e18, ""},
		{"2e18", 0, "more than 1e+18 tokens"},
		{"1e10T", 0, "more than 1e+18 tokens"},
	} {
		got, err := parseTokens(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseTokens(%q) = %g, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseTokens(%q) = %g, %v; want %g", c.in, got, err, c.want)
		}
	}
}

// TestUsersUnits: plan and sim print the step as the sum of its parts,
// tokens/s per GPU, MFU and HFU, and the time to train; sim finds the
// model of a plan made from a built-in one, or takes -model.
func TestUsersUnits(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plan.bin")
	code, out, errOut := runCLI("plan", "llama3-8b", "-o", bin, "--train-tokens", "15T")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	for _, re := range []string{
		`\n  step 1\.\d\d s = compute 1\.\d\d s \+ overlap slowdown [\d.]+ ms \+ optimizer [\d.]+ ms \+ FSDP copies [\d.]+ ms \+ exposed communication [\d.]+ ms`,
		`throughput: [\d,]+ tokens/s per GPU; 65,536 tokens per step \(8,192 per GPU\)`,
		`MFU \d\d\.\d% \([\d.]+ TFLOP/s per GPU, 57\.91 GFLOP per token\), HFU \d\d\.\d%`,
		`bf16 dense 989\.4 TFLOP/s peak`,
		`training on 15T tokens: [\d.]+ days \([\d.]+ years\) on 8 GPUs \([\d,]+ GPU-hours\)`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("plan's summary does not match %s:\n%s", re, out)
		}
	}
	// sim of the file finds the built-in model by its hash.
	code, out, errOut = runCLI("sim", bin)
	if code != 0 || !strings.Contains(out, "57.91 GFLOP per token") {
		t.Errorf("sim plan.bin: exit %d, no MFU:\n%s%s", code, out, errOut)
	}
	// A plan from a file of the user's carries its FLOPs per token (format
	// 8): MFU needs no -model; one given must be the file the plan was
	// made from.
	src, err := os.ReadFile("../../plans/gpt2-124m.toml")
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "mine.toml")
	os.WriteFile(model, append(src, "\n# mine\n"...), 0o644)
	mine := filepath.Join(dir, "mine.bin")
	if code, _, errOut := runCLI("plan", model, "-o", mine); code != 0 {
		t.Fatalf("plan mine: exit %d: %s", code, errOut)
	}
	if code, out, _ := runCLI("sim", mine); code != 0 || !strings.Contains(out, "MFU ") || strings.Contains(out, "MFU needs") {
		t.Errorf("sim mine.bin: exit %d, no MFU from the plan alone:\n%s", code, out)
	}
	if code, out, _ := runCLI("sim", mine, "-model", model); code != 0 || !strings.Contains(out, "MFU ") || strings.Contains(out, "MFU needs") {
		t.Errorf("sim mine.bin -model: exit %d, no MFU:\n%s", code, out)
	}
	if code, _, errOut := runCLI("sim", mine, "-model", "gpt2-124m"); code != 1 || !strings.Contains(errOut, "the plan was made from another file") {
		t.Errorf("sim -model of another file: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI("sim", "gpt2-124m", "-model", model); code != 1 || !strings.Contains(errOut, "-model is for a plan file") {
		t.Errorf("sim model -model: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{{"plan", "-o", filepath.Join(dir, "x.bin")}, {"sim"}} {
		args = append(args, "gpt2-124m", "-train-tokens", "lots")
		if code, _, errOut := runCLI(args...); code != 1 || !strings.Contains(errOut, `-train-tokens "lots"`) {
			t.Errorf("%s: exit %d, %q", args, code, errOut)
		}
	}
}
