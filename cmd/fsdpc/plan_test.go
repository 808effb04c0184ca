package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// runCLI runs the command line as main does and returns the exit code and
// what was written to stdout and stderr.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPlanAndShow(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plan.bin")
	code, out, errOut := runCLI("plan", "llama3-8b", "-o", bin)
	if code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut)
	}
	for _, want := range []string{"plan llama3-8b -> " + bin, "33 groups: (root), layers.0 … layers.31", "reshard_after_forward: false ×1, true ×32"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// show -full reads plan.bin back: its text must be the reviewed golden
	// plan (plain show folds repeated blocks; TestShowFolds).
	code, text, errOut := runCLI("show", "-full", bin)
	if code != 0 {
		t.Fatalf("show exited %d: %s", code, errOut)
	}
	golden, err := os.ReadFile("../../plans/llama3-8b.plan.txt")
	if err != nil {
		t.Fatal(err)
	}
	// The plan's text is the golden; the checkpoint section follows it.
	plan, ckpt, ok := strings.Cut(text, "\ncheckpoint (torch.distributed.checkpoint, 8 ranks)\n")
	if !ok || plan != string(golden) {
		t.Errorf("show of the written plan differs from plans/llama3-8b.plan.txt, or has no checkpoint section")
	}
	if !strings.Contains(ckpt, "files      1 per rank (__<rank>_0.distcp), and .metadata on rank 0") {
		t.Errorf("show's checkpoint section lacks the files:\n%s", ckpt)
	}
	code, js, _ := runCLI("show", "--json", bin)
	var doc struct {
		Schema string `json:"schema"`
		Plan   struct {
			Groups []any `json:"groups"`
		} `json:"plan"`
	}
	if code != 0 || json.Unmarshal([]byte(js), &doc) != nil || doc.Schema != "fsdpc/v1" || len(doc.Plan.Groups) != 33 {
		t.Errorf("show --json: exit %d, not a JSON plan", code)
	}
}

func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[train]\nseq_len = 0\n"), 0o644)
	out := filepath.Join(dir, "out.bin")
	if code, _, errOut := runCLI("plan", "-o", out, bad); code != 1 || !strings.Contains(errOut, "bad.toml:2:") {
		t.Errorf("bad model: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed plan left an output file")
	}
	if code, _, errOut := runCLI("plan", "-o", filepath.Join(dir, "no", "such", "dir", "p.bin"), "gpt2-124m"); code != 1 || errOut == "" {
		t.Errorf("unwritable output: exit %d", code)
	}
	if code, _, _ := runCLI("plan"); code != 2 {
		t.Errorf("no argument: exit %d, want 2", code)
	}
	if code, _, errOut := runCLI("plan", "-d", "nosuchpass", "gpt2-124m"); code != 2 || !strings.Contains(errOut, "layout") {
		t.Errorf("unknown pass: exit %d, %q", code, errOut)
	}
	// show refuses what is not a plan, naming the problem.
	if code, _, errOut := runCLI("show", bad); code != 1 || errOut == "" {
		t.Errorf("show of a TOML file: exit %d, %q", code, errOut)
	}
}

func TestPlanDump(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := runCLI("plan", "-d", "help")
	if code != 0 || !strings.Contains(out, "layout") || !strings.Contains(out, "emit") {
		t.Errorf("-d help: %d %q", code, out)
	}
	code, out, errOut := runCLI("plan", "-d", "units", "-o", filepath.Join(dir, "p.bin"), "gpt2-124m")
	if code != 0 || !strings.Contains(out, "=== after pass units") || !strings.Contains(out, "unit transformer.h.0") {
		t.Errorf("-d units: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestSimAndVerify(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plan.bin")
	if code, _, errOut := runCLI("plan", "-o", bin, "gpt2-124m"); code != 0 {
		t.Fatalf("plan: %s", errOut)
	}
	trace := filepath.Join(dir, "trace.json")
	code, out, errOut := runCLI("sim", bin, "-trace", trace)
	if code != 0 || !strings.Contains(out, "step time") || !strings.Contains(out, "exposed communication") {
		t.Fatalf("sim: exit %d\n%s%s", code, out, errOut)
	}
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Tid  int     `json:"tid"`
			Dur  float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the trace is not JSON: %v", err)
	}
	tracks, counters, spans := map[int]bool{}, 0, 0
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "X":
			spans++
			tracks[e.Tid] = true
		case "C":
			counters++
		}
	}
	if spans == 0 || counters == 0 || len(tracks) < 4 {
		t.Errorf("trace: %d spans on %d tracks, %d memory counters", spans, len(tracks), counters)
	}
	if code, out, _ := runCLI("verify", bin); code != 0 || !strings.Contains(out, "safe") {
		t.Errorf("verify: exit %d %s", code, out)
	}
	// A damaged file is refused by name.
	b, _ := os.ReadFile(bin)
	b[len(b)/2] ^= 0xff
	bad := filepath.Join(dir, "bad.bin")
	os.WriteFile(bad, b, 0o644)
	if code, _, errOut := runCLI("verify", bad); code != 1 || !strings.Contains(errOut, "checksum") {
		t.Errorf("verify of a damaged plan: exit %d, %q", code, errOut)
	}
}

// TestPlanSemantics: -semantics names the FSDP version a CI job expects;
// any other than the one fsdpc models is refused as bad usage.
func TestPlanSemantics(t *testing.T) {
	out := filepath.Join(t.TempDir(), "plan.bin")
	if code, _, errOut := runCLI("plan", "-semantics", schedule.Semantics, "-o", out, "gpt2-124m"); code != 0 {
		t.Fatalf("-semantics %s: exit %d: %s", schedule.Semantics, code, errOut)
	}
	code, _, errOut := runCLI("plan", "-semantics", "torch-fsdp2/2.6", "-o", out, "gpt2-124m")
	if code != 2 || !strings.Contains(errOut, "this fsdpc models "+schedule.Semantics+" only") {
		t.Fatalf("-semantics torch-fsdp2/2.6: exit %d: %s", code, errOut)
	}
}

// TestBudgetWarning: plan warns, on stderr, above 90% of the budget and
// not at or below it.
func TestBudgetWarning(t *testing.T) {
	p := &schedule.Plan{Cluster: schedule.Cluster{MemoryBudget: 100 << 30}}
	for _, tc := range []struct {
		reserved int64
		warn     bool
	}{{50 << 30, false}, {90 << 30, false}, {90<<30 + 1<<20, true}, {100 << 30, true}} {
		got := budgetWarning(p, &schedule.Simulation{PeakReserved: tc.reserved})
		if (got != "") != tc.warn || tc.warn && !strings.Contains(got, "fsdpc fit") {
			t.Errorf("reserved %d of 100 GiB: %q", tc.reserved>>20, got)
		}
	}
	if budgetWarning(&schedule.Plan{}, &schedule.Simulation{PeakReserved: 1}) != "" {
		t.Error("a plan without a budget warned")
	}
}

// TestPlanPassTimes: -d time prints the plan's usual summary on stdout
// and every pass's time on stderr, JSON included.
func TestPlanPassTimes(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "plan.bin")
	for _, args := range [][]string{{"plan", "-d", "time", "-o", bin, "gpt2-124m"}, {"plan", "-d", "time", "-json", "-o", bin, "gpt2-124m"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if !strings.Contains(out, "gpt2-124m") || strings.Contains(out, "=== after pass") {
			t.Errorf("%v: stdout is not the plan's summary:\n%s", args, out)
		}
		for _, want := range []string{"pass", "runs", "share", "\nunits ", "\nemit ", "\npredict "} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, errOut)
			}
		}
	}
}
