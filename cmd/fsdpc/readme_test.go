package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMECommands keeps the README true to the CLI: every command its
// table lists answers -h with exit 0, and every complete command it shows
// (the quickstart's, and each `fsdpc …` in its prose that names no
// placeholder) runs and exits 0, in order, in a scratch directory.
func TestREADMECommands(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)

	rows := regexp.MustCompile("(?m)^\\| `fsdpc ([a-z-]+)").FindAllStringSubmatch(readme, -1)
	if len(rows) < 15 {
		t.Fatalf("found %d commands in the README's table; the pattern no longer matches it", len(rows))
	}
	for _, r := range rows {
		cmd := r[1]
		if cmd == "--version" {
			if code, out, errOut := runCLI("--version"); code != 0 || out == "" {
				t.Errorf("fsdpc --version: exit %d, %q %q", code, out, errOut)
			}
			continue
		}
		if code, _, errOut := runCLI(cmd, "-h"); code != 0 {
			t.Errorf("README lists `fsdpc %s`, but `fsdpc %s -h` exits %d: %s", cmd, cmd, code, errOut)
		}
	}

	// Complete commands: the quickstart's `go run ./cmd/fsdpc …` lines and
	// the prose's `fsdpc …` spans without placeholders, shell syntax or
	// flags that need a device.
	var cmds [][]string
	for _, m := range regexp.MustCompile(`(?m)^go run \./cmd/fsdpc ([^#\n]+?)\s*(#|$)`).FindAllStringSubmatch(readme, -1) {
		cmds = append(cmds, strings.Fields(m[1]))
	}
	for _, m := range regexp.MustCompile("`fsdpc ([^`]+)`").FindAllStringSubmatch(readme, -1) {
		fields := strings.Fields(m[1])
		if len(fields) < 2 || strings.ContainsAny(m[1], "|<>[]…") || placeholder(fields) {
			continue // a command's name, a synopsis or shell syntax
		}
		cmds = append(cmds, fields)
	}
	if len(cmds) < 3 {
		t.Fatalf("found %d complete commands in the README; the patterns no longer match it", len(cmds))
	}
	t.Chdir(t.TempDir())
	for _, args := range cmds {
		t.Logf("fsdpc %s", strings.Join(args, " "))
		if code, _, errOut := runCLI(args...); code != 0 {
			t.Errorf("README command `fsdpc %s` exits %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
}

// placeholder reports whether a command names something the reader must
// supply (model.toml, OLD, config.json) rather than a built-in model or a
// file an earlier README command wrote.
func placeholder(args []string) bool {
	for _, a := range args {
		switch {
		case a == "OLD" || a == "NEW" || a == "FILE" || a == "SHELL",
			strings.HasSuffix(a, ".toml"), strings.HasSuffix(a, ".json"), strings.HasSuffix(a, ".log"), strings.HasSuffix(a, ".csv"),
			strings.HasPrefix(a, "--backend") || a == "cuda" || a == "devices":
			return true
		}
	}
	return false
}
