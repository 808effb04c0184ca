package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccelerateCLI: import accelerate writes the model file, plan plans
// it, emit accelerate writes the config back; misuse exits 2 and bad
// input 1, naming the place, with no output written.
func TestAccelerateCLI(t *testing.T) {
	td, err := filepath.Abs("../../ir/accelerate/testdata")
	if err != nil {
		t.Fatal(err)
	}
	cfg, hfJSON := filepath.Join(td, "fsdp2-transformer.yaml"), filepath.Join(td, "tiny-llama.json")
	dir := t.TempDir()
	model, plan, back := filepath.Join(dir, "m.toml"), filepath.Join(dir, "p.bin"), filepath.Join(dir, "back.yaml")
	if code, _, errOut := runCLI("import", "accelerate", cfg, "--model", hfJSON, "-o", model); code != 0 {
		t.Fatalf("import accelerate: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("plan", model, "-o", plan); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("emit", "accelerate", plan, "--model", model, "--hf", hfJSON, "-o", back); code != 0 || !strings.Contains(errOut, "accelerate's keys say the whole plan") {
		t.Fatalf("emit accelerate: exit %d: %s", code, errOut)
	}
	text, err := os.ReadFile(back)
	if err != nil || !strings.Contains(string(text), `fsdp_transformer_layer_cls_to_wrap: "LlamaDecoderLayer"`) {
		t.Fatalf("emit accelerate wrote %q (%v)", text, err)
	}
	if code, out, errOut := runCLI("import", "accelerate", back, "--model", hfJSON); code != 0 || !strings.Contains(out, `units = ["model.embed_tokens", "model.layers.*", ["model.norm", "lm_head"]]`) {
		t.Fatalf("import of the emitted config: exit %d: %s", code, errOut)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forwrd: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(dir, "evil.yaml")
	if err := os.WriteFile(evil, []byte("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: \"\\x1b[2J\\nx\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "never.toml")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"import", "accelerate", cfg}, 2, "no --model"},
		{[]string{"import", "accelerate", "--model", hfJSON}, 2, "want one accelerate config"},
		{[]string{"import", "accelerate", cfg, "--model", "llama3-8b", "--seq-len", "8"}, 2, "are for a config.json"},
		{[]string{"import", "accelerate", bad, "--model", hfJSON, "-o", out}, 1, "bad.yaml:5:3: fsdp_reshard_after_forwrd: not an FSDP key of accelerate 1.14's launcher; did you mean fsdp_reshard_after_forward?"},
		{[]string{"import", "accelerate", cfg, "--model", "no-such-model"}, 1, "no-such-model: no such file"},
		{[]string{"import", "accelerate", cfg, "--model", hfJSON, "-o", cfg}, 1, ""},
		{[]string{"emit", "accelerate", plan}, 2, "want one plan and --model"},
		{[]string{"import", "accelerate", evil, "--model", hfJSON}, 1, `fsdp_reshard_after_forward: \x1b[2J\nx: FSDP2 takes true or false`},
		{[]string{"emit", "accelerate", plan, "--model", "llama3-8b"}, 1, "made from a different model file"},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("fsdpc %s: exit %d, %q; want exit %d with %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.want)
		}
	}
	if _, _, errOut := runCLI("import", "accelerate", evil, "--model", hfJSON); strings.ContainsAny(errOut[:len(errOut)-1], "\x1b\n") {
		t.Errorf("a config's string reached the terminal raw: %q", errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused import wrote %s", out)
	}
	if src, err := os.ReadFile(cfg); err != nil || !strings.HasPrefix(string(src), "compute_environment") {
		t.Errorf("the config was overwritten: %v", err)
	}
}
