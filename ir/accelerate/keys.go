package accelerate

import (
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/internal/yamlsubset"
	"github.com/fsdpc/fsdpc/ir"
)

// topKeys are ClusterConfig's fields in accelerate 1.14
// (commands/config/config_args.py), plus the two old keys its
// process_config converts (fp16, dynamo_backend), each with what fsdpc
// makes of it.
var topKeys = map[string]string{
	"compute_environment":    "LOCAL_MACHINE only",
	"distributed_type":       "FSDP only",
	"mixed_precision":        "MixedPrecisionPolicy of every unit",
	"use_cpu":                "refused when true",
	"debug":                  "no effect on the plan",
	"num_processes":          "cluster world_size",
	"machine_rank":           "no effect on the plan",
	"num_machines":           "cluster gpus_per_node = num_processes / num_machines",
	"gpu_ids":                "no effect on the plan",
	"main_process_ip":        "no effect on the plan",
	"main_process_port":      "no effect on the plan",
	"rdzv_backend":           "no effect on the plan",
	"same_network":           "no effect on the plan",
	"main_training_function": "no effect on the plan",
	"enable_cpu_affinity":    "no effect on the plan",
	"fp8_config":             "read with mixed_precision fp8, which fsdpc refuses",
	"deepspeed_config":       "ignored under FSDP",
	"fsdp_config":            "the FSDP keys",
	"parallelism_config":     "refused unless empty",
	"megatron_lm_config":     "ignored under FSDP",
	"mpirun_config":          "no effect on the plan",
	"downcast_bf16":          "TPU only: no effect",
	"tpu_name":               "TPU only: no effect",
	"tpu_zone":               "TPU only: no effect",
	"tpu_use_cluster":        "TPU only: no effect",
	"tpu_use_sudo":           "TPU only: no effect",
	"command_file":           "TPU only: no effect",
	"commands":               "TPU only: no effect",
	"tpu_vm":                 "TPU only: no effect",
	"tpu_env":                "TPU only: no effect",
	"dynamo_config":          "train.compile for dynamo_backend INDUCTOR",
	"fp16":                   "old form of mixed_precision: fp16",
	"dynamo_backend":         "old form of dynamo_config",
}

// fsdpKeys are the FSDP flags of accelerate 1.14's launcher
// (commands/launch.py), which a config's fsdp_config sets.
var fsdpKeys = map[string]string{
	"fsdp_version":                       "1 or 2",
	"fsdp_auto_wrap_policy":              "the units",
	"fsdp_transformer_layer_cls_to_wrap": "the units",
	"fsdp_min_num_params":                "the units",
	"fsdp_reshard_after_forward":         "reshard_after_forward",
	"fsdp_sharding_strategy":             "FSDP1: reshard_after_forward",
	"fsdp_offload_params":                "offload",
	"fsdp_activation_checkpointing":      "checkpointed modules",
	"fsdp_cpu_ram_efficient_loading":     "load-time memory",
	"fsdp_state_dict_type":               "the checkpoint",
	"fsdp_backward_prefetch":             "FSDP1 only",
	"fsdp_forward_prefetch":              "FSDP1 only",
	"fsdp_use_orig_params":               "FSDP1 only",
	"fsdp_sync_module_states":            "FSDP1 only",
	"fsdp_ignored_modules":               "refused",
}

// fsdp1Removed are the keys `accelerate to-fsdp2` drops, with what FSDP2
// does instead.
var fsdp1Removed = map[string]string{
	"fsdp_backward_prefetch":  "removed in FSDP2: FSDP2 always prefetches the next unit's all-gather in backward (one unit ahead, in reverse forward order); fsdpc plans it (prefetch_backward)",
	"fsdp_forward_prefetch":   "not implemented in FSDP2's accelerate path: FSDP2 issues each unit's forward all-gather when the CPU reaches the unit, overlapping the compute before it; fsdpc plans explicit prefetch (prefetch_forward)",
	"fsdp_sync_module_states": "removed in FSDP2: not needed (with fsdp_cpu_ram_efficient_loading rank 0's weights are broadcast at load)",
	"fsdp_use_orig_params":    "removed in FSDP2: FSDP2 always keeps the original parameters (as DTensors)",
}

// reshardOfStrategy is to-fsdp2's value mapping of FSDP1 sharding
// strategies to FSDP2's reshard_after_forward.
var reshardOfStrategy = map[string]bool{
	"FULL_SHARD":         true,
	"SHARD_GRAD_OP":      false,
	"HYBRID_SHARD":       true,
	"HYBRID_SHARD_ZERO2": false,
	"NO_SHARD":           false,
}

var strategyMeaning = map[string]string{
	"FULL_SHARD":         "ZeRO-3: parameters resharded after forward, gathered again in backward",
	"SHARD_GRAD_OP":      "ZeRO-2: parameters stay gathered from forward to backward",
	"HYBRID_SHARD":       "the replication across nodes is lost: FSDP2 under accelerate needs parallelism_config for HSDP",
	"HYBRID_SHARD_ZERO2": "the replication across nodes is lost: FSDP2 under accelerate needs parallelism_config for HSDP",
	"NO_SHARD":           "FSDP2 still shards the parameters: it has no NO_SHARD",
}

// suggestKey is ", did you mean K?" by the rule every fsdpc error uses
// (ir.Suggest), or "".
func suggestKey(key string, known []string) string {
	if best := ir.Suggest(key, known); best != "" {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return ""
}

// readFSDP applies fsdp_config the way the launcher and the FSDP2 plugin
// do, an FSDP1 config first through to-fsdp2's mapping.
func (c *Config) readFSDP(fsdp map[string]*yamlsubset.Node, order []string, fail failFunc) error {
	note := func(key, format string, args ...any) {
		n := fsdp[key]
		c.Notes = append(c.Notes, Note{Key: key, Line: n.Line, Col: n.Col, Msg: fmt.Sprintf(format, args...)})
	}
	version := 1
	if n := fsdp["fsdp_version"]; n != nil {
		switch scalarText(n) {
		case "1":
		case "2":
			version = 2
		default:
			return fail(n, "fsdp_version", "%s: accelerate's FSDP versions are 1 and 2", scalarText(n))
		}
	}
	// The launcher refuses cpu-RAM-efficient loading without module-state
	// sync, testing the raw values (defaults "true") for truth.
	ramEfficient := fsdp["fsdp_cpu_ram_efficient_loading"] == nil || truthy(fsdp["fsdp_cpu_ram_efficient_loading"])
	if n := fsdp["fsdp_sync_module_states"]; n != nil && version == 2 && ramEfficient && !truthy(n) {
		return fail(n, "fsdp_sync_module_states", "%s with fsdp_cpu_ram_efficient_loading (true unless set false): accelerate launch refuses it (\"set --fsdp_sync_module_states to True\"); FSDP2 does not need the key: remove it", scalarText(n))
	}
	if version == 1 {
		c.FromFSDP1 = true
		// to-fsdp2: removed keys dropped, sharding strategies mapped to
		// reshard_after_forward, in the file's order (a later key wins).
		converted := map[string]*yamlsubset.Node{}
		for _, key := range order {
			n := fsdp[key]
			if why, ok := fsdp1Removed[key]; ok {
				note(key, "%s dropped: %s", scalarText(n), why)
				continue
			}
			switch key {
			case "fsdp_sharding_strategy", "fsdp_reshard_after_forward":
				s := scalarText(n)
				if r, ok := reshardOfStrategy[s]; ok {
					note(key, "%s → fsdp_reshard_after_forward: %v (%s)", s, r, strategyMeaning[s])
					v := *n
					v.Text, v.Quoted = fmt.Sprint(r), false
					converted["fsdp_reshard_after_forward"] = &v
					continue
				}
				if key == "fsdp_sharding_strategy" {
					note(key, "%s → fsdp_reshard_after_forward: %s (to-fsdp2 renames the key and keeps a value it does not know)", s, s)
				}
				converted["fsdp_reshard_after_forward"] = n
			case "fsdp_version":
			default:
				converted[key] = n
			}
		}
		if fsdp["fsdp_state_dict_type"] == nil {
			c.Notes = append(c.Notes, Note{Key: "fsdp_state_dict_type", Msg: "absent: FSDP1 defaulted to FULL_STATE_DICT, the converted FSDP2 config to SHARDED_STATE_DICT"})
		}
		if n := fsdp["fsdp_version"]; n != nil {
			note("fsdp_version", "1 → 2")
		} else {
			c.Notes = append(c.Notes, Note{Key: "fsdp_version", Msg: "absent (FSDP1, accelerate's default) → 2: read through accelerate to-fsdp2's mapping"})
		}
		for k, n := range converted {
			c.pos[k] = *n
		}
		fsdp = converted
	} else {
		// In the file's order, so the notes are the same every time.
		ignored := map[string]string{
			"fsdp_sharding_strategy":  "ignored by accelerate's FSDP2 plugin (it reads fsdp_reshard_after_forward)",
			"fsdp_backward_prefetch":  "ignored by accelerate's FSDP2 plugin: " + fsdp1Removed["fsdp_backward_prefetch"],
			"fsdp_forward_prefetch":   "ignored by accelerate's FSDP2 plugin (read only under fsdp_version 1): " + fsdp1Removed["fsdp_forward_prefetch"],
			"fsdp_use_orig_params":    "ignored by accelerate's FSDP2 plugin: " + fsdp1Removed["fsdp_use_orig_params"],
			"fsdp_sync_module_states": "ignored by accelerate's FSDP2 plugin: " + fsdp1Removed["fsdp_sync_module_states"],
		}
		for _, key := range order {
			if why, ok := ignored[key]; ok {
				note(key, "%s", why)
			}
		}
	}

	// The FSDP2 plugin, with the launcher's defaults.
	c.Reshard = true
	if n := fsdp["fsdp_reshard_after_forward"]; n != nil {
		b, ok := strToBool(n)
		if !ok {
			return fail(n, "fsdp_reshard_after_forward", "%s: FSDP2 takes true or false (accelerate's str_to_bool refuses it)", scalarText(n))
		}
		c.Reshard = b
	}
	bools := []struct {
		key string
		def bool
		to  *bool
	}{
		{"fsdp_offload_params", false, &c.Offload},
		{"fsdp_activation_checkpointing", false, &c.ActivationCheckpointing},
		{"fsdp_cpu_ram_efficient_loading", true, &c.CPURAMEfficientLoading},
	}
	for _, b := range bools {
		*b.to = b.def
		if n := fsdp[b.key]; n != nil {
			v, ok := strToBool(n)
			if !ok {
				return fail(n, b.key, "%s: not true or false (accelerate's str_to_bool refuses it)", scalarText(n))
			}
			*b.to = v
		}
	}
	c.WrapPolicy = NoWrap
	if n := fsdp["fsdp_auto_wrap_policy"]; n != nil && !isNull(n) {
		s := strings.ToUpper(scalarText(n))
		switch s {
		case TransformerBasedWrap, SizeBasedWrap, NoWrap:
			c.WrapPolicy = s
		default:
			return fail(n, "fsdp_auto_wrap_policy", "%s: accelerate accepts TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP", scalarText(n))
		}
	}
	if n := fsdp["fsdp_transformer_layer_cls_to_wrap"]; n != nil && !isNull(n) {
		if n.Kind != yamlsubset.Scalar {
			return fail(n, "fsdp_transformer_layer_cls_to_wrap", "a %s: accelerate reads one string of class names separated by commas (\"LlamaDecoderLayer,LlamaMLP\")", kindName(n))
		}
		c.LayerClasses = strings.Split(scalarText(n), ",")
		if c.WrapPolicy != TransformerBasedWrap {
			note("fsdp_transformer_layer_cls_to_wrap", "ignored: fsdp_auto_wrap_policy is %s", c.WrapPolicy)
		}
	}
	c.MinNumParams = 100_000_000 // the launcher's default, int(1e8)
	if n := fsdp["fsdp_min_num_params"]; n != nil {
		v, ok := n.Value().(int64)
		if !ok {
			return fail(n, "fsdp_min_num_params", "%s: must be an integer", scalarText(n))
		}
		c.MinNumParams = v
		if c.WrapPolicy != SizeBasedWrap {
			note("fsdp_min_num_params", "ignored: fsdp_auto_wrap_policy is %s", c.WrapPolicy)
		}
	}
	c.StateDictType = "SHARDED_STATE_DICT"
	if n := fsdp["fsdp_state_dict_type"]; n != nil && !isNull(n) {
		switch s := strings.ToUpper(scalarText(n)); s {
		case "FULL_STATE_DICT", "1":
			c.StateDictType = "FULL_STATE_DICT"
		case "SHARDED_STATE_DICT", "3":
			c.StateDictType = "SHARDED_STATE_DICT"
		case "LOCAL_STATE_DICT", "2":
			return fail(n, "fsdp_state_dict_type", "%s: FSDP2 does not support LOCAL_STATE_DICT (accelerate refuses it); use SHARDED_STATE_DICT or FULL_STATE_DICT", scalarText(n))
		default:
			return fail(n, "fsdp_state_dict_type", "%s: accelerate accepts FULL_STATE_DICT, SHARDED_STATE_DICT (LOCAL_STATE_DICT only with FSDP1)", scalarText(n))
		}
	}
	if n := fsdp["fsdp_ignored_modules"]; n != nil && !isNull(n) {
		return fail(n, "fsdp_ignored_modules", "fsdpc does not model modules FSDP leaves unsharded (ignored_params): remove the key, or plan without them")
	}
	return nil
}
