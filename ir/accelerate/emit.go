package accelerate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Emit writes the FSDP2 accelerate config that makes accelerate 1.14 do
// what plan p decides for the model mm (the model p was made from): the
// wrap policy whose units, with the carved embedding and tail, are the
// plan's, reshard_after_forward, mixed_precision, offload, activation
// checkpointing and the processes. What accelerate's keys cannot say
// (per-unit reshard values, explicit prefetch, divide factors, units no
// wrap policy makes, HSDP) is listed in comments, with how fsdpc's
// apply_plan covers it. source names the plan for the header.
func Emit(p *schedule.Plan, mm *Model, source string) (string, error) {
	m := mm.IR
	if len(p.Groups) == 0 {
		return "", fmt.Errorf("the plan has no groups")
	}
	var cant []string // what the config cannot express
	byName := map[string]ir.ModuleID{}
	for i := range m.Modules {
		byName[m.Modules[i].Name] = ir.ModuleID(i)
	}
	for _, g := range p.Groups {
		for _, name := range g.Modules {
			if _, ok := byName[name]; !ok {
				return "", fmt.Errorf("the plan's unit %s names module %q, which the model does not have: give the model the plan was made from", safetext.Term(g.Label()), safetext.Term(name))
			}
		}
	}
	c := &Config{File: source, NumProcesses: p.Cluster.WorldSize, NumMachines: max(1, (p.Cluster.WorldSize+p.Cluster.GPUsPerNode-1)/p.Cluster.GPUsPerNode),
		StateDictType: "SHARDED_STATE_DICT", CPURAMEfficientLoading: true, MinNumParams: 100_000_000, Compile: m.Train.Compile}
	if p.Cluster.GPUsPerNode <= 0 || p.Cluster.WorldSize%p.Cluster.GPUsPerNode != 0 {
		c.NumMachines = 1
		cant = append(cant, fmt.Sprintf("the plan's %d ranks do not fill nodes of %d GPUs evenly; accelerate starts num_processes / num_machines on each machine", p.Cluster.WorldSize, p.Cluster.GPUsPerNode))
	}
	if p.Cluster.Replicate > 1 {
		cant = append(cant, fmt.Sprintf("HSDP: the plan's mesh replicates %d × shards %d; accelerate expresses it in parallelism_config (dp_replicate_size, dp_shard_size), which fsdpc does not write: apply_plan builds the plan's mesh", p.Cluster.Replicate, p.Cluster.Shard))
	}

	// The units: the wrap policy (by the classes of the plan's units
	// other than the embedding, the tail and the root) whose decision is
	// the plan's groups.
	planUnits := map[string]bool{}
	for _, g := range p.Groups {
		planUnits[strings.Join(g.Modules, "\x00")] = true
	}
	regions := map[ir.ModuleID]bool{}
	for i := range m.Modules {
		if m.Modules[i].Checkpoint {
			regions[ir.ModuleID(i)] = true
		}
	}
	classes := map[string]bool{}
	for _, g := range p.Groups {
		if g.Root || len(g.Modules) != 1 {
			continue
		}
		id := byName[g.Modules[0]]
		if id == mm.InputEmbed || id == mm.FinalNorm || id == mm.OutputEmbed {
			continue
		}
		classes[mm.Class[id]] = true
	}
	var candidates []*Config
	if len(classes) > 0 && !classes[""] {
		t := *c
		t.WrapPolicy = TransformerBasedWrap
		t.LayerClasses = keysOf(classes)
		sort.Strings(t.LayerClasses)
		candidates = append(candidates, &t)
	}
	t := *c
	t.WrapPolicy = NoWrap
	candidates = append(candidates, &t)
	var chosen *Config
	var decision *Decision
	var why []string
	for _, cand := range candidates {
		acs := []bool{false}
		if len(regions) > 0 {
			acs = []bool{true, false}
		}
		for _, ac := range acs {
			cand.ActivationCheckpointing = ac
			d, err := Decide(cand, mm)
			if err != nil {
				why = append(why, cand.WrapPolicy+": "+err.Error())
				continue
			}
			if !sameUnits(m, d, planUnits) {
				why = append(why, cand.WrapPolicy+": accelerate would make the units "+callsText(m, d))
				continue
			}
			chosen, decision = cand, d
			break
		}
		if chosen != nil {
			break
		}
	}
	if chosen == nil {
		chosen = candidates[len(candidates)-1]
		chosen.ActivationCheckpointing = false
		cant = append(cant, "units: no accelerate wrap policy makes the plan's units ("+strings.Join(groupLabels(p), ", ")+"); "+strings.Join(why, "; ")+". fsdpc.apply_plan(model, plan) before accelerator.prepare shards the model as the plan says, each unit with its own settings")
	}
	if len(regions) > 0 && (decision == nil || !chosen.ActivationCheckpointing || !sameRegions(decision, regions)) {
		var names []string
		for id := range regions {
			names = append(names, m.Modules[id].Name)
		}
		sort.Strings(names)
		cant = append(cant, fmt.Sprintf("activation checkpointing: the plan recomputes %s, which fsdp_activation_checkpointing (every child of each wrapped layer) does not; apply_plan does not checkpoint: wrap them in checkpoint_wrapper before apply_plan", strings.Join(limit(names, 8), ", ")))
	}

	// Settings: accelerate gives the policy's units and the embedding
	// fsdp_reshard_after_forward, the tail false, the root FSDP2's
	// default (false).
	var main []schedule.Group
	for _, g := range p.Groups {
		if g.Root || decision != nil && decision.Tail >= 0 && slices.Equal(g.Modules, names(m, decision.Calls[decision.Tail])) {
			continue
		}
		main = append(main, g)
	}
	if len(main) == 0 {
		main = p.Groups
	}
	trues := 0
	for _, g := range main {
		if g.Policy.Reshard == schedule.ReshardTrue {
			trues++
		}
	}
	chosen.Reshard = trues*2 >= len(main)
	for _, g := range p.Groups {
		if decision == nil {
			break // apply_plan makes every unit, with its settings
		}
		want := chosen.Reshard
		if g.Root || decision != nil && decision.Tail >= 0 && slices.Equal(g.Modules, names(m, decision.Calls[decision.Tail])) {
			want = false
		}
		switch {
		case g.Policy.Reshard == schedule.ReshardTo:
			cant = append(cant, fmt.Sprintf("unit %s: reshard_after_forward = %d (to %d ranks); accelerate's is a bool: apply_plan sets it", g.Label(), g.Policy.ReshardTo, g.Policy.ReshardTo))
		case (g.Policy.Reshard == schedule.ReshardTrue) != want:
			cant = append(cant, fmt.Sprintf("unit %s: reshard_after_forward = %v, where accelerate's would be %v: apply_plan sets it", g.Label(), g.Policy.Reshard == schedule.ReshardTrue, want))
		}
	}
	chosen.MixedPrecision, cant = mixedPrecisionOf(p, cant)
	offloads := 0
	for _, g := range p.Groups {
		if g.Policy.Offload {
			offloads++
		}
	}
	chosen.Offload = offloads*2 > len(p.Groups)
	if offloads > 0 && offloads < len(p.Groups) {
		cant = append(cant, fmt.Sprintf("offload: %d of %d units offload; accelerate's fsdp_offload_params is one setting: apply_plan sets each", offloads, len(p.Groups)))
	}
	for _, g := range p.Groups {
		if g.Policy.PrefetchForward > 0 || g.Policy.PrefetchBackward > 0 {
			cant = append(cant, fmt.Sprintf("unit %s: explicit prefetch (forward %d, backward %d units ahead); accelerate has no key: apply_plan calls set_modules_to_forward_prefetch and set_modules_to_backward_prefetch", g.Label(), g.Policy.PrefetchForward, g.Policy.PrefetchBackward))
		}
		if g.Policy.ReduceScatterOp == schedule.ReducePremulSum || g.Policy.ReduceScatterOp == schedule.ReduceSum && (g.Policy.Reduce == ir.FP32 || g.Policy.Reduce == ir.BF16) && p.Cluster.WorldSize > 1 {
			cant = append(cant, fmt.Sprintf("unit %s: gradient division (reduce-scatter %s, pre-divide %g, post-divide %g, premultiply %g); accelerate sets none, FSDP2's default averages: apply_plan calls set_gradient_divide_factor or set_force_sum_reduction_for_comms", g.Label(), g.Policy.ReduceScatterOp, g.Policy.PreDivide, g.Policy.PostDivide, g.Policy.PremulFactor))
		}
	}
	if p.Train.AccumulateUnsharded && p.Train.GradAccum > 1 {
		cant = append(cant, "accumulation without gradient sync: accelerate's accumulate() context does it when gradient_accumulation_steps is set (not a config key)")
	}
	closest := ""
	if len(cant) > 0 {
		// The apply_plan hook shards the model before prepare; accelerate
		// then looks up a TRANSFORMER_BASED_WRAP class by name, which
		// FSDP2 has renamed (FSDPLlamaDecoderLayer), and fails, and its
		// activation checkpointing would wrap modules of a sharded model.
		// NO_WRAP without checkpointing leaves the plan's model as it is.
		closest = fmt.Sprintf("fsdp_auto_wrap_policy: %s", chosen.WrapPolicy)
		if chosen.WrapPolicy == TransformerBasedWrap {
			closest += ", fsdp_transformer_layer_cls_to_wrap: " + strings.Join(chosen.LayerClasses, ",")
		}
		closest += fmt.Sprintf(", fsdp_activation_checkpointing: %v", chosen.ActivationCheckpointing)
		chosen.WrapPolicy, chosen.LayerClasses, chosen.ActivationCheckpointing = NoWrap, nil, false
	}
	return emitYAML(p, mm, chosen, decision, cant, closest, source), nil
}

func limit(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return append(xs[:n:n], fmt.Sprintf("… %d more", len(xs)-n))
}

func names(m *ir.Model, ids []ir.ModuleID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = m.Modules[id].Name
	}
	return out
}

func sameUnits(m *ir.Model, d *Decision, plan map[string]bool) bool {
	if len(d.Calls) != len(plan) {
		return false
	}
	for _, call := range d.Calls {
		if !plan[strings.Join(names(m, call), "\x00")] {
			return false
		}
	}
	return true
}

func sameRegions(d *Decision, regions map[ir.ModuleID]bool) bool {
	if len(d.Checkpointed) != len(regions) {
		return false
	}
	for _, id := range d.Checkpointed {
		if !regions[id] {
			return false
		}
	}
	return true
}

func callsText(m *ir.Model, d *Decision) string {
	var out []string
	for _, call := range d.Calls {
		out = append(out, moduleLabel(m, call))
	}
	return strings.Join(limit(out, 6), ", ")
}

func groupLabels(p *schedule.Plan) []string {
	var out []string
	for _, g := range p.Groups {
		if len(g.Modules) > 1 {
			out = append(out, "["+strings.Join(g.Modules, ", ")+"]")
		} else {
			out = append(out, g.Label())
		}
	}
	return limit(out, 6)
}

// mixedPrecisionOf finds accelerate's mixed_precision for the plan's
// units with parameters: bf16 or fp16 is MixedPrecisionPolicy(X, X, X)
// over fp32 parameters, no is no cast at all.
func mixedPrecisionOf(p *schedule.Plan, cant []string) (string, []string) {
	count := map[string]int{}
	var odd []string
	for _, g := range p.Groups {
		if len(g.Params) == 0 {
			continue
		}
		pol := g.Policy
		switch {
		case pol.Param == pol.Orig && pol.Reduce == pol.Orig && (pol.Output == ir.DTypeInvalid || pol.Output == pol.Orig):
			count["no"]++
		case pol.Orig == ir.FP32 && pol.Param == ir.BF16 && pol.Reduce == ir.BF16 && pol.Output == ir.BF16:
			count["bf16"]++
		case pol.Orig == ir.FP32 && pol.Param == ir.FP16 && pol.Reduce == ir.FP16 && pol.Output == ir.FP16:
			count["fp16"]++
		default:
			out := "None"
			if pol.Output != ir.DTypeInvalid {
				out = pol.Output.String()
			}
			odd = append(odd, fmt.Sprintf("%s (parameters %s, param_dtype %s, reduce_dtype %s, output_dtype %s)", g.Label(), pol.Orig, pol.Param, pol.Reduce, out))
			if pol.Param == ir.BF16 || pol.Param == ir.FP16 {
				count[pol.Param.String()]++
			} else {
				count["no"]++
			}
		}
	}
	best, n := "no", -1
	for _, k := range []string{"bf16", "fp16", "no"} {
		if count[k] > n {
			best, n = k, count[k]
		}
	}
	if len(odd) > 0 {
		cant = append(cant, "mixed precision: accelerate's MixedPrecisionPolicy casts parameters, gradients and outputs to one dtype (mixed_precision) over fp32 parameters; the plan's differs for "+strings.Join(limit(odd, 6), "; ")+": apply_plan sets each unit's policy")
	}
	if len(count) > 1 && len(odd) == 0 {
		cant = append(cant, "mixed precision differs between units; accelerate's mixed_precision is one: apply_plan sets each unit's policy")
	}
	return best, cant
}

// emitYAML writes the config in the form `accelerate config` writes,
// keys sorted as PyYAML's safe_dump sorts them.
func emitYAML(p *schedule.Plan, mm *Model, c *Config, d *Decision, cant []string, closest, source string) string {
	m := mm.IR
	var b strings.Builder
	com := func(s string) string { return safetext.Escape(s) }
	fmt.Fprintf(&b, "# accelerate 1.14 FSDP2 config for %s, written by fsdpc emit accelerate from %s.\n", com(p.Header.Model), com(source))
	b.WriteString("# Run with: accelerate launch --config_file THIS train.py (docs/accelerate.md).\n")
	if d != nil && closest == "" {
		b.WriteString("# accelerate's fully_shard calls under it, which are the plan's units:\n")
		for i := 0; i < len(d.Calls); i++ {
			call, tag := d.Calls[i], ""
			if i == d.Tail {
				tag = " (reshard_after_forward false)"
			}
			j := i + 1
			for len(call) == 1 && call[0] != 0 && j < len(d.Calls) && j != d.Tail && len(d.Calls[j]) == 1 && d.Calls[j][0] != 0 &&
				normalName(m.Modules[d.Calls[j][0]].Name) == normalName(m.Modules[call[0]].Name) {
				j++
			}
			if j-i > 1 {
				b.WriteString("#   " + com(rangeLabel(m, d.Calls[i:j])) + "\n")
				i = j - 1
				continue
			}
			b.WriteString("#   " + com(moduleLabel(m, call)) + tag + "\n")
		}
	}
	if len(cant) > 0 {
		b.WriteString("#\n# What accelerate's keys cannot express, which fsdpc.apply_plan covers: export the plan\n")
		b.WriteString("# (fsdpc export plan.bin -o plan.json) and call fsdpc.apply_plan(model, \"plan.json\") after\n")
		b.WriteString("# Accelerator() and before accelerator.prepare(model, optimizer); accelerate leaves a model that\n")
		b.WriteString("# is already an FSDPModule as it is (fsdp2_prepare_model), so the plan's units and settings stand:\n")
		for _, s := range cant {
			b.WriteString("#   - " + com(s) + "\n")
		}
		b.WriteString("# For that hook this config has fsdp_auto_wrap_policy NO_WRAP and no activation checkpointing:\n")
		b.WriteString("# with TRANSFORMER_BASED_WRAP accelerate looks the layer class up by name in the sharded model,\n")
		b.WriteString("# whose classes FSDP2 renamed (FSDP<class>: FSDPLlamaDecoderLayer), and fails. Without apply_plan, the closest\n")
		b.WriteString("# accelerate comes is " + com(closest) + ".\n")
	}
	b.WriteString("#\n# Not config keys: the plan's micro-batch " + fmt.Sprint(p.Train.MicroBatch) + " of " + fmt.Sprint(p.Train.SeqLen) + " tokens and " + fmt.Sprint(max(p.Train.GradAccum, 1)) + " micro-batches per step\n")
	b.WriteString("# are your script's (its batch size, Accelerator(gradient_accumulation_steps=...)).\n")
	b.WriteString("compute_environment: LOCAL_MACHINE\n")
	b.WriteString("debug: false\n")
	b.WriteString("distributed_type: FSDP\n")
	b.WriteString("downcast_bf16: 'no'\n")
	if c.Compile {
		b.WriteString("dynamo_config:\n  dynamo_backend: INDUCTOR\n")
	}
	b.WriteString("enable_cpu_affinity: false\n")
	b.WriteString("fsdp_config:\n")
	fmt.Fprintf(&b, "  fsdp_activation_checkpointing: %v\n", c.ActivationCheckpointing)
	fmt.Fprintf(&b, "  fsdp_auto_wrap_policy: %s\n", c.WrapPolicy)
	fmt.Fprintf(&b, "  fsdp_cpu_ram_efficient_loading: %v\n", c.CPURAMEfficientLoading)
	fmt.Fprintf(&b, "  fsdp_offload_params: %v\n", c.Offload)
	fmt.Fprintf(&b, "  fsdp_reshard_after_forward: %v\n", c.Reshard)
	fmt.Fprintf(&b, "  fsdp_state_dict_type: %s\n", c.StateDictType)
	if c.WrapPolicy == TransformerBasedWrap {
		fmt.Fprintf(&b, "  fsdp_transformer_layer_cls_to_wrap: %s\n", safetext.YAML(strings.Join(c.LayerClasses, ",")))
	}
	b.WriteString("  fsdp_version: 2\n")
	b.WriteString("machine_rank: 0\n")
	b.WriteString("main_training_function: main\n")
	fmt.Fprintf(&b, "mixed_precision: %s\n", safetext.YAML(c.MixedPrecision))
	fmt.Fprintf(&b, "num_machines: %d\n", c.NumMachines)
	fmt.Fprintf(&b, "num_processes: %d\n", c.NumProcesses)
	b.WriteString("rdzv_backend: static\n")
	b.WriteString("same_network: true\n")
	b.WriteString("tpu_env: []\n")
	b.WriteString("tpu_use_cluster: false\n")
	b.WriteString("tpu_use_sudo: false\n")
	b.WriteString("use_cpu: false\n")
	return b.String()
}
