package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// Small transformers configs: a Llama with untied and with tied
// embeddings, and a Qwen3 (its layer class reached through
// _no_split_modules). Built at this size on CPU, a step takes well under
// a second.
var accelModels = map[string]string{
	"llama":      `{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":16,"intermediate_size":32,"num_attention_heads":2,"num_key_value_heads":1,"num_hidden_layers":2,"vocab_size":64,"max_position_embeddings":64,"rms_norm_eps":1e-5,"tie_word_embeddings":false,"torch_dtype":"float32","hidden_act":"silu"}`,
	"llama-tied": `{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":16,"intermediate_size":32,"num_attention_heads":2,"num_key_value_heads":1,"num_hidden_layers":2,"vocab_size":64,"max_position_embeddings":64,"rms_norm_eps":1e-5,"tie_word_embeddings":true,"torch_dtype":"float32","hidden_act":"silu"}`,
	"qwen3":      `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":16,"intermediate_size":32,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":8,"num_hidden_layers":2,"vocab_size":64,"max_position_embeddings":64,"rms_norm_eps":1e-6,"tie_word_embeddings":false,"torch_dtype":"float32","hidden_act":"silu"}`,
}

// accelConfig is an FSDP2 accelerate config for 2 processes on one machine.
func accelConfig(policy, extra string, reshard bool, mixed string, ac bool) string {
	return fmt.Sprintf(`compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: %s
%s  fsdp_reshard_after_forward: %v
  fsdp_activation_checkpointing: %v
  fsdp_offload_params: false
  fsdp_cpu_ram_efficient_loading: false
  fsdp_state_dict_type: SHARDED_STATE_DICT
mixed_precision: '%s'
num_machines: 1
num_processes: 2
machine_rank: 0
use_cpu: false
`, policy, extra, reshard, ac, mixed)
}

// TestAccelerateConformance is #32's check against accelerate itself: each
// accelerate config is imported (fsdpc import accelerate) and planned, and
// accelerate's own FSDP2 path prepares the same transformers model from
// the same config on 2 CPU ranks over gloo (python -m
// fsdpc.accelerate_check, all cases in one launch); FSDP2's units and their
// settings, shard layouts, collectives and hook order must be the plan's
// (torchgen.CompareAccelerate). The configs cover each wrap policy (by
// class name, by _no_split_modules, size-based, none), reshard true and
// false, mixed precision bf16, fp16 and none, and activation checkpointing
// on and off. A config accelerate cannot run (it raises on every rank)
// must be refused by the import too, naming the key, and accelerate's
// error must be the one the refusal is for. One case runs
// docs/accelerate.md's hook: a plan beyond accelerate's keys applied with
// fsdpc.apply_plan before accelerator.prepare. Last, `fsdpc run --backend
// torch --accelerate` checks the first config as a user runs it.
func TestAccelerateConformance(t *testing.T) {
	needTorch(t)
	py, err := torchgen.FindPython(os.Getenv("FSDPC_PYTHON"))
	if err != nil {
		t.Fatal(err)
	}
	layer := "  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer\n"
	cases := []struct {
		name, model, config string
		// refuse: accelerate raises (its error says accelErr); the import
		// must fail too, naming refuse.
		refuse, accelErr string
		// hook: the imported model file gets these lines, and the plan is
		// applied with fsdpc.apply_plan before accelerator.prepare.
		hook string
	}{
		{"class-reshard-fp32", "llama", accelConfig("TRANSFORMER_BASED_WRAP", layer, true, "no", false), "", "", ""},
		{"no-split-keep-bf16-ac", "qwen3", accelConfig("TRANSFORMER_BASED_WRAP", "", false, "bf16", true), "", "", ""},
		{"class-reshard-fp16-ac", "llama", accelConfig("TRANSFORMER_BASED_WRAP", layer, true, "fp16", true), "", "", ""},
		// 6000 parameters: more than any module below the root holds (the
		// ModuleList 4672, LlamaModel 5712), so nothing is wrapped by size.
		{"size-none-bf16", "llama", accelConfig("SIZE_BASED_WRAP", "  fsdp_min_num_params: 6000\n", true, "bf16", false), "", "", ""},
		{"no-wrap-keep-fp32", "llama", accelConfig("NO_WRAP", "", false, "no", false), "", "", ""},
		// More than one layer (2336) but not the ModuleList (4672): the
		// size policy matches the ModuleList, which fully_shard refuses.
		{"size-modulelist", "llama", accelConfig("SIZE_BASED_WRAP", "  fsdp_min_num_params: 2000\n", true, "no", false),
			"fsdp_min_num_params", "does not support containers that do not implement forward", ""},
		// More than the ModuleList, less than LlamaModel (5712): the model
		// is sharded, then accelerate shards its embedding again.
		{"size-model", "llama", accelConfig("SIZE_BASED_WRAP", "  fsdp_min_num_params: 5000\n", true, "no", false),
			"fsdp_min_num_params", "TypeError", ""},
		// accelerate's activation checkpointing needs a wrap policy.
		{"no-wrap-ac", "llama", accelConfig("NO_WRAP", "", true, "no", true), "fsdp_activation_checkpointing", "'NoneType' object is not callable", ""},
		// The tied output embedding lands in the root's unit, apart from
		// its input embedding's: FSDP2 refuses the shared parameter.
		{"tied", "llama-tied", accelConfig("TRANSFORMER_BASED_WRAP", layer, true, "no", false), "tie_word_embeddings", "is shared with a parameter already managed by another FSDP group", ""},
		// docs/accelerate.md's hook: a plan beyond accelerate's keys (one
		// layer kept gathered, bf16 layers reducing in fp32, an explicit
		// backward prefetch) applied before prepare, which leaves it.
		{"apply-plan-hook", "llama", accelConfig("TRANSFORMER_BASED_WRAP", layer, true, "no", false), "", "",
			"\n[[policy.override]]\nmatch = \"model.layers.1\"\nreshard_after_forward = false\nparam_dtype = \"bf16\"\nreduce_dtype = \"fp32\"\nprefetch_backward = 1\n"},
	}
	dir := t.TempDir()
	var runs []torchgen.AccelerateCase
	var models []*ir.Model
	for _, c := range cases {
		cfg := filepath.Join(dir, c.name+".yaml")
		hf := filepath.Join(dir, c.name+".json")
		toml := filepath.Join(dir, c.name+".toml")
		bin := filepath.Join(dir, c.name+".bin")
		if err := os.WriteFile(cfg, []byte(c.config), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hf, []byte(accelModels[c.model]), 0o644); err != nil {
			t.Fatal(err)
		}
		run := torchgen.AccelerateCase{Name: c.name, Config: []byte(c.config), Model: []byte(accelModels[c.model])}
		var m *ir.Model // the imported model; nil for a refused config
		code, out, errOut := runCLI("import", "accelerate", cfg, "--model", hf, "-o", toml)
		switch {
		case c.refuse != "":
			if code == 0 || !strings.Contains(errOut, c.refuse) {
				t.Errorf("%s: accelerate cannot run this config, but fsdpc import accelerate exits %d without naming %s:\n%s%s", c.name, code, c.refuse, out, errOut)
			}
			t.Logf("%s: fsdpc import accelerate refuses: %s", c.name, strings.TrimSpace(errOut))
		case code != 0:
			t.Fatalf("%s: fsdpc import accelerate: exit %d\n%s%s", c.name, code, out, errOut)
		default:
			if c.hook != "" {
				f, err := os.OpenFile(toml, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(c.hook); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				run.ApplyPlan = true
				// accelerate's prepare still resolves its wrap policy's
				// classes by name, which fully_shard has renamed
				// (FSDPLlamaDecoderLayer): with the hook the config wraps
				// nothing itself.
				run.Config = []byte(strings.Replace(strings.Replace(c.config, "TRANSFORMER_BASED_WRAP", "NO_WRAP", 1), layer, "", 1))
			}
			if code, out, errOut := runCLI("plan", "-o", bin, toml); code != 0 {
				t.Fatalf("%s: fsdpc plan: exit %d\n%s%s", c.name, code, out, errOut)
			}
			p, err := schedule.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			if m, err = loadModel(toml); err != nil {
				t.Fatal(err)
			}
			q, _, e, err := scaledExport(bin, p, m, 1)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			run.Plan, run.Export = q, e
		}
		models = append(models, m)
		runs = append(runs, run)
	}
	start := time.Now()
	all, err := torchgen.RunAccelerate(py, runs, 10*time.Minute, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("accelerate ran %d configs on 2 ranks in %.0fs", len(runs), time.Since(start).Seconds())
	for i, c := range cases {
		recs := all[i]
		t.Run(c.name, func(t *testing.T) {
			if c.refuse != "" {
				for r, rec := range recs {
					if !strings.Contains(rec.Error, c.accelErr) {
						t.Errorf("rank %d: fsdpc's import refuses this config naming %s, for accelerate's error %q; accelerate said %q (at %s)", r, c.refuse, c.accelErr, rec.Error, rec.Where)
					}
				}
				t.Logf("accelerate: %s (%s)", recs[0].Error, recs[0].Where)
				return
			}
			for _, call := range recs[0].Calls {
				t.Logf("fully_shard(%s, reshard_after_forward=%v)", moduleNames(call.Modules), call.Reshard)
			}
			if len(recs[0].Checkpointed) > 0 {
				t.Logf("checkpoint_wrapper on %s", moduleNames(recs[0].Checkpointed))
			}
			if bad := torchgen.CompareAccelerate(models[i], runs[i].Plan, recs); len(bad) > 0 {
				t.Errorf("accelerate's FSDP2 differs from fsdpc's plan in %d places:\n  %s", len(bad), strings.Join(bad, "\n  "))
			}
		})
	}
	// The user's command on the first config, as a user runs it.
	t.Run("fsdpc-run", func(t *testing.T) {
		c := cases[0]
		args := []string{"run", "--backend", "torch", "--accelerate", filepath.Join(dir, c.name+".yaml"), "--model", filepath.Join(dir, c.name+".toml"),
			"--hf", filepath.Join(dir, c.name+".json"), filepath.Join(dir, c.name+".bin")}
		code, out, errOut := runCLI(args...)
		if code != 0 || !strings.Contains(out, "accelerate's FSDP2 matches the plan") {
			t.Fatalf("fsdpc %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		t.Log(strings.TrimSpace(out))
	})
}
