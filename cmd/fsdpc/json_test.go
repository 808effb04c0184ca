package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/json/*.json from the current commands")

// TestJSONGolden pins the JSON of every command that writes it, for a
// small model, in the one schema docs/json.md describes.
func TestJSONGolden(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tiny.bin")
	model := filepath.Join("testdata", "json", "tiny.toml")
	other := filepath.Join("testdata", "json", "tiny4.toml")
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"plan", []string{"plan", model, "-o", bin, "-json", "-train-tokens", "1B", "-fail-if", "reserved>1GiB"}, 0},
		{"sim", []string{"sim", bin, "-model", model, "-json"}, 0},
		{"show", []string{"show", bin, "-json"}, 0},
		{"inspect", []string{"inspect", model, "-json"}, 0},
		{"export", []string{"export", bin, "-model", model}, 0},
		{"diff", []string{"diff", model, other, "-format", "json", "-fail-if", "step>+5%", "-fail-if", "reserved>1MiB"}, exitGateFailed},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(c.args...)
		if code != c.code {
			t.Fatalf("%s: exit %d, want %d: %s", strings.Join(c.args, " "), code, c.code, errOut)
		}
		out = strings.ReplaceAll(out, dir, "$TMP")
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%s: not JSON: %v", c.name, err)
		}
		if doc["schema"] != "fsdpc/v1" || doc["command"] != c.name {
			t.Errorf("%s: schema %v, command %v", c.name, doc["schema"], doc["command"])
		}
		noDisplayStrings(t, c.name, doc)
		noNulls(t, c.name, doc)
		path := filepath.Join("testdata", "json", c.name+".json")
		if *update {
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./cmd/fsdpc -run TestJSONGolden -update)", err)
		}
		if !bytes.Equal(want, []byte(out)) {
			t.Errorf("%s -json differs from %s; review, then go test ./cmd/fsdpc -run TestJSONGolden -update", c.name, path)
		}
	}
}

// noDisplayStrings fails on a string that reads like a formatted quantity
// ("1.55 s", "-0.8%", "25.91 GiB"): numbers are numbers in seconds and
// bytes.
func noDisplayStrings(t *testing.T, where string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			noDisplayStrings(t, where+"."+k, x)
		}
	case []any:
		for _, x := range v {
			noDisplayStrings(t, where+"[]", x)
		}
	case string:
		if displayQuantity.MatchString(v) {
			t.Errorf("%s: %q is a display string, not a number", where, v)
		}
	}
}

var displayQuantity = regexp.MustCompile(`^[-+]?[0-9.]+ ?(%|s|ms|µs|us|B|KiB|MiB|GiB|TiB|GB/s|TFLOP/s)$`)

// noNulls fails on a null other than the documented unknown figures
// (MFU without the model; a diagnostic's line and column when it is about
// the whole file, its path when it names no key): empty lists are [].
func noNulls(t *testing.T, where string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if x == nil && !nullable[k] {
				t.Errorf("%s.%s is null", where, k)
			}
			noNulls(t, where+"."+k, x)
		}
	case []any:
		for _, x := range v {
			noNulls(t, where+"[]", x)
		}
	}
}

var nullable = map[string]bool{"model_flops_per_token": true, "model_flops_per_second_per_gpu": true, "mfu": true,
	"line": true, "column": true, "path": true}
