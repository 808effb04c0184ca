package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/torchgen"
)

// The export names the plan by its file's SHA-256, needs the model of a
// plan that is not a zoo model's, and shrinks the plan and the model
// together with --scale.
func TestExport(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tiny.bin")
	model := filepath.Join("testdata", "json", "tiny.toml")
	if code, _, errOut := runCLI("plan", model, "-o", bin); code != 0 {
		t.Fatal(errOut)
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	read := func(args ...string) torchgen.Export {
		t.Helper()
		code, out, errOut := runCLI(append([]string{"export"}, args...)...)
		if code != 0 {
			t.Fatalf("export %v: exit %d: %s", args, code, errOut)
		}
		var e torchgen.Export
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := read("-model", model, bin)
	if e.PlanSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("plan_sha256 %s, the file's %x", e.PlanSHA256, sum)
	}
	s := read("-model", model, "-scale", "8", bin)
	if s.Scale != 8 || s.PlanSHA256 == e.PlanSHA256 {
		t.Errorf("scaled: scale %d, sha %s (unscaled %s)", s.Scale, s.PlanSHA256, e.PlanSHA256)
	}
	// 1000 rows over 2 ranks, 500 each, become 63 each (executor.Scale
	// keeps every rank's chunk full); 64 columns become 8.
	if got, want := s.Parameters[0].Shape, []int64{126, 8}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("scaled embedding %v, want %v", got, want)
	}
	if len(s.Collectives) != len(e.Collectives) || s.Collectives[0].Bytes >= e.Collectives[0].Bytes {
		t.Errorf("scaled collectives: %d (%d bytes first), unscaled %d (%d)", len(s.Collectives), s.Collectives[0].Bytes, len(e.Collectives), e.Collectives[0].Bytes)
	}
	code, _, errOut := runCLI("export", bin)
	if code != 1 || !strings.Contains(errOut, "--model") {
		t.Errorf("a plan of no zoo model without --model: exit %d, %s", code, errOut)
	}
	code, _, errOut = runCLI("export", "-model", filepath.Join("testdata", "json", "tiny4.toml"), bin)
	if code != 1 || !strings.Contains(errOut, "another file") {
		t.Errorf("the wrong model: exit %d, %s", code, errOut)
	}
}
