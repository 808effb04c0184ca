package accelerate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
)

// Source says what the model file is made from, for its header.
type Source struct {
	ConfigSrc []byte // the accelerate config's bytes
	Model     string // the MODEL argument: a zoo name, a file, a config.json
}

var headerRE = regexp.MustCompile(`^\s*\[\[?\s*([A-Za-z0-9_."' -]+?)\s*\]\]?\s*(#.*)?$`)

// Write rewrites the model file base (the text m was loaded from) so its
// policy, training and cluster say what accelerate does under c: the
// units of d, reshard_after_forward, mixed precision and offload as
// accelerate sets them, the modules it checkpoints, num_processes and
// num_machines; a header says what came from where.
func Write(base []byte, c *Config, mm *Model, d *Decision, src Source) ([]byte, error) {
	m := mm.IR
	lines := strings.Split(strings.TrimRight(string(base), "\n"), "\n")

	// Sections by their header line.
	type section struct {
		name       string
		start, end int // header line, one past the last line
	}
	var secs []section
	for i, l := range lines {
		if g := headerRE.FindStringSubmatch(l); g != nil && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			if len(secs) > 0 {
				secs[len(secs)-1].end = i
			}
			secs = append(secs, section{name: strings.Trim(g[1], " "), start: i})
		}
	}
	if len(secs) > 0 {
		secs[len(secs)-1].end = len(lines)
	}
	drop := map[int]bool{}
	replace := map[int]string{}
	after := map[int][]string{}
	var top []string // lines before the first header
	policyAt := -1
	found := map[string]int{}
	for _, s := range secs {
		found[s.name] = s.start
		if s.name == "policy" || s.name == "policy.override" {
			if policyAt < 0 {
				policyAt = s.start
			}
			for i := s.start; i < s.end; i++ {
				drop[i] = true
			}
		}
	}
	setKey := func(sec, key, value string, remove ...string) {
		for _, s := range secs {
			if s.name != sec {
				continue
			}
			done := false
			for i := s.start + 1; i < s.end; i++ {
				k := keyOf(lines[i])
				if k == key {
					replace[i] = key + " = " + value
					done = true
				}
				if slices.Contains(remove, k) {
					drop[i] = true
				}
			}
			if !done {
				after[s.start] = append(after[s.start], key+" = "+value)
			}
			return
		}
		top = append(top, "", "["+sec+"]", key+" = "+value)
	}
	if c.MixedPrecision != "no" {
		// accelerate upcasts trainable parameters to fp32 before
		// fully_shard when mixed_precision is not no.
		setKey("model", "dtype", `"fp32"`+"            # accelerate upcasts trainable parameters to fp32 under mixed precision")
	}
	setKey("train", "checkpointing", `"none"`+"    # accelerate's checkpointing is the modules marked checkpoint = true", "checkpoint_interval")
	setKey("train", "compile", fmt.Sprint(c.Compile))
	setKey("cluster", "world_size", fmt.Sprintf("%d", c.NumProcesses)+"          # num_processes", "nodes", "mesh")
	setKey("cluster", "gpus_per_node", fmt.Sprintf("%d", c.NumProcesses/c.NumMachines)+"       # num_processes / num_machines")

	// checkpoint = true on the declaration of each checkpointed module;
	// every module made from that declaration must be one.
	if len(d.Checkpointed) > 0 {
		byDecl := map[ir.Pos][]ir.ModuleID{}
		for i := range m.Modules {
			// A kind's own children (an attention's q_proj) share its
			// declaration.
			if computeParent(m, ir.ModuleID(i)) == ir.NoModule {
				byDecl[m.Modules[i].Pos] = append(byDecl[m.Modules[i].Pos], ir.ModuleID(i))
			}
		}
		marked := map[ir.Pos]bool{}
		want := map[ir.ModuleID]bool{}
		for _, id := range d.Checkpointed {
			want[id] = true
		}
		for _, id := range d.Checkpointed {
			pos := m.Modules[id].Pos
			if marked[pos] {
				continue
			}
			for _, other := range byDecl[pos] {
				if !want[other] {
					return nil, c.Errorf("fsdp_activation_checkpointing", "accelerate checkpoints %q but not %q, which the model file declares once: write the model with those modules apart", m.Modules[id].Name, m.Modules[other].Name)
				}
			}
			if pos.Line < 1 || pos.Line > len(lines) || headerRE.FindStringSubmatch(lines[pos.Line-1]) == nil {
				return nil, fmt.Errorf("%s: module %q is not declared under a [[...module]] header, where fsdpc can mark it checkpoint = true", m.File, m.Modules[id].Name)
			}
			marked[pos] = true
			after[pos.Line-1] = append(after[pos.Line-1], "checkpoint = true         # fsdp_activation_checkpointing: checkpoint_wrapper")
		}
	}

	pol := policyText(c, mm, d)
	var out []string
	out = append(out, headerText(c, mm, d, src)...)
	if len(secs) == 0 {
		out = append(out, lines...)
	}
	if len(secs) > 0 {
		out = append(out, lines[:secs[0].start]...)
	}
	out = append(out, top...)
	if len(top) > 0 {
		out = append(out, "")
	}
	inserted := false
	for i := range lines {
		if len(secs) == 0 || i < secs[0].start {
			continue
		}
		if i == policyAt {
			out = append(out, pol...)
			inserted = true
		}
		if policyAt < 0 && !inserted && isModuleHeader(lines[i]) {
			out = append(out, pol...)
			out = append(out, "")
			inserted = true
		}
		if drop[i] {
			continue
		}
		if r, ok := replace[i]; ok {
			out = append(out, r)
		} else {
			out = append(out, lines[i])
		}
		out = append(out, after[i]...)
	}
	if !inserted {
		out = append(out, "")
		out = append(out, pol...)
	}
	return []byte(strings.Join(out, "\n") + "\n"), nil
}

func isModuleHeader(l string) bool {
	t := strings.TrimSpace(l)
	return strings.HasPrefix(t, "[[module") || strings.HasPrefix(t, "[[param") || strings.HasPrefix(t, "[block")
}

var keyRE = regexp.MustCompile(`^\s*([A-Za-z0-9_-]+)\s*=`)

func keyOf(l string) string {
	if g := keyRE.FindStringSubmatch(l); g != nil {
		return g[1]
	}
	return ""
}

func comment(s string) string { return safetext.TOMLComment(s) }

func moduleLabel(m *ir.Model, ids []ir.ModuleID) string {
	var names []string
	for _, id := range ids {
		n := m.Modules[id].Name
		if n == "" {
			n = "(root)"
		}
		names = append(names, n)
	}
	if len(names) == 1 {
		return names[0]
	}
	return "[" + strings.Join(names, ", ") + "]"
}

func headerText(c *Config, mm *Model, d *Decision, src Source) []string {
	m := mm.IR
	sum := sha256.Sum256(src.ConfigSrc)
	h := []string{
		fmt.Sprintf("# %s under accelerate: written by `fsdpc import accelerate` from %s", comment(m.Name), comment(c.File)),
		fmt.Sprintf("# (sha256 %s) and %s.", hex.EncodeToString(sum[:8]), comment(src.Model)),
		"#",
		"# [policy], checkpoint = true, [train] checkpointing and [cluster] say what",
		"# accelerate 1.14's FSDP2 path (fsdp2_prepare_model, fsdp2_apply_ac) does with",
		"# this model under the config (docs/accelerate.md); the rest is the model's.",
		"# Module classes: " + comment(mm.Source) + ".",
	}
	if c.FromFSDP1 || len(c.Notes) > 0 {
		h = append(h, "#")
		if c.FromFSDP1 {
			h = append(h, "# An FSDP1 config, read through accelerate to-fsdp2's mapping:")
		} else {
			h = append(h, "# Keys accelerate's FSDP2 path ignores:")
		}
		for _, n := range c.Notes {
			h = append(h, "#   "+comment(n.String()))
		}
	}
	for _, n := range d.Notes {
		h = append(h, "# "+comment(n))
	}
	h = append(h, "#")
	h = append(h, loadAndSave(c, m)...)
	return append(h, "")
}

// loadAndSave says what fsdp_cpu_ram_efficient_loading and
// fsdp_state_dict_type mean for this model in host memory.
func loadAndSave(c *Config, m *ir.Model) []string {
	var total, largest int64
	for i := range m.Params {
		p := &m.Params[i]
		if p.TiedTo != ir.NoParam {
			continue
		}
		b := p.Bytes()
		if c.MixedPrecision != "no" && p.RequiresGrad && p.DType.IsFloat() {
			b = p.Numel * ir.FP32.Size()
		}
		total += b
		largest = max(largest, b)
	}
	perMachine := c.NumProcesses / c.NumMachines
	var out []string
	if c.CPURAMEfficientLoading {
		out = append(out,
			fmt.Sprintf("# Loading (fsdp_cpu_ram_efficient_loading true): only rank 0 holds the weights in host memory, %s;", gib(total)),
			"# the other ranks build the model on the meta device, and fsdp2_load_full_state_dict",
			fmt.Sprintf("# broadcasts each parameter from rank 0 into the shards (a full parameter on the GPU at a time, at most %s).", gib(largest)))
	} else {
		out = append(out,
			fmt.Sprintf("# Loading (fsdp_cpu_ram_efficient_loading false): every process loads the whole model, %s of host memory each,", gib(total)),
			fmt.Sprintf("# %s on each machine of %d processes, before fully_shard moves each unit to its GPU.", gib(total*int64(perMachine)), perMachine))
	}
	if c.StateDictType == "FULL_STATE_DICT" {
		out = append(out,
			fmt.Sprintf("# Saving (fsdp_state_dict_type FULL_STATE_DICT): rank 0 gathers the whole state dict to host memory (%s of", gib(total)),
			"# weights, the optimizer state besides), the other ranks nothing; `fsdpc checkpoint` describes the sharded save instead.")
	} else {
		out = append(out,
			"# Saving (fsdp_state_dict_type SHARDED_STATE_DICT): every rank writes its own shards with torch.distributed.checkpoint,",
			"# the checkpoint `fsdpc checkpoint plan.bin` describes.")
	}
	return out
}

func gib(b int64) string { return ir.FormatBytes(b) }

func dtypeOf(mp string) string {
	if mp == "fp16" {
		return "fp16"
	}
	return "bf16"
}

func policyText(c *Config, mm *Model, d *Decision) []string {
	m := mm.IR
	p := []string{"[policy]", "# accelerate's fully_shard calls, in its order:"}
	for i := 0; i < len(d.Calls); i++ {
		call := d.Calls[i]
		why := "the wrap policy (" + c.WrapPolicy + ")"
		if c.WrapPolicy == TransformerBasedWrap && len(call) == 1 {
			why = fmt.Sprintf("the wrap policy (%s: %s)", c.WrapPolicy, mm.Class[call[0]])
		}
		// A run of the policy's calls on one place of consecutive layers
		// is one line: model.layers.{0..31}.
		if i != d.Tail && len(call) == 1 && call[0] != 0 && call[0] != mm.InputEmbed {
			j := i + 1
			for j < len(d.Calls) && j != d.Tail && len(d.Calls[j]) == 1 && d.Calls[j][0] != 0 && d.Calls[j][0] != mm.InputEmbed &&
				normalName(m.Modules[d.Calls[j][0]].Name) == normalName(m.Modules[call[0]].Name) {
				j++
			}
			if j-i > 1 {
				p = append(p, "#   "+comment(rangeLabel(m, d.Calls[i:j]))+": "+why)
				i = j - 1
				continue
			}
		}
		switch {
		case len(call) == 1 && call[0] == 0:
			why = "the root, with no reshard_after_forward: FSDP2's default, false for the root"
		case i == d.Tail:
			why = "accelerate's tail (the final norm and the output embedding it finds), reshard_after_forward = false"
		case call[0] == mm.InputEmbed:
			why = "the input embedding, carved whatever the policy"
		}
		p = append(p, "#   "+comment(moduleLabel(m, call))+": "+why)
	}
	p = append(p, "units = "+unitsValue(m, d))
	p = append(p, fmt.Sprintf("reshard_after_forward = %v  # fsdp_reshard_after_forward", c.Reshard))
	if c.MixedPrecision == "no" {
		p = append(p, "# mixed_precision no: MixedPrecisionPolicy() (no casts)")
	} else {
		dt := dtypeOf(c.MixedPrecision)
		p = append(p, fmt.Sprintf("param_dtype = %q           # mixed_precision %s: MixedPrecisionPolicy(param_dtype, reduce_dtype,", dt, c.MixedPrecision),
			fmt.Sprintf("reduce_dtype = %q          # output_dtype all %s)", dt, dt),
			fmt.Sprintf("output_dtype = %q", dt))
	}
	p = append(p, fmt.Sprintf("offload = %v                # fsdp_offload_params", c.Offload))
	if d.Tail >= 0 {
		p = append(p, "", "[[policy.override]]         # fully_shard([final norm, output embedding], reshard_after_forward=False)",
			"match = "+safetext.TOML(m.Modules[d.Calls[d.Tail][0]].Name), "reshard_after_forward = false")
	}
	p = append(p, "", "[[policy.override]]         # the root: FSDP2's reshard_after_forward None, false for the root",
		`match = ""`, "reshard_after_forward = false", "")
	return p
}

// rangeLabel names a run of calls on model.layers.N for consecutive N
// as model.layers.{0..31}, any other run by its first and last.
func rangeLabel(m *ir.Model, calls [][]ir.ModuleID) string {
	first, last := m.Modules[calls[0][0]], m.Modules[calls[len(calls)-1][0]]
	if first.Instance >= 0 && last.Instance-first.Instance == len(calls)-1 && first.Parent == last.Parent {
		prefix := m.Modules[first.Parent].Name
		return fmt.Sprintf("%s.{%d..%d}", prefix, first.Instance, last.Instance)
	}
	return fmt.Sprintf("%s … %s (%d modules)", first.Name, last.Name, len(calls))
}

// unitsValue writes the units of d other than the root: a glob for every
// module a glob with its layer indices as * matches when the glob
// matches units only, names otherwise, the tail as one group.
func unitsValue(m *ir.Model, d *Decision) string {
	unit := map[ir.ModuleID]bool{}
	for i, call := range d.Calls {
		if i == d.Tail || (len(call) == 1 && call[0] == 0) {
			continue
		}
		for _, id := range call {
			unit[id] = true
		}
	}
	var items []string
	done := map[string]bool{}
	for i := range m.Modules {
		id := ir.ModuleID(i)
		if !unit[id] {
			continue
		}
		name := m.Modules[i].Name
		glob := normalName(name)
		if done[glob] {
			continue
		}
		all := true
		if g, err := ir.CompileGlob(glob); err == nil {
			for j := range m.Modules {
				if g.Match(m.Modules[j].Name) && !unit[ir.ModuleID(j)] {
					all = false
					break
				}
			}
		} else {
			all = false
		}
		if all {
			done[glob] = true
			items = append(items, safetext.TOML(glob))
		} else {
			items = append(items, safetext.TOML(name))
		}
	}
	if d.Tail >= 0 {
		var g []string
		for _, id := range d.Calls[d.Tail] {
			g = append(g, safetext.TOML(m.Modules[id].Name))
		}
		items = append(items, "["+strings.Join(g, ", ")+"]")
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// Check confirms that the model loaded from Write's text has d's units
// and regions: every module the written patterns make a unit, and every
// module marked checkpoint, is one accelerate makes so.
func Check(m *ir.Model, d *Decision, orig *ir.Model) error {
	want := map[string]bool{}
	for i, call := range d.Calls {
		if len(call) == 1 && call[0] == 0 {
			continue
		}
		if i == d.Tail {
			continue
		}
		for _, id := range call {
			want[orig.Modules[id].Name] = true
		}
	}
	got := map[string]bool{}
	for i := range m.Modules {
		name := m.Modules[i].Name
		for _, p := range m.Policy.Units {
			if p.Glob.Match(name) {
				got[name] = true
			}
		}
	}
	for _, name := range keysOf(want) {
		if !got[name] {
			return fmt.Errorf("internal error: the written policy does not make %q a unit", name)
		}
	}
	for _, name := range keysOf(got) {
		if !want[name] {
			return fmt.Errorf("internal error: the written policy makes %q a unit, which accelerate does not", name)
		}
	}
	regions := map[string]bool{}
	for _, id := range d.Checkpointed {
		regions[orig.Modules[id].Name] = true
	}
	for i := range m.Modules {
		if m.Modules[i].Checkpoint != regions[m.Modules[i].Name] {
			return fmt.Errorf("%q is checkpointed in the written model but not by accelerate, or the other way round: the model file marks it checkpoint = %v; remove that mark", m.Modules[i].Name, m.Modules[i].Checkpoint)
		}
	}
	return nil
}
