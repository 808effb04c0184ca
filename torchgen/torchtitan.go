package torchgen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// The torchtitan versions the configurations are written for, each read
// at a named commit: the TOML job config of its releases
// (torchtitan/config/job_config.py at v0.2.2) and the Python config
// registry that replaced it (torchtitan/config/configs.py, Trainer.Config,
// torchtitan/distributed/activation_checkpoint.py,
// torchtitan/models/llama3/config_registry.py).
const (
	TorchtitanRelease       = "v0.2.2"
	TorchtitanReleaseCommit = "73a0e6979dd10b6b1904098eb3c8f62c18ab87ce"
	TorchtitanCommit        = "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a" // main, 2026-08-21
	TorchtitanCommitDate    = "2026-08-21"
)

// titanOptions is what a plan decides among torchtitan's options, and
// what it decides that torchtitan has no option for.
type titanOptions struct {
	microBatch, seqLen, dp, accum int64
	replicate, shard              int
	param, reduce                 string // "" when not expressible
	offload                       bool
	offloadOK                     bool
	reshard                       string // always, never, or "" when not expressible
	checkpointing                 string // none, full, selective-op, selective-layer
	optimizer                     string // AdamW's implementation, "" when the plan names none
	maxNorm                       float64
	notMapped                     []string
}

func titanOptionsOf(p *schedule.Plan) titanOptions {
	o := titanOptions{microBatch: p.Train.MicroBatch, seqLen: p.Train.SeqLen, dp: int64(p.Cluster.WorldSize),
		accum: max(p.Train.GradAccum, 1), replicate: max(p.Cluster.Replicate, 1), shard: p.Cluster.Shard,
		checkpointing: p.Train.Checkpointing}
	if o.shard < 1 {
		o.shard = p.Cluster.WorldSize
	}
	// torchtitan's optimizer implementation is "fused" by default, and
	// "foreach" a choice (optimizer.implementation at both commits); the
	// plan's is AdamW's, what its step was priced as.
	// torchtitan clips every step at training.max_norm (1.0 by default;
	// train.py at v0.2.2, trainer.py at b5bcd76), with no setting that
	// turns it off: a max_norm of 0 would zero every gradient.
	if p.Train.MaxGradNorm > 0 {
		o.maxNorm = p.Train.MaxGradNorm
	} else {
		o.notMapped = append(o.notMapped, "no gradient clipping: torchtitan always clips (training.max_norm, 1.0 by default), which the plan did not price; set max_grad_norm in the model file to plan with it")
	}
	switch {
	case p.Train.Optimizer == "adamw" && p.Train.OptimizerImplementation != "":
		o.optimizer = p.Train.OptimizerImplementation
	case p.Train.Optimizer != "adamw":
		o.notMapped = append(o.notMapped, "optimizer "+p.Train.Optimizer+": set torchtitan's optimizer to match (the plan prices its step)")
	}
	var blocks []schedule.Group
	for _, g := range p.Groups {
		if !g.Root {
			blocks = append(blocks, g)
		}
	}
	if blocks == nil {
		blocks = p.Groups
	}
	// torchtitan's mixed_precision_param is bfloat16 or float32, its
	// mixed_precision_reduce float32 only (both commits).
	if d, ok := uniform(blocks, func(g schedule.Group) string { return torchDType(g.Policy.Param) }); ok && (d == "bfloat16" || d == "float32") {
		o.param = d
	} else {
		o.notMapped = append(o.notMapped, "param_dtype: torchtitan has one, bfloat16 or float32, for all units; the plan's differ between units or are another dtype")
	}
	if d, ok := uniform(blocks, func(g schedule.Group) string { return torchDType(g.Policy.Reduce) }); ok && d == "float32" {
		o.reduce = d
	} else {
		o.notMapped = append(o.notMapped, "reduce_dtype: torchtitan reduces in float32 only; the plan's is another or differs between units")
	}
	if off, ok := uniform(p.Groups, func(g schedule.Group) string { return fmt.Sprint(g.Policy.Offload) }); ok {
		o.offload, o.offloadOK = off == "true", true
	} else {
		o.notMapped = append(o.notMapped, "offload differs between units")
	}
	switch r, _ := uniform(blocks, func(g schedule.Group) string { return reshardName(g.Policy) }); r {
	case "true":
		o.reshard = "always"
	case "false":
		o.reshard = "never"
	default:
		o.notMapped = append(o.notMapped, "reshard_after_forward is an int or differs between units")
	}
	for _, g := range p.Groups {
		if g.Policy.PrefetchForward > 0 || g.Policy.PrefetchBackward > 0 {
			o.notMapped = append(o.notMapped, "explicit prefetch (apply_plan sets the lists)")
			break
		}
	}
	// apply_fsdp calls set_gradient_divide_factor(1.0) on every unit and
	// divides the loss by the global token count itself, so its
	// reduce-scatters sum where FSDP2's default averages.
	o.notMapped = append(o.notMapped, "gradient division: torchtitan sets gradient_divide_factor 1.0 on every unit (it scales the loss by the global token count), so its reduce-scatters sum; the plan's follow its policy (apply_plan applies them)")
	if p.Train.AccumulateUnsharded && p.Train.GradAccum > 1 {
		o.notMapped = append(o.notMapped, "accumulation without gradient sync (apply_plan's caller calls set_requires_gradient_sync)")
	}
	policy := o.reshard
	if policy == "" {
		policy = "default"
	}
	if diffs, err := CompareTorchtitanUnits(p, policy); err != nil {
		o.notMapped = append(o.notMapped, "units: "+err.Error()+"; torchtitan's apply_fsdp does not apply")
	} else {
		for _, d := range diffs {
			o.notMapped = append(o.notMapped, "units: "+d)
		}
	}
	return o
}

// Torchtitan writes the part of a torchtitan job config in the TOML of
// its releases (the [training], [parallelism] and [activation_checkpoint]
// tables of torchtitan/config/job_config.py at TorchtitanRelease) that
// the plan decides. torchtitan applies one setting to all of its units,
// so a setting the plan varies between groups, one torchtitan has no
// option for, and every way torchtitan's own units differ from the plan's
// (CompareTorchtitanUnits) is written as a comment; nothing is silently
// dropped.
func Torchtitan(p *schedule.Plan, source string) string {
	o := titanOptionsOf(p)
	var b strings.Builder
	fmt.Fprintf(&b, "# torchtitan job config fragment for %s, generated by fsdpc emit torch from %s.\n", safetext.TOMLComment(p.Header.Model), safetext.TOMLComment(source))
	fmt.Fprintf(&b, "# For torchtitan %s (commit %s): torchtitan/config/job_config.py.\n", TorchtitanRelease, TorchtitanReleaseCommit)
	b.WriteString("# This plan's units are:")
	for _, g := range p.Groups {
		fmt.Fprintf(&b, " %s", safetext.TOMLComment(g.Label()))
	}
	b.WriteString("\n\n[training]\n")
	fmt.Fprintf(&b, "local_batch_size = %d\n", o.microBatch)
	// torchtitan derives its gradient accumulation steps as
	// global / (local × data-parallel degree).
	fmt.Fprintf(&b, "global_batch_size = %d  # %d micro-batches of accumulation\n", o.microBatch*o.dp*o.accum, o.accum)
	fmt.Fprintf(&b, "seq_len = %d\n", o.seqLen)
	if o.maxNorm > 0 {
		fmt.Fprintf(&b, "max_norm = %s\n", strconv.FormatFloat(o.maxNorm, 'g', -1, 64))
	}
	if o.param != "" {
		fmt.Fprintf(&b, "mixed_precision_param = %s\n", safetext.TOML(o.param))
	}
	if o.reduce != "" {
		fmt.Fprintf(&b, "mixed_precision_reduce = %s\n", safetext.TOML(o.reduce))
	}
	if o.offloadOK {
		fmt.Fprintf(&b, "enable_cpu_offload = %t\n", o.offload)
	}
	b.WriteString("\n[parallelism]\n")
	fmt.Fprintf(&b, "data_parallel_replicate_degree = %d\n", o.replicate)
	fmt.Fprintf(&b, "data_parallel_shard_degree = %d\n", o.shard)
	// "default" depends on pipeline parallelism, so it is never written.
	if o.reshard != "" {
		fmt.Fprintf(&b, "fsdp_reshard_after_forward = %s\n", safetext.TOML(o.reshard))
	}
	b.WriteString("\n[activation_checkpoint]\n")
	switch o.checkpointing {
	case "none", "full":
		fmt.Fprintf(&b, "mode = %s\n", safetext.TOML(o.checkpointing))
	case "selective-op":
		b.WriteString("mode = \"selective\"\nselective_ac_option = \"op\"\n")
	default:
		// selective-layer: torchtitan's selective_ac_option is the
		// interval, which the plan does not carry.
		b.WriteString("mode = \"selective\"  # every Nth layer: set selective_ac_option to the model file's checkpoint_interval\n")
	}
	if o.optimizer != "" {
		b.WriteString("\n[optimizer]\nname = \"AdamW\"\n")
		fmt.Fprintf(&b, "implementation = %s\n", safetext.TOML(o.optimizer))
	}
	writeNotMapped(&b, o.notMapped, safetext.TOMLComment)
	return b.String()
}

func writeNotMapped(b *strings.Builder, notMapped []string, comment func(string) string) {
	if len(notMapped) == 0 {
		return
	}
	b.WriteString("\n# Not expressible as torchtitan options (apply_plan in torchtitan's parallelize\n")
	b.WriteString("# hook applies the plan as it is):\n")
	for _, n := range notMapped {
		fmt.Fprintf(b, "#   %s\n", comment(n))
	}
}

// titanBases are torchtitan's own configurations of the zoo's models at
// TorchtitanCommit (torchtitan/models/llama3/config_registry.py).
var titanBases = map[string]string{"llama3-8b": "llama3_8b", "llama3-70b": "llama3_70b", "llama3.1-405b": "llama3_405b"}

// TorchtitanRegistry writes the plan's options as an entry of torchtitan's
// Python config registry at TorchtitanCommit: apply_fsdpc_plan(config)
// sets them on a Trainer.Config, and for a model torchtitan ships (the
// zoo's Llamas) a registry function fsdpc_<model>() applies them to
// torchtitan's own configuration of it, for --module/--config. What the
// registry cannot express is listed as comments, as in Torchtitan.
func TorchtitanRegistry(p *schedule.Plan, source string) string {
	o := titanOptionsOf(p)
	switch o.checkpointing {
	case "none":
		o.notMapped = append(o.notMapped, "checkpointing none: Trainer.Config.activation_checkpoint is always a policy (selective by default) at this commit")
	case "selective-layer":
		o.notMapped = append(o.notMapped, "checkpointing every Nth layer: SelectiveAC is per-op only at this commit")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# torchtitan config registry entry for %s, generated by fsdpc emit torch from %s.\n", safetext.Escape(p.Header.Model), safetext.Escape(source))
	fmt.Fprintf(&b, "# For torchtitan at commit %s (%s): torchtitan/config/configs.py's\n", TorchtitanCommit, TorchtitanCommitDate)
	b.WriteString("# TrainingConfig and ParallelismConfig, torchtitan/trainer.py's Trainer.Config,\n")
	b.WriteString("# torchtitan/distributed/activation_checkpoint.py's policies. Put this module in a\n")
	b.WriteString("# package of yours and name it with --module and a function with --config.\n")
	b.WriteString("# This plan's units are:")
	for _, g := range p.Groups {
		fmt.Fprintf(&b, " %s", safetext.Escape(g.Label()))
	}
	b.WriteString("\n\n")
	switch o.checkpointing {
	case "full":
		b.WriteString("from torchtitan.distributed.activation_checkpoint import FullAC\n")
	case "selective-op":
		b.WriteString("from torchtitan.distributed.activation_checkpoint import SelectiveAC\n")
	}
	base, known := titanBases[p.Header.Model]
	if known {
		fmt.Fprintf(&b, "from torchtitan.models.llama3.config_registry import %s\n", base)
	}
	b.WriteString("from torchtitan.trainer import Trainer\n\n\n")
	b.WriteString("def apply_fsdpc_plan(config: Trainer.Config) -> Trainer.Config:\n")
	b.WriteString("    \"\"\"Sets the options the plan decides on a torchtitan configuration.\"\"\"\n")
	fmt.Fprintf(&b, "    config.training.num_tokens_per_microbatch_per_dp_rank = %d  # micro_batch %d x seq_len %d\n", o.microBatch*o.seqLen, o.microBatch, o.seqLen)
	fmt.Fprintf(&b, "    config.training.max_context_length = %d\n", o.seqLen)
	if o.maxNorm > 0 {
		fmt.Fprintf(&b, "    config.training.max_norm = %s\n", strconv.FormatFloat(o.maxNorm, 'g', -1, 64))
	}
	fmt.Fprintf(&b, "    # %d data-parallel ranks x %d micro-batches of accumulation\n", o.dp, o.accum)
	fmt.Fprintf(&b, "    config.training.num_tokens_per_train_step = %d\n", o.microBatch*o.seqLen*o.dp*o.accum)
	if o.param != "" {
		fmt.Fprintf(&b, "    config.training.mixed_precision_param = %s\n", safetext.Python(o.param))
	}
	if o.reduce != "" {
		fmt.Fprintf(&b, "    config.training.mixed_precision_reduce = %s\n", safetext.Python(o.reduce))
	}
	if o.offloadOK {
		fmt.Fprintf(&b, "    config.training.enable_cpu_offload = %s\n", map[bool]string{true: "True", false: "False"}[o.offload])
	}
	fmt.Fprintf(&b, "    config.parallelism.data_parallel_replicate_degree = %d\n", o.replicate)
	fmt.Fprintf(&b, "    config.parallelism.data_parallel_shard_degree = %d\n", o.shard)
	if o.reshard != "" {
		fmt.Fprintf(&b, "    config.parallelism.fsdp_reshard_after_forward = %s\n", safetext.Python(o.reshard))
	}
	switch o.checkpointing {
	case "full":
		b.WriteString("    config.activation_checkpoint = FullAC.Config()\n")
	case "selective-op":
		b.WriteString("    config.activation_checkpoint = SelectiveAC.Config()\n")
	}
	if o.optimizer != "" {
		fmt.Fprintf(&b, "    config.optimizer.implementation = %s\n", safetext.Python(o.optimizer))
	}
	b.WriteString("    return config\n")
	if known {
		fmt.Fprintf(&b, "\n\ndef fsdpc_%s() -> Trainer.Config:\n", base)
		fmt.Fprintf(&b, "    return apply_fsdpc_plan(%s())\n", base)
	}
	writeNotMapped(&b, o.notMapped, safetext.Escape)
	return b.String()
}

func uniform(gs []schedule.Group, key func(schedule.Group) string) (string, bool) {
	if len(gs) == 0 {
		return "", false
	}
	v := key(gs[0])
	for _, g := range gs[1:] {
		if key(g) != v {
			return "", false
		}
	}
	return v, true
}

func torchDType(d ir.DType) string {
	switch d {
	case ir.FP32:
		return "float32"
	case ir.BF16:
		return "bfloat16"
	case ir.FP16:
		return "float16"
	}
	return ""
}

func reshardName(pol schedule.GroupPolicy) string {
	switch pol.Reshard {
	case schedule.ReshardTrue:
		return "true"
	case schedule.ReshardFalse:
		return "false"
	}
	return fmt.Sprint(pol.ReshardTo)
}
