package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportHFChoosesWorld: without --world-size, import hf writes the
// fewest whole nodes whose plan fits and says so; the test checks the
// choice by planning one node fewer (refused) and the chosen count
// (fits). It once wrote 8 GPUs for a 70B model that cannot fit on 8.
func TestImportHFChoosesWorld(t *testing.T) {
	dir := t.TempDir()
	cfg := "../../ir/hf/testdata/llama-3.1-70b.json"
	out := filepath.Join(dir, "m.toml")
	code, _, errOut := runCLI("import", "hf", cfg, "-o", out, "--gpus-per-node", "4")
	if code != 0 {
		t.Fatalf("import hf: exit %d: %s", code, errOut)
	}
	m, err := loadModel(out)
	if err != nil {
		t.Fatal(err)
	}
	w := m.Cluster.WorldSize
	if w <= 4 || w%4 != 0 || !strings.Contains(errOut, "the fewest whole nodes whose plan fits") ||
		!strings.Contains(errOut, strings.Replace("world size W: ", "W", strconv.Itoa(w), 1)) || !strings.Contains(errOut, strconv.Itoa(w/4-1)+" nodes do not fit") {
		t.Fatalf("import hf chose world size %d and said:\n%s", w, errOut)
	}
	for _, c := range []struct {
		world int
		fits  bool
	}{{w - 4, false}, {w, true}} {
		f := filepath.Join(dir, "w.toml")
		if code, _, errOut := runCLI("import", "hf", cfg, "-o", f, "--gpus-per-node", "4", "--world-size", strconv.Itoa(c.world)); code != 0 {
			t.Fatal(errOut)
		}
		code, _, errOut := runCLI("plan", "-o", filepath.Join(dir, "p.bin"), f)
		if (code == 0) != c.fits || !c.fits && !strings.Contains(errOut, "does not fit") {
			t.Errorf("world size %d: plan exit %d (fits: want %v): %s", c.world, code, c.fits, errOut)
		}
	}
	// A model that fits no world size gets one node and the reason.
	code, _, errOut = runCLI("import", "hf", "../../ir/hf/testdata/mixtral-8x7b-v0.1.json", "-o", out)
	if code != 0 || !strings.Contains(errOut, "world size 8, one node: no count of whole nodes up to 4096 fits") || !strings.Contains(errOut, "on one node, the plan does not fit") {
		t.Errorf("import hf of a model that fits nowhere: exit %d: %s", code, errOut)
	}
	// --world-size is taken as given, fitting or not.
	code, _, errOut = runCLI("import", "hf", cfg, "-o", out, "--world-size", "8")
	if m, err := loadModel(out); code != 0 || err != nil || m.Cluster.WorldSize != 8 || strings.Contains(errOut, "fewest") {
		t.Errorf("import hf --world-size 8: exit %d: %s", code, errOut)
	}
}

// TestImportTorchConformanceWorld: import torch without --world-size
// chooses as import hf does (the same search over the same model), and
// says so. It once wrote 8 GPUs whatever the model needed.
func TestImportTorchConformanceWorld(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	cfg := "../../ir/hf/testdata/llama-3.1-70b.json"
	hfOut, torchOut := filepath.Join(dir, "hf.toml"), filepath.Join(dir, "torch.toml")
	code, _, hfErr := runCLI("import", "hf", cfg, "-o", hfOut, "--gpus-per-node", "4")
	if code != 0 {
		t.Fatalf("import hf: exit %d: %s", code, hfErr)
	}
	code, _, torchErr := runCLI("import", "torch", "--hf", cfg, "-o", torchOut, "--gpus-per-node", "4")
	if code != 0 {
		t.Fatalf("import torch: exit %d: %s", code, torchErr)
	}
	want, err := loadModel(hfOut)
	if err != nil {
		t.Fatal(err)
	}
	got, err := loadModel(torchOut)
	if err != nil {
		t.Fatal(err)
	}
	note, _, _ := strings.Cut(hfErr, "\n")
	if w := got.Cluster.WorldSize; w != want.Cluster.WorldSize || w <= 8 || !strings.Contains(torchErr, note+"\n") {
		t.Errorf("import torch chose world size %d, import hf %d; import torch said:\n%s\nimport hf:\n%s", w, want.Cluster.WorldSize, torchErr, hfErr)
	}
}
