package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gpt2At writes gpt2-124m with another cluster line into dir.
func gpt2At(t *testing.T, dir, name, old, new string) string {
	t.Helper()
	src, err := os.ReadFile("../../plans/gpt2-124m.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(src), old, new, 1)
	if s == string(src) {
		t.Fatalf("%q not in gpt2-124m.toml", old)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckpointCommand(t *testing.T) {
	code, out, errOut := runCLI("checkpoint", "--async", "--storage", "5GB/s", "gpt2-124m")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"checkpoint of gpt2-124m: 8 ranks", "149 model entries, 444 optimizer states",
		"model 621.94 MiB, optimizer 949.40 MiB, total 1.53 GiB", "per node write 5 GB/s", "async     stages 196.43 MiB per rank"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, js, _ := runCLI("checkpoint", "-json", "--storage", "shared", "gpt2-124m")
	var doc struct {
		ModelBytes, OptimizerBytes int64
		PerRank                    []struct {
			Rank, Through int
			Bytes         int64
		}
	}
	if code != 0 || json.Unmarshal([]byte(js), &doc) != nil || doc.ModelBytes != (124439808+50257*768)*4 {
		t.Errorf("checkpoint -json: exit %d, %+v", code, doc)
	}
	// Every rank once, a run of ranks with the same figures as one entry.
	next := 0
	for _, r := range doc.PerRank {
		if r.Rank != next || r.Through != 0 && r.Through <= r.Rank {
			t.Errorf("checkpoint -json: entry %+v after rank %d", r, next-1)
		}
		next = max(r.Rank, r.Through) + 1
	}
	if next != 8 {
		t.Errorf("checkpoint -json: the entries cover ranks 0-%d of 8", next-1)
	}
	for _, bad := range [][]string{{"checkpoint", "--storage", "tape", "gpt2-124m"}, {"checkpoint"}, {"checkpoint", "--aggregate", "fast", "gpt2-124m"}} {
		if code, _, _ := runCLI(bad...); code != 2 {
			t.Errorf("fsdpc %s: exit %d, want 2", strings.Join(bad, " "), code)
		}
	}
	if code, _, errOut := runCLI("checkpoint", "no-such-model"); code != 1 || !strings.Contains(errOut, "no-such-model") {
		t.Errorf("a missing model: exit %d, %s", code, errOut)
	}
}

func TestReshardCommand(t *testing.T) {
	dir := t.TempDir()
	four := gpt2At(t, dir, "g4.toml", "world_size = 8", "world_size = 4")
	code, out, errOut := runCLI("reshard", "gpt2-124m", four)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"reshard gpt2-124m (8 ranks, mesh 1×8) -> gpt2-124m (4 ranks, mesh 1×4)", "compatible: the same 593 state entries", "reads     1.53 GiB in all"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("reshard", "-reads", "gpt2-124m", four)
	if code != 0 || !strings.Contains(out, "model.transformer.wte.weight <- rank 2 (__2_0.distcp) offsets [12566 0] lengths [6283 768]") {
		t.Errorf("-reads: exit %d, no read of wte from rank 2:\n%s", code, out)
	}
	if code, out, _ = runCLI("reshard", "-format", "markdown", "gpt2-124m", four); code != 0 || !strings.Contains(out, "| rank | reads | from ranks |") {
		t.Errorf("markdown: exit %d\n%s", code, out)
	}
	code, js, _ := runCLI("reshard", "-format", "json", "-reads", "gpt2-124m", four)
	var doc struct {
		Compatible bool
		Ranks      []struct {
			ReadList []struct {
				FQN   string `json:"fqn"`
				Bytes int64  `json:"bytes"`
			}
		}
	}
	if code != 0 || json.Unmarshal([]byte(js), &doc) != nil || !doc.Compatible || len(doc.Ranks) != 4 || len(doc.Ranks[0].ReadList) == 0 {
		t.Errorf("json: exit %d, %.300s", code, js)
	}

	// A changed dtype is refused, naming the parameter; so is another
	// optimizer.
	fp16 := gpt2At(t, dir, "fp16.toml", `dtype = "fp32"`, `dtype = "bf16"`)
	code, out, _ = runCLI("reshard", "gpt2-124m", fp16)
	if code != 1 || !strings.Contains(out, "model.transformer.wte.weight: dtype fp32 was saved, the new plan has bf16") {
		t.Errorf("changed dtype: exit %d\n%s", code, out)
	}
	sgd := gpt2At(t, dir, "sgd.toml", `optimizer = "adamw"`, `optimizer = "sgd"`)
	code, js, _ = runCLI("reshard", "-format", "json", "gpt2-124m", sgd)
	if code != 1 || !strings.Contains(js, `"Compatible": false`) || !strings.Contains(js, "optimizer adamw was saved, the new plan uses sgd") {
		t.Errorf("another optimizer: exit %d\n%.500s", code, js)
	}
	for _, bad := range [][]string{{"reshard", "gpt2-124m"}, {"reshard", "-format", "xml", "gpt2-124m", four}, {"reshard", "gpt2-124m", "nope"}} {
		if code, _, _ := runCLI(bad...); code != 2 {
			t.Errorf("fsdpc %s: exit %d, want 2", strings.Join(bad, " "), code)
		}
	}
}

// fsdpc run --checkpoint saves, --load-under loads under another plan and
// checks against the reference; a bad NEW is refused before the run.
func TestRunCheckpoint(t *testing.T) {
	dir := t.TempDir()
	small := `[model]
name = "small"
dtype = "fp32"
[train]
seq_len = 16
[cluster]
gpu = "h100-sxm"
world_size = 8
[policy]
param_dtype = "bf16"
[[module]]
name = "embed"
kind = "embedding"
num = 101
dim = 24
[[module]]
name = "head"
kind = "linear"
in = 24
out = 101
`
	old, new := filepath.Join(dir, "s8.toml"), filepath.Join(dir, "s12.toml")
	os.WriteFile(old, []byte(small), 0o644)
	os.WriteFile(new, []byte(strings.Replace(small, "world_size = 8", "world_size = 12", 1)), 0o644)
	ck := filepath.Join(dir, "ckpt")
	code, out, errOut := runCLI("run", "--steps", "2", "--checkpoint", ck, "--load-under", new, old)
	if code != 0 || !strings.Contains(out, "loaded under "+new+" (12 ranks, mesh 1×12)") || !strings.Contains(out, "equal the reference") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(ck, "step-2", "__7_0.distcp")); err != nil {
		t.Error(err)
	}
	// verify loads it under either plan, and refuses what does not load.
	for _, plan := range []string{old, new} {
		code, out, errOut := runCLI("checkpoint", "verify", plan, ck)
		if code != 0 || !strings.Contains(out, filepath.Join(ck, "step-2")+": step 2 of small, 8 ranks (mesh 1×8), 8 files") || !strings.Contains(out, "loads under "+plan) {
			t.Errorf("verify under %s: exit %d\n%s%s", plan, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI("checkpoint", "verify", "gpt2-124m", ck); code != 1 || !strings.Contains(errOut, "not in the old checkpoint") {
		t.Errorf("verify under another model: exit %d\n%s", code, errOut)
	}
	os.WriteFile(filepath.Join(ck, "step-2", "__3_0.distcp"), []byte("x"), 0o644)
	if code, _, errOut := runCLI("checkpoint", "verify", old, ck); code != 1 || !strings.Contains(errOut, "__3_0.distcp: 1 bytes") {
		t.Errorf("verify of a clobbered file: exit %d\n%s", code, errOut)
	}
	for _, bad := range [][]string{{"checkpoint", "verify", old}, {"checkpoint", "verify", "--scale", "0", old, ck}} {
		if code, _, _ := runCLI(bad...); code != 2 {
			t.Errorf("fsdpc %s: exit %d, want 2", strings.Join(bad, " "), code)
		}
	}
	// A --checkpoint that cannot be a directory is refused before the run.
	file := filepath.Join(dir, "afile")
	os.WriteFile(file, nil, 0o644)
	if code, out, errOut := runCLI("run", "--checkpoint", file, old); code != 1 || strings.Contains(out, "steps") || !strings.Contains(errOut, "--checkpoint "+file) {
		t.Errorf("--checkpoint naming a file: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI("run", "--checkpoint", filepath.Join(dir, "other"), "--load-under", "gpt2-124m", old)
	if code != 1 || !strings.Contains(errOut, "model.transformer.wte.weight: not in the old checkpoint") {
		t.Errorf("another model: exit %d\n%s", code, errOut)
	}
	if code, _, _ := runCLI("run", "--load-under", new, old); code != 2 {
		t.Errorf("--load-under without --checkpoint: exit %d, want 2", code)
	}
}
