package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInspectBadModelExitsOne(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, src string
		want      []string // each on stderr, in this order
	}{
		{"bad.toml", "[train]\nseq_len = \"x\"\n\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 8\n\n[[module]]\nname = \"emb\"\nkind = \"embeding\"\nnum = 100\ndim = 8\n",
			[]string{":2:11: train.seq_len: seq_len must be an integer, not a string\n",
				":10:8: module[0].kind: unknown module kind \"embeding\"; did you mean \"embedding\"?"}},
		{"syntax.toml", "[train\nseq_len = 16\n", []string{":1:7: TOML syntax: "}},
		{"binary.toml", "\x1f\x8b\x08\x00", []string{":1:2: the file is not UTF-8 text"}},
		{"empty.toml", "", []string{": the file is empty"}},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI("inspect", path)
		if code != 1 {
			t.Errorf("%s: exit code %d, want 1; stderr:\n%s", c.name, code, stderr)
		}
		if stdout != "" {
			t.Errorf("%s: stdout not empty:\n%s", c.name, stdout)
		}
		rest := stderr
		for _, w := range c.want {
			i := strings.Index(rest, path+w)
			if i < 0 {
				t.Errorf("%s: stderr lacks %q (in order); got:\n%s", c.name, path+w, stderr)
				break
			}
			rest = rest[i+len(path+w):]
		}
		if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "goroutine") {
			t.Errorf("%s: stderr shows an internal error:\n%s", c.name, stderr)
		}
	}
}

func TestInspectMissingFileExitsOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nothing-here.toml")
	code, stdout, stderr := runCLI("inspect", path)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "nothing-here.toml") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, the file named", code, stdout, stderr)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"frobnicate"},
		{"inspect"},
		{"inspect", "a.toml", "b.toml"},
		{"inspect", "--no-such-flag", "llama3-8b"},
		{},
	} {
		code, stdout, stderr := runCLI(args...)
		if code != 2 {
			t.Errorf("fsdpc %s: exit code %d, want 2", strings.Join(args, " "), code)
		}
		if len(args) > 0 && stdout != "" {
			t.Errorf("fsdpc %s: usage went to stdout:\n%s", strings.Join(args, " "), stdout)
		}
		if len(args) > 0 && !strings.Contains(stderr, "usage") {
			t.Errorf("fsdpc %s: stderr has no usage:\n%s", strings.Join(args, " "), stderr)
		}
	}
	if _, _, stderr := runCLI("frobnicate"); !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command not named:\n%s", stderr)
	}
}

func TestInspectZooModel(t *testing.T) {
	code, stdout, stderr := runCLI("inspect", "llama3-8b")
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "8,030,261,248 total") {
		t.Errorf("stdout lacks the parameter count:\n%s", stdout)
	}
}

func TestInspectJSON(t *testing.T) {
	code, stdout, stderr := runCLI("inspect", "--json", "llama3-8b")
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
	}
	var doc struct {
		Model  string `json:"model"`
		Params struct {
			Total int64 `json:"total"`
		} `json:"params"`
		Modules []json.RawMessage `json:"modules"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if doc.Params.Total != 8030261248 {
		t.Errorf("params.total = %d, want 8030261248", doc.Params.Total)
	}
	if doc.Model != "llama3-8b" || len(doc.Modules) == 0 {
		t.Errorf("model %q with %d modules", doc.Model, len(doc.Modules))
	}
}
