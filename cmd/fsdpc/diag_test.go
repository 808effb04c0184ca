package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanDiagnostics: plan prints the planner's warnings and errors
// placed in the model file on stderr, a warning once even when the front
// end gave it too, and -json carries them under diagnostics.
func TestPlanDiagnostics(t *testing.T) {
	dir := t.TempDir()
	const head = "[train]\nseq_len = 4\ncheckpointing = \"full\"\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n" // 1-6
	warn := filepath.Join(dir, "warn.toml")
	if err := os.WriteFile(warn, []byte(head+
		"[[policy.override]]\nmatch = \"l\"\nreshard_after_forward = 1\n"+ // 7-9
		"[policy]\nunits = [\"l\"]\n"+ // 10-11
		"[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("plan", "-o", filepath.Join(dir, "w.bin"), warn)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	wantWarn := warn + ":9:1: warning: group l: reshard_after_forward = 1 keeps the whole unsharded parameters"
	if !strings.Contains(errOut, wantWarn) || strings.Contains(out, "reshard_after_forward = 1") {
		t.Errorf("stderr:\n%s\nstdout:\n%s\nwant on stderr only: %s", errOut, out, wantWarn)
	}
	if n := strings.Count(errOut, "train.checkpointing = \"full\" matches no module"); n != 1 {
		t.Errorf("the checkpointing warning is printed %d times:\n%s", n, errOut)
	}
	code, out, errOut = runCLI("plan", "-o", filepath.Join(dir, "w.bin"), "-json", warn)
	if code != 0 {
		t.Fatalf("-json: exit %d: %s", code, errOut)
	}
	var doc struct {
		Diagnostics []struct {
			Severity, File, Message string
			Line, Column            *int
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range doc.Diagnostics {
		if strings.HasPrefix(d.Message, "group l: reshard_after_forward = 1") && d.Severity == "warning" && d.File == warn &&
			d.Line != nil && *d.Line == 9 && d.Column != nil && *d.Column == 1 {
			found = true
		}
	}
	// The front end's checkpointing warning, the reshard one at 9:1, and
	// the deferred reduce-scatter of l (its input is the token ids).
	if !found || len(doc.Diagnostics) != 3 {
		t.Errorf("%d diagnostics %+v; want three, the reshard one at 9:1", len(doc.Diagnostics), doc.Diagnostics)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte(head+"[policy]\nunits = \"block-children\"\n"+ // 7-8
		"[[module]]\nname = \"layers\"\nrepeat = 2\n"+ // 9-11
		"[[module.module]]\nname = \"a\"\nkind = \"linear\"\nin = 8\nout = 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI("plan", "-o", filepath.Join(dir, "b.bin"), bad)
	want := bad + `:12:1: "layers.0.a" is an FSDP unit inside the activation-checkpoint region "layers.0"`
	note := "\n\t" + bad + `:9:1: note: the activation-checkpoint region "layers.0" is declared here`
	if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, note) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 with\n%s%s", code, errOut, want, note)
	}
}
