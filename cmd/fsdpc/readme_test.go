package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/calibrate"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
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

// TestREADMETorchtitanFigures keeps the README's table of torchtitan's
// published Llama 3 8B runs true: each predicted figure and error is what
// `fsdpc plan -json` gives for plans/llama3-8b-torchtitan.toml (the second
// row with compile = true), and each row, published and predicted, is what
// bench/fidelity prints for the same run in calibrate/memory-runs.csv.
func TestREADMETorchtitanFigures(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "<!-- torchtitan-figures:")
	if !ok {
		t.Fatal("the README has no torchtitan-figures table")
	}
	rowRE := regexp.MustCompile(`(?m)^\| (.+?) \| ([\d,]+) \| ([\d,]+) \| ([+-][\d.]+%) \| ([\d.]+) GiB \| ([\d.]+) GiB \| ([+-][\d.]+%) \|$`)
	rows := rowRE.FindAllStringSubmatch(after, 2)
	if len(rows) != 2 {
		t.Fatalf("found %d rows in the README's torchtitan table, want 2", len(rows))
	}
	src, _, ok := plans.Source("llama3-8b-torchtitan")
	if !ok {
		t.Fatal("no zoo model llama3-8b-torchtitan")
	}
	fidelity := fidelityRows(t)
	dir := t.TempDir()
	for i, r := range []struct{ id, edit string }{{"M1-TT-8g-eager", ""}, {"M2-TT-8g-compile", "compile = true"}} {
		text := string(src)
		if r.edit != "" {
			if !strings.Contains(text, "\ncompile = false\n") {
				t.Fatal("llama3-8b-torchtitan.toml does not set compile = false")
			}
			text = strings.Replace(text, "\ncompile = false\n", "\n"+r.edit+"\n", 1)
		}
		model := filepath.Join(dir, fmt.Sprintf("run%d.toml", i))
		if err := os.WriteFile(model, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI("plan", model, "-o", filepath.Join(dir, fmt.Sprintf("run%d.bin", i)), "-json")
		if code != 0 {
			t.Fatalf("fsdpc plan: exit %d: %s", code, errOut)
		}
		var doc struct {
			Metrics struct {
				TPS      float64 `json:"tokens_per_second_per_gpu"`
				Reserved int64   `json:"reserved"`
			} `json:"metrics"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		row := rows[i]
		pubTPS, _ := strconv.ParseFloat(strings.ReplaceAll(row[2], ",", ""), 64)
		pubGiB, _ := strconv.ParseFloat(row[5], 64)
		predGiB := float64(doc.Metrics.Reserved) / (1 << 30)
		want := []string{row[1],
			row[2],
			ir.FormatCount(int64(math.Round(doc.Metrics.TPS))),
			fmt.Sprintf("%+.1f%%", (doc.Metrics.TPS-pubTPS)/pubTPS*100),
			row[5],
			fmt.Sprintf("%.1f", predGiB),
			fmt.Sprintf("%+.1f%%", (predGiB-pubGiB)/pubGiB*100)}
		if got := row[1:]; !slices.Equal(got, want) {
			t.Errorf("README row %d is %q; fsdpc plan predicts %q", i+1, got, want)
		}
		// bench/fidelity's row: measured and predicted tokens/s, error,
		// measured and predicted GiB, error.
		f, ok := fidelity[r.id]
		if !ok {
			t.Fatalf("bench/fidelity prints no row %s", r.id)
		}
		readme := []string{strings.ReplaceAll(row[2], ",", ""), strings.ReplaceAll(row[3], ",", ""), row[4], row[5] + " reserved", row[6], row[7]}
		if !slices.Equal(f, readme) {
			t.Errorf("README row %d %q disagrees with bench/fidelity's %s row %q", i+1, readme, r.id, f)
		}
	}
}

// fidelityRows runs bench/fidelity's comparison (calibrate's Load,
// Predict and WriteTable) over torchtitan's two 8-GPU rows of
// calibrate/memory-runs.csv and returns each row's printed figures:
// measured and predicted tokens/s, error, measured and predicted memory,
// error.
func fidelityRows(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../../calibrate/memory-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	csv := lines[0]
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "M1-TT-8g-eager,") || strings.HasPrefix(l, "M2-TT-8g-compile,") {
			csv += l
		}
	}
	set, err := calibrate.Load("memory-runs.csv", strings.NewReader(csv), nil)
	if err != nil {
		t.Fatal(err)
	}
	results, err := set.Predict(nil)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	calibrate.WriteTable(&table, results, set.Skipped)
	out := map[string][]string{}
	for _, l := range strings.Split(table.String(), "\n") {
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if len(cells) == 12 && strings.HasPrefix(cells[0], "M") {
			out[cells[0]] = cells[6:]
		}
	}
	return out
}
