package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMFUFromPlanFiles: plans carry the model's FLOPs per token (format
// 8), so MFU and an mfu gate work on plan files made from a model file
// fsdpc cannot find afterwards: sim without -model, diff of two plan
// files. They once said "MFU needs the model" and failed the gate.
func TestMFUFromPlanFiles(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../plans/gpt2-124m.toml")
	if err != nil {
		t.Fatal(err)
	}
	var bins []string
	for i, world := range []string{"world_size = 16", "world_size = 32"} {
		text := strings.Replace(string(src), "world_size = 8", world, 1)
		model := filepath.Join(dir, "m.toml")
		if err := os.WriteFile(model, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, []string{"a.bin", "b.bin"}[i])
		if code, _, errOut := runCLI("plan", "-o", bin, model); code != 0 {
			t.Fatal(errOut)
		}
		bins = append(bins, bin)
	}
	// The model file is gone: only the plans are left.
	os.Remove(filepath.Join(dir, "m.toml"))

	code, out, errOut := runCLI("sim", bins[0])
	if code != 0 || !strings.Contains(out, "MFU ") || strings.Contains(out, "MFU needs") {
		t.Errorf("sim of a plan file: exit %d, no MFU:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("sim", bins[0], "-fail-if", "mfu<1%")
	if code != 0 || !strings.Contains(out, "gate mfu<1%: passed: mfu") {
		t.Errorf("sim -fail-if mfu<1%%: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("diff", "-format", "json", "-fail-if", "mfu<1%", "-fail-if", "mfu<-50%", bins[0], bins[1])
	var doc struct {
		Metrics struct{ Old, New struct{ MFU *float64 } }
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Metrics.Old.MFU == nil || doc.Metrics.New.MFU == nil {
		t.Errorf("diff of two plan files with mfu gates: exit %d, %v\n%.500s%s", code, err, out, errOut)
	}
	code, out, _ = runCLI("show", bins[0], "-full")
	if code != 0 || !strings.Contains(out, "\n  model ") || !strings.Contains(out, "per token (MFU's count") {
		t.Errorf("show -full does not print the plan's FLOPs per token:\n%.1500s", out)
	}
}

// TestMFUOlderPlan: a plan from before format 8 still decodes; without
// its model MFU is unknown, said plainly, and an mfu gate is an error.
func TestMFUOlderPlan(t *testing.T) {
	text, err := os.ReadFile("../../schedule/testdata/tiny-v7.plan.hex")
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, l := range strings.Split(string(text), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		data, _, _ := strings.Cut(l, "|")
		for _, h := range strings.Fields(data)[1:] {
			x, err := hex.DecodeString(h)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, x...)
		}
	}
	bin := filepath.Join(t.TempDir(), "v7.bin")
	if err := os.WriteFile(bin, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// show -json's compute per step: the model's count null.
	code, out, errOut := runCLI("show", "-json", bin)
	if code != 0 || !strings.Contains(out, `"model_flops_per_step": null,`) || !strings.Contains(out, `"mfu": null,`) {
		t.Errorf("show -json of a version-7 plan: exit %d\n%.2000s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("sim", bin)
	if code != 0 || !strings.Contains(out, "MFU needs the model's FLOPs per token, which plans before format 8 do not carry") {
		t.Errorf("sim of a version-7 plan: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI("sim", bin, "-fail-if", "mfu<35%")
	if code != 1 || !strings.Contains(errOut, "mfu is not known: MFU needs the model's FLOPs per token") || !strings.Contains(errOut, "-model") {
		t.Errorf("an mfu gate on a version-7 plan: exit %d: %s", code, errOut)
	}
}
