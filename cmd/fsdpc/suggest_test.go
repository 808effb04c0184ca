package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDidYouMean: a mistyped command, flag, zoo name or import format is
// answered with the closest real one; a name close to nothing gets no
// guess. Each once said only "unknown" or "not defined".
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pln", "x"}, 2, `unknown command "pln"; did you mean "plan"?`},
		{[]string{"siim", "x"}, 2, `did you mean "sim"?`},
		{[]string{"plan", "llama3-8"}, 1, `llama3-8: no such file, and no built-in model of that name; did you mean "llama3-8b"?`},
		{[]string{"show", "lama3-70b"}, 1, `did you mean "llama3-70b"?`},
		{[]string{"diff", "gpt2-124", "gpt2-124m"}, 2, `did you mean "gpt2-124m"?`},
		{[]string{"plan", "-chek", "gpt2-124m"}, 2, "flag provided but not defined: -chek; did you mean -check?"},
		{[]string{"plan", "gpt2-124m", "--tun"}, 2, "did you mean --tune?"},
		{[]string{"sim", "--trace-rank", "0", "gpt2-124m"}, 2, "did you mean --trace-ranks?"},
		{[]string{"diff", "--detailed-exitcod", "a", "b"}, 2, "did you mean --detailed-exitcode?"},
		{[]string{"import", "hg", "config.json"}, 2, `unknown format "hg"; did you mean "hf"?`},
		{[]string{"import", "hf", "--wrld-size", "8", "config.json"}, 2, "did you mean --world-size?"},
		{[]string{"emit", "trch", "--model", "gpt2-124m"}, 2, `unknown target "trch"; did you mean "torch"?`},
		{[]string{"completion", "bahs"}, 2, `unknown shell "bahs"; did you mean "bash"?`},
	} {
		code, _, errOut := runCLI(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("fsdpc %s: exit %d (want %d), stderr lacks %q:\n%s", strings.Join(c.args, " "), code, c.code, c.want, errOut)
		}
	}
	for _, args := range [][]string{{"xyzzy"}, {"plan", "qqqqqqqq"}, {"plan", "-zzzzzz", "gpt2-124m"}} {
		if _, _, errOut := runCLI(args...); strings.Contains(errOut, "did you mean") {
			t.Errorf("fsdpc %s: a guess for a name close to nothing: %s", strings.Join(args, " "), errOut)
		}
	}
	// A flag's value that looks like a mistyped flag is a value.
	out := filepath.Join(t.TempDir(), "-chek.bin")
	if code, _, errOut := runCLI("plan", "-o", out, "gpt2-124m"); code != 0 {
		t.Errorf("plan -o %s: exit %d: %s", out, code, errOut)
	}
}

// TestPlanOfHFConfig: a Hugging Face config.json given where a model file
// belongs says to import it, rather than reporting a TOML syntax error.
func TestPlanOfHFConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfg, []byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096}`), 0o644)
	for _, cmd := range []string{"plan", "inspect", "fit"} {
		code, _, errOut := runCLI(cmd, cfg)
		if code != 1 || !strings.Contains(errOut, "is a Hugging Face config.json, not an fsdpc model file") || !strings.Contains(errOut, "fsdpc import hf "+cfg+" -o model.toml") {
			t.Errorf("%s config.json: exit %d: %s", cmd, code, errOut)
		}
	}
	// Other JSON is still a TOML error saying it looks like JSON.
	other := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(other, []byte(`{"a": 1}`), 0o644)
	if code, _, errOut := runCLI("plan", other); code != 1 || strings.Contains(errOut, "import hf") || !strings.Contains(errOut, "looks like JSON") {
		t.Errorf("plan x.json: exit %d: %s", code, errOut)
	}
}
