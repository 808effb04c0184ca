package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputsNeverClobber: -o never replaces the input it read, a symlink
// or a non-regular file, and exits 1 saying why.
func TestOutputsNeverClobber(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.toml")
	src, err := os.ReadFile("../../plans/gpt2-124m.toml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(model, src, 0o644)
	other := filepath.Join(dir, "other.bin")
	os.WriteFile(other, []byte("keep"), 0o644)
	link := filepath.Join(dir, "link.bin")
	os.Symlink(other, link)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"plan over its input", []string{"plan", "-o", model, model}, "is the input"},
		{"plan over a symlink", []string{"plan", "-o", link, model}, "symbolic link"},
		{"plan over /dev/null", []string{"plan", "-o", "/dev/null", model}, "not a regular file"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", c.name, code, stderr.String(), c.want)
		}
	}
	if b, _ := os.ReadFile(model); !bytes.Equal(b, src) {
		t.Error("the model file was overwritten")
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced")
	}
	if b, _ := os.ReadFile(other); string(b) != "keep" {
		t.Error("the symlink's target was overwritten")
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode().IsRegular() {
		t.Error("/dev/null is no longer a device")
	}
}

// TestOutputNeverAnInput: no command writes over any of its inputs, known
// by file identity: here each output is a hard link to an input, a path
// no string comparison would match.
func TestOutputNeverAnInput(t *testing.T) {
	dir := t.TempDir()
	copyFile := func(from, to string) string {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, to)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	link := func(of, name string) string {
		path := filepath.Join(dir, name)
		if err := os.Link(of, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	model := copyFile("../../plans/gpt2-124m.toml", "m.toml")
	config := copyFile(llamaConfig, "config.json")
	bin := filepath.Join(dir, "plan.bin")
	if code, _, errOut := runCLI("plan", "-o", bin, model); code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut)
	}
	// calibrate -o DIR writes DIR/a100-80gb.profile.toml: make that the CSV.
	csv := copyFile("../../calibrate/published-runs.csv", "runs.csv")
	link(csv, "a100-80gb.profile.toml")
	modelLink, binLink, configLink := link(model, "m-link.toml"), link(bin, "plan-link.bin"), link(config, "config-link.json")
	// run --checkpoint DIR writes a new directory of DIR and replaces
	// DIR/latest, its only file that may exist.
	ckpt := filepath.Join(dir, "ckpt")
	os.Mkdir(ckpt, 0o755)
	link(bin, "ckpt/latest")
	inputs := map[string][]byte{}
	for _, p := range []string{model, bin, config, csv} {
		inputs[p], _ = os.ReadFile(p)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"plan", []string{"plan", "-o", modelLink, model}},
		{"import", []string{"import", "hf", config, "-o", configLink}},
		{"emit model", []string{"emit", "torch", "--model", model, "-o", modelLink}},
		{"emit plan", []string{"emit", "torch", "--model", "gpt2-124m", bin, "-o", binLink}},
		{"report", []string{"report", "-o", binLink, bin}},
		{"report second input", []string{"report", "-o", modelLink, "llama3-8b", model}},
		{"sim -trace", []string{"sim", "-trace", binLink, bin}},
		{"calibrate", []string{"calibrate", "-fit", "max_efficiency", "-gpu", "a100-80gb", "-o", dir, csv}},
		{"run --checkpoint", []string{"run", "--scale", "64", "--checkpoint", ckpt, bin}},
		{"run --backend cuda --trace", []string{"run", "--backend", "cuda", "--worker", "/bin/true", "--trace", binLink, bin}},
	} {
		code, stdout, stderr := runCLI(c.args...)
		if code != 1 || !strings.Contains(stderr, "is the input") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and \"is the input\"", c.name, code, stderr)
		}
		if stdout != "" {
			t.Errorf("%s: printed %q before refusing", c.name, stdout)
		}
		for p, want := range inputs {
			if b, _ := os.ReadFile(p); !bytes.Equal(b, want) {
				t.Fatalf("%s: input %s was overwritten", c.name, p)
			}
		}
	}
}
