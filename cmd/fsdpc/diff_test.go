package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiffCLI(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.bin")
	if code, _, errOut := runCLI("plan", "-o", a, "gpt2-124m"); code != 0 {
		t.Fatal(errOut)
	}
	src, _ := os.ReadFile("../../plans/gpt2-124m.toml")
	variant := filepath.Join(dir, "variant.toml")
	os.WriteFile(variant, []byte(strings.Replace(string(src), "world_size = 8", "world_size = 16", 1)), 0o644)

	// A plan against itself, and against its own model: same, exit 0.
	if code, out, _ := runCLI("diff", "--quiet", a, a); code != 0 || out != "" {
		t.Errorf("itself: exit %d, output %q", code, out)
	}
	if code, _, errOut := runCLI("diff", a, "gpt2-124m"); code != 0 {
		t.Errorf("plan.bin against its model: exit %d %s", code, errOut)
	}
	code, out, _ := runCLI("diff", a, variant)
	if code != 1 || !strings.Contains(out, "world size 8 → 16") {
		t.Errorf("different: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("colour written to a non-terminal")
	}
	if code, out, _ = runCLI("diff", "--color=always", a, variant); !strings.Contains(out, "\x1b[31m") {
		t.Errorf("--color=always: exit %d, no colour", code)
	}
	code, out, _ = runCLI("diff", "--format", "markdown", a, variant)
	if code != 1 || !strings.HasPrefix(out, "### fsdpc plan diff") || !strings.Contains(out, "<details>") {
		t.Errorf("markdown: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("diff", "--format", "json", a, variant)
	var doc map[string]any
	if code != 1 || json.Unmarshal([]byte(out), &doc) != nil || doc["identical"] != false {
		t.Errorf("json: exit %d\n%s", code, out)
	}
	// Errors are exit 2.
	if code, _, _ := runCLI("diff", a, filepath.Join(dir, "missing.bin")); code != 2 {
		t.Errorf("missing file: exit %d, want 2", code)
	}
	if code, _, _ := runCLI("diff", "--format", "yaml", a, a); code != 2 {
		t.Errorf("bad format: exit %d, want 2", code)
	}
}

// TestGitTextconv drives git itself: with the documented .gitattributes and
// textconv setting, git diff shows a plan change as plan text.
func TestGitTextconv(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The test binary re-enters run() when FSDPC_TEST_MAIN is set (see
	// TestMain), standing in for an installed fsdpc.
	git := func(args ...string) string {
		cmd := exec.Command(gitPath, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "FSDPC_TEST_MAIN=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("config", "user.email", "t@example.com")
	git("config", "user.name", "t")
	git("config", "diff.fsdpc.textconv", exe+" textconv")
	os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("*.plan.bin diff=fsdpc\n"), 0o644)
	bin := filepath.Join(dir, "model.plan.bin")
	if code, _, errOut := runCLI("plan", "-o", bin, "gpt2-124m"); code != 0 {
		t.Fatal(errOut)
	}
	git("add", ".")
	git("commit", "-q", "-m", "plan")
	src, _ := os.ReadFile("../../plans/gpt2-124m.toml")
	variant := filepath.Join(dir, "v.toml")
	os.WriteFile(variant, []byte(strings.Replace(string(src), "world_size = 8", "world_size = 16", 1)), 0o644)
	if code, _, errOut := runCLI("plan", "-o", bin, variant); code != 0 {
		t.Fatal(errOut)
	}
	out := git("diff", "model.plan.bin")
	if !strings.Contains(out, "-cluster 8 ×") || !strings.Contains(out, "+cluster 16 ×") {
		t.Errorf("git diff does not show the plan text:\n%.2000s", out)
	}
	if strings.Contains(out, "Binary files") {
		t.Error("git treated the plan as binary")
	}
}

// TestTextconvZooName: textconv, like every command that takes a plan,
// takes a built-in model's name (it once said "open llama3-8b: no such
// file or directory"); a name that is neither says so in one line.
func TestTextconvZooName(t *testing.T) {
	code, out, errOut := runCLI("textconv", "gpt2-124m")
	if code != 0 || !strings.Contains(out, "plan gpt2-124m\n") {
		t.Fatalf("textconv gpt2-124m: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI("textconv", "no-such-model")
	if code != 1 || !strings.Contains(errOut, "no built-in model of that name") {
		t.Fatalf("textconv no-such-model: exit %d: %q", code, errOut)
	}
}
