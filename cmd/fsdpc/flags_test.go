package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// Every command's -h prints its usage and exits 0; none treats -h as a file.
func TestHelpExitsZero(t *testing.T) {
	for name := range commands {
		for _, h := range []string{"-h", "--help"} {
			args := []string{name, h}
			if name == "import" {
				args = []string{name, "hf", h}
			}
			code, _, stderr := runCLI(args...)
			if code != 0 {
				t.Errorf("fsdpc %s: exit code %d, want 0\n%s", strings.Join(args, " "), code, stderr)
			}
			if strings.Contains(stderr, "no such file") {
				t.Errorf("fsdpc %s: took -h as a file:\n%s", strings.Join(args, " "), stderr)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		code, stdout, _ := runCLI(arg)
		if code != 0 {
			t.Errorf("fsdpc %s: exit code %d, want 0", arg, code)
		}
		for _, want := range []string{"fsdpc ", fmt.Sprintf("plan format %d", schedule.FormatVersion), "semantics " + schedule.Semantics} {
			if !strings.Contains(stdout, want) {
				t.Errorf("fsdpc %s: output lacks %q:\n%s", arg, want, stdout)
			}
		}
	}
}

// Flags may follow the positional arguments; a boolean flag never takes the
// next argument as its value.
func TestReorderFlags(t *testing.T) {
	fl := flag.NewFlagSet("t", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.String("backend", "host", "")
	fl.Bool("virtual", false, "")
	scale := fl.Int("scale", 1, "")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"plan.bin", "--backend", "cuda", "--virtual", "--scale", "16"}, []string{"--backend", "cuda", "--virtual", "--scale", "16", "plan.bin"}},
		{[]string{"--virtual", "plan.bin"}, []string{"--virtual", "plan.bin"}},
		{[]string{"plan.bin", "--scale=4", "--virtual=true"}, []string{"--scale=4", "--virtual=true", "plan.bin"}},
		{[]string{"--", "-odd-name.bin"}, []string{"-odd-name.bin"}},
	} {
		if got := reorderFlags(fl, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("reorderFlags(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
	if code, ok := parseFlags(fl, []string{"plan.bin", "--backend", "cuda", "--virtual", "--scale", "16"}); !ok {
		t.Fatalf("parseFlags: code %d", code)
	}
	if *scale != 16 || fl.NArg() != 1 || fl.Arg(0) != "plan.bin" {
		t.Errorf("parsed scale %d, args %q", *scale, fl.Args())
	}
}

// A command that takes a plan also takes a model file or zoo name and
// compiles it on the fly, as diff does.
func TestPlanCommandsTakeZooNames(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "llama3-8b"},
		{"verify", "llama3-8b"},
		{"show", "llama3-8b"},
	} {
		if code, _, stderr := runCLI(args...); code != 0 {
			t.Errorf("fsdpc %s: exit code %d\n%s", strings.Join(args, " "), code, stderr)
		}
	}
	code, _, stderr := runCLI("sim", "no-such-model")
	if code != 1 || !strings.Contains(stderr, "no built-in model") {
		t.Errorf("fsdpc sim no-such-model: exit %d, stderr %q", code, stderr)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, stdout, stderr := runCLI("completion", shell)
		if code != 0 || !strings.Contains(stdout, "plan") || !strings.Contains(stdout, "llama3-8b") {
			t.Errorf("fsdpc completion %s: exit %d\n%s%s", shell, code, stdout, stderr)
		}
	}
	if code, _, stderr := runCLI("completion", "tcsh"); code != 2 || !strings.Contains(stderr, `unknown shell "tcsh"`) {
		t.Errorf("fsdpc completion tcsh: exit %d, %q", code, stderr)
	}
}
