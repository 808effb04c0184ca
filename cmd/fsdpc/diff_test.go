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

// TestGitTextconv drives git itself with docs/diff.md's setup, run as the
// page writes it (fsdpc on PATH): a plan at plan's default name, plan.bin,
// in a subdirectory and at the top, and one named NAME.plan.bin, all show
// as plan text, never "Binary files differ"; and the folded view makes a
// two-key change a fraction of the lines of the unfolded one.
func TestGitTextconv(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/diff.md")
	if err != nil {
		t.Fatal(err)
	}
	setup := gitSetupBlock(t, string(doc))
	dir := t.TempDir()
	// fsdpc on PATH is the test binary, which re-enters run() when
	// FSDPC_TEST_MAIN is set (see TestMain).
	bin := filepath.Join(t.TempDir(), "bin")
	os.Mkdir(bin, 0o755)
	wrapper := "#!/bin/sh\nFSDPC_TEST_MAIN=1 exec '" + exe + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "fsdpc"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	sh := func(script string) string {
		cmd := exec.Command("/bin/sh", "-ec", script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	git := func(args ...string) string {
		cmd := exec.Command(gitPath, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("config", "user.email", "t@example.com")
	git("config", "user.name", "t")
	sh(setup)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	paths := []string{"plan.bin", "sub/plan.bin", "gpt2.plan.bin"}
	for _, p := range paths {
		if code, _, errOut := runCLI("plan", "-o", filepath.Join(dir, p), "gpt2-124m"); code != 0 {
			t.Fatal(errOut)
		}
	}
	git("add", ".")
	git("commit", "-q", "-m", "plan")
	src, _ := os.ReadFile("../../plans/gpt2-124m.toml")
	// Two keys: the world size and the reduce dtype, which change every
	// layer's collectives alike.
	changed := strings.Replace(strings.Replace(string(src), "world_size = 8", "world_size = 16", 1), `reduce_dtype = "fp32"`, `reduce_dtype = "bf16"`, 1)
	if changed == string(src) || !strings.Contains(changed, "world_size = 16") || !strings.Contains(changed, `reduce_dtype = "bf16"`) {
		t.Fatal("gpt2-124m.toml no longer has the keys this test changes")
	}
	variant := filepath.Join(t.TempDir(), "v.toml")
	os.WriteFile(variant, []byte(changed), 0o644)
	for _, p := range paths {
		if code, _, errOut := runCLI("plan", "-o", filepath.Join(dir, p), variant); code != 0 {
			t.Fatal(errOut)
		}
	}
	var folded string
	for _, p := range paths {
		out := git("diff", "--", p)
		if strings.Contains(out, "Binary files") || !strings.Contains(out, "-cluster 8 ×") || !strings.Contains(out, "+cluster 16 ×") {
			t.Errorf("git diff %s does not show the plan text:\n%.2000s", p, out)
		}
		folded = out
	}
	if !strings.Contains(folded, "× {") || !strings.Contains(folded, "tokens/s per GPU") {
		t.Errorf("the documented driver does not fold as show does:\n%.3000s", folded)
	}
	git("config", "diff.fsdpc.textconv", "fsdpc textconv")
	unfolded := git("diff", "--", "plan.bin")
	nf, nu := strings.Count(folded, "\n"), strings.Count(unfolded, "\n")
	if strings.Contains(unfolded, "× {") || nf*3 > nu {
		t.Errorf("folded diff %d lines, unfolded %d: want the folded one under a third (12 layers fold into one)", nf, nu)
	}
	t.Logf("two-key change on gpt2-124m: %d diff lines folded, %d unfolded", nf, nu)
}

// gitSetupBlock is the shell block of docs/diff.md's git section.
func gitSetupBlock(t *testing.T, doc string) string {
	t.Helper()
	_, sec, ok := strings.Cut(doc, "\n## git\n")
	if !ok {
		t.Fatal("docs/diff.md has no git section")
	}
	_, block, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatal("docs/diff.md's git section has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	if !strings.Contains(block, ".gitattributes") || !strings.Contains(block, "textconv") {
		t.Fatalf("docs/diff.md's git block sets up no textconv driver:\n%s", block)
	}
	return block
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
