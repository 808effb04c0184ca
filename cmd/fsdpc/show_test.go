package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
)

// TestShowFolds: show prints repeated layers once with ranges, -full
// prints every line, and -summary leaves out parameters and operations.
func TestShowFolds(t *testing.T) {
	code, folded, errOut := runCLI("show", "llama3-8b")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	_, full, _ := runCLI("show", "-full", "llama3-8b")
	_, summary, _ := runCLI("show", "-summary", "llama3-8b")
	lines := func(s string) int { return strings.Count(s, "\n") }
	if lines(full) < 2000 || lines(folded)*5 > lines(full) {
		t.Errorf("show printed %d lines, -full %d: want the fold to shorten it at least 5×", lines(folded), lines(full))
	}
	for _, want := range []string{"32× {\n  group layers.{0..31}\n", "    param layers.{0..31}.attention.wq.weight [4096,4096] fp32 rows 512/rank @0 grad@0\n",
		"compute        forward layers.{0..30}.attention_norm … layers.{0..30}.feed_forward 4.12 TFLOP"} {
		if !strings.Contains(folded, want) {
			t.Errorf("folded show lacks %q", want)
		}
	}
	for _, want := range []string{"group layers.17\n", "  param layers.31.ffn_norm.weight [4096] fp32 rows 512/rank @27263488 grad@27263488\n"} {
		if !strings.Contains(full, want) {
			t.Errorf("show -full lacks %q", want)
		}
	}
	if strings.Contains(summary, "  param ") || strings.Contains(summary, "forward mb0") || !strings.Contains(summary, "schedule 1741 ops") ||
		!strings.Contains(summary, "checkpoint (torch.distributed.checkpoint") || lines(summary) > 60 {
		t.Errorf("show -summary is not a summary (%d lines):\n%s", lines(summary), summary)
	}
}

// TestShowUnits: show's header (and -summary's) gives the step as the sum
// of its parts and its throughput; -full stays the canonical text.
func TestShowUnits(t *testing.T) {
	for _, args := range [][]string{{"show", "llama3-8b"}, {"show", "-summary", "llama3-8b"}} {
		_, out, _ := runCLI(args...)
		i := strings.Index(out, "\npredicted step ")
		if i < 0 {
			t.Fatalf("%v: no prediction", args)
		}
		header := strings.SplitN(out[i+1:], "\n", 5)
		if !strings.HasPrefix(header[1], "  step ") || !strings.Contains(header[1], " = compute ") ||
			!strings.Contains(header[2], "tokens/s per GPU") || !strings.Contains(header[3], "MFU ") {
			t.Errorf("%v: header lacks the breakdown and throughput:\n%s", args, strings.Join(header, "\n"))
		}
	}
	_, full, _ := runCLI("show", "-full", "llama3-8b")
	if strings.Contains(full, "tokens/s per GPU") || strings.Contains(full, "compute per step") {
		t.Error("show -full is no longer the canonical text")
	}
}

// A root whose parameters all sit in nested units is shown as what FSDP2
// makes of it: no parameter group (docs/semantics.md D13), not a group
// with invalid dtypes and divide factors.
func TestShowEmptyRoot(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.toml")
	src := `[model]
dtype = "fp32"
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = 2
[policy]
units = ["layers.*", "emb", "norm"]
[[module]]
name = "emb"
kind = "embedding"
num = 32
dim = 8
[[module]]
name = "layers"
repeat = 2
block = "b"
[[module]]
name = "norm"
kind = "norm"
dim = 8
[block.b]
[[block.b.module]]
name = "ff"
kind = "mlp"
dim = 8
hidden = 16
`
	if err := os.WriteFile(model, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(dir, "p.bin")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plan", "-o", plan, model}, &stdout, &stderr); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "no parameters ×1") || strings.Contains(stdout.String(), "invalid") {
		t.Errorf("plan summary:\n%s", stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"show", plan}, &stdout, &stderr); code != 0 {
		t.Fatalf("show: exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "group (root)\n  reshard_after_forward false, prefetch forward implicit backward implicit\n  no parameters: FSDP2 creates no parameter group") ||
		strings.Contains(out, "orig invalid") {
		t.Errorf("show:\n%.1500s", out)
	}
}

// TestShowCompute: show's header has one compute figure, the model FLOPs
// per step by MFU's count (the model's FLOPs per token × the step's
// tokens, counted here from the model file) with the rate and MFU that
// sim reports; show -json has it under compute, in base units.
func TestShowCompute(t *testing.T) {
	m, err := loadModel("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	perToken := m.FLOPsPerToken()
	tokens := float64(m.Train.MicroBatch * m.Train.SeqLen * max(m.Train.GradAccum, 1))
	_, simOut, _ := runCLI("sim", "-json", "llama3-8b")
	var sim struct {
		Metrics struct {
			MFU   float64 `json:"mfu"`
			FLOPS float64 `json:"model_flops_per_second_per_gpu"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(simOut), &sim); err != nil || sim.Metrics.MFU == 0 {
		t.Fatalf("sim -json: %v\n%.500s", err, simOut)
	}
	want := fmt.Sprintf("\n  compute per step: %s per GPU by MFU's count (%s over the cluster), %s per GPU achieved, MFU %.1f%%\n",
		ir.FormatFLOP(perToken*tokens), ir.FormatFLOP(perToken*tokens*float64(m.Cluster.WorldSize)), tflops(sim.Metrics.FLOPS), 100*sim.Metrics.MFU)
	for _, args := range [][]string{{"show", "llama3-8b"}, {"show", "-summary", "llama3-8b"}} {
		if _, out, _ := runCLI(args...); !strings.Contains(out, want) {
			t.Errorf("%v lacks %q", args, want)
		}
	}
	_, out, _ := runCLI("show", "-json", "llama3-8b")
	var doc struct {
		Compute map[string]float64 `json:"compute"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Compute
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }
	if !near(c["model_flops_per_token"], perToken) || !near(c["model_flops_per_step_per_gpu"], perToken*tokens) ||
		!near(c["model_flops_per_step"], perToken*tokens*float64(m.Cluster.WorldSize)) ||
		!near(c["mfu"], sim.Metrics.MFU) || !near(c["model_flops_per_second_per_gpu"], sim.Metrics.FLOPS) {
		t.Errorf("show -json compute %v; want %g FLOP per token, %g tokens per GPU, MFU %g", c, perToken, tokens, sim.Metrics.MFU)
	}
}
