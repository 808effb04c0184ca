package accelerate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// Decision is what accelerate 1.14's fsdp2_prepare_model does with the
// model under a config.
type Decision struct {
	// Calls are the fully_shard calls in the order accelerate makes them:
	// the wrap policy's, bottom-up; the input embedding; the final norm
	// with the output embedding (Tail); the root, last.
	Calls [][]ir.ModuleID
	// Tail is the index in Calls of fully_shard([final norm, output
	// embedding], reshard_after_forward=False), -1 when there is none.
	Tail int
	// Checkpointed are the modules fsdp2_apply_ac wraps in
	// checkpoint_wrapper: every child of a module the wrap policy matches.
	Checkpointed []ir.ModuleID
	// Notes say what accelerate does that a reader might not expect.
	Notes []string
}

// Decide applies the config to the model as fsdp2_prepare_model and
// fsdp2_apply_ac do, and refuses, naming the key, what accelerate 1.14
// with torch 2.14 refuses or fails on.
func Decide(c *Config, mm *Model) (*Decision, error) {
	m := mm.IR
	d := &Decision{Tail: -1}
	policy, err := c.wrapPolicy(mm, d)
	if err != nil {
		return nil, err
	}
	if c.ActivationCheckpointing {
		if policy == nil {
			return nil, c.Errorf("fsdp_activation_checkpointing", "true with no wrap policy (fsdp_auto_wrap_policy %s%s): accelerate 1.14 checkpoints the children of the modules the policy matches and fails at prepare without one (\"'NoneType' object is not callable\"); use TRANSFORMER_BASED_WRAP", c.WrapPolicy, minZero(c))
		}
		if err := c.checkpointed(mm, policy, d); err != nil {
			return nil, err
		}
	}

	wrapped := make([]bool, len(m.Modules))
	insideWrapped := func(id ir.ModuleID) (ir.ModuleID, bool) {
		for p := m.Modules[id].Parent; p != ir.NoModule; p = m.Modules[p].Parent {
			if wrapped[p] {
				return p, true
			}
		}
		return 0, false
	}
	if policy != nil {
		key := "fsdp_transformer_layer_cls_to_wrap"
		if c.WrapPolicy == SizeBasedWrap {
			key = "fsdp_min_num_params"
		} else if c.LayerClasses == nil {
			key = "fsdp_auto_wrap_policy"
		}
		for _, id := range postOrder(m) {
			if id == 0 || !policy(id) {
				continue
			}
			md := &m.Modules[id]
			if mm.Class[id] == "ModuleList" || md.Repeat > 0 {
				return nil, c.Errorf(key, "the wrap policy matches %q, a ModuleList: torch 2.14's fully_shard refuses it (\"fully_shard does not support containers that do not implement forward\"), so accelerate fails at prepare%s", md.Name, sizeHint(c))
			}
			if p := computeParent(m, id); p != ir.NoModule {
				return nil, c.Errorf(key, "the wrap policy matches %q, part of %q, which fsdpc models as one computation (%s): fsdpc cannot plan a unit inside it%s", md.Name, m.Modules[p].Name, m.Modules[p].Kind, sizeHint(c))
			}
			wrapped[id] = true
			d.Calls = append(d.Calls, []ir.ModuleID{id})
		}
	}

	// The embedding and the tail accelerate carves whatever the policy.
	if mm.InputEmbed != ir.NoModule && mm.OutputEmbed != ir.NoModule && tied(m, mm.InputEmbed, mm.OutputEmbed) {
		return nil, fmt.Errorf("%s: the model ties its input and output embeddings (%s and %s share their weight, tie_word_embeddings): accelerate 1.14 shards [final norm, %s] together and the root takes %s's weight again, which torch 2.14's FSDP2 refuses at the first forward (\"shared with a parameter already managed by another FSDP group\"); untie them (tie_word_embeddings: false) to plan it",
			c.File, m.Modules[mm.InputEmbed].Name, m.Modules[mm.OutputEmbed].Name, m.Modules[mm.InputEmbed].Name, m.Modules[mm.OutputEmbed].Name)
	}
	carve := func(id ir.ModuleID, what string) error {
		if p, in := insideWrapped(id); in {
			return c.Errorf(policyKey(c), "the wrap policy shards %q, which holds the %s %q: accelerate 1.14 then calls fully_shard on %q, whose weight is already sharded, and torch 2.14 fails at prepare (TypeError)%s", m.Modules[p].Name, what, m.Modules[id].Name, m.Modules[id].Name, sizeHint(c))
		}
		return nil
	}
	if id := mm.InputEmbed; id != ir.NoModule && !wrapped[id] {
		if err := carve(id, "input embedding"); err != nil {
			return nil, err
		}
		wrapped[id] = true
		d.Calls = append(d.Calls, []ir.ModuleID{id})
	}
	var tail []ir.ModuleID
	for _, id := range []ir.ModuleID{mm.FinalNorm, mm.OutputEmbed} {
		if id == ir.NoModule || wrapped[id] {
			continue
		}
		what := "final norm"
		if id == mm.OutputEmbed {
			what = "output embedding"
		}
		if err := carve(id, what); err != nil {
			return nil, err
		}
		tail = append(tail, id)
	}
	if len(tail) > 0 {
		for _, id := range tail {
			wrapped[id] = true
		}
		d.Tail = len(d.Calls)
		d.Calls = append(d.Calls, tail)
	}
	d.Calls = append(d.Calls, []ir.ModuleID{0})

	// fsdpc plans a region inside a unit, not a unit inside a region.
	for _, r := range d.Checkpointed {
		for _, call := range d.Calls {
			for _, u := range call {
				if u != 0 && u != r && isAncestor(m, r, u) {
					return nil, c.Errorf("fsdp_activation_checkpointing", "accelerate checkpoints %q, which holds the FSDP unit %q: FSDP2 gathers the unit again when backward recomputes the region, which fsdpc does not model", m.Modules[r].Name, m.Modules[u].Name)
				}
			}
		}
	}
	return d, nil
}

func minZero(c *Config) string {
	if c.WrapPolicy == SizeBasedWrap {
		return " with fsdp_min_num_params 0, which accelerate drops"
	}
	return ""
}

func sizeHint(c *Config) string {
	if c.WrapPolicy == SizeBasedWrap {
		return fmt.Sprintf(" (fsdp_min_num_params %d counts every parameter below a module, so the layer list outgrows any one layer)", c.MinNumParams)
	}
	return ""
}

func policyKey(c *Config) string {
	switch {
	case c.WrapPolicy == SizeBasedWrap:
		return "fsdp_min_num_params"
	case c.LayerClasses != nil:
		return "fsdp_transformer_layer_cls_to_wrap"
	}
	return "fsdp_auto_wrap_policy"
}

// wrapPolicy is fsdp2_prepare_auto_wrap_policy's policy after
// set_auto_wrap_policy: nil for no policy.
func (c *Config) wrapPolicy(mm *Model, d *Decision) (func(ir.ModuleID) bool, error) {
	m := mm.IR
	switch c.WrapPolicy {
	case TransformerBasedWrap:
		names, key := c.LayerClasses, "fsdp_transformer_layer_cls_to_wrap"
		if names == nil {
			names, key = mm.NoSplit, "fsdp_auto_wrap_policy"
		}
		have := mm.classes()
		want := map[string]bool{}
		for _, name := range names {
			if _, ok := have[name]; ok {
				want[name] = true
				continue
			}
			if where, ok := mm.Unmodelled[name]; ok {
				return nil, c.Errorf(key, "class %q is the class of %s, modules without parameters that fsdpc does not model: FSDP2 would make units holding nothing", name, strings.Join(where, ", "))
			}
			from := ""
			if c.LayerClasses == nil {
				from = fmt.Sprintf(" (no fsdp_transformer_layer_cls_to_wrap: accelerate wraps the model's _no_split_modules, %s, and fails on this one; name the layer class)", quoteList(mm.NoSplit))
			}
			return nil, c.Errorf(key, "accelerate cannot find the transformer layer class %q in the model (%s)%s; the model's classes with parameters: %s", name, mm.Source, from, strings.Join(sortedClasses(have), ", "))
		}
		if len(want) == 0 {
			d.Notes = append(d.Notes, "TRANSFORMER_BASED_WRAP with no layer class (the model has no _no_split_modules): the policy matches nothing")
			return func(ir.ModuleID) bool { return false }, nil
		}
		return func(id ir.ModuleID) bool { return want[mm.Class[id]] }, nil
	case SizeBasedWrap:
		if c.MinNumParams <= 0 {
			d.Notes = append(d.Notes, "SIZE_BASED_WRAP with fsdp_min_num_params 0: accelerate drops the policy (as NO_WRAP)")
			return nil, nil
		}
		sizes := subtreeParams(m)
		return func(id ir.ModuleID) bool { return sizes[id] > c.MinNumParams }, nil
	}
	return nil, nil
}

// checkpointed is fsdp2_apply_ac: every module whose parent the policy
// matches is wrapped in checkpoint_wrapper.
func (c *Config) checkpointed(mm *Model, policy func(ir.ModuleID) bool, d *Decision) error {
	m := mm.IR
	for i := 1; i < len(m.Modules); i++ {
		p := m.Modules[i].Parent
		if !policy(p) {
			continue
		}
		if q := computeParent(m, ir.ModuleID(i)); q != ir.NoModule {
			return c.Errorf("fsdp_activation_checkpointing", "accelerate would checkpoint %q, the children of %q, one by one, but fsdpc models %q as one computation (%s) and cannot recompute part of it", m.Modules[i].Name, m.Modules[p].Name, m.Modules[q].Name, m.Modules[q].Kind)
		}
		d.Checkpointed = append(d.Checkpointed, ir.ModuleID(i))
	}
	for _, a := range d.Checkpointed {
		for _, b := range d.Checkpointed {
			if a != b && isAncestor(m, a, b) {
				return c.Errorf("fsdp_activation_checkpointing", "accelerate checkpoints both %q and %q inside it (the wrap policy matches modules one inside another): fsdpc does not nest checkpoint regions", m.Modules[a].Name, m.Modules[b].Name)
			}
		}
	}
	return nil
}

// computeParent returns the compute module (a kind fsdpc costs as one
// piece) strictly above id, or NoModule.
func computeParent(m *ir.Model, id ir.ModuleID) ir.ModuleID {
	for p := m.Modules[id].Parent; p != ir.NoModule; p = m.Modules[p].Parent {
		if m.Modules[p].Compute {
			return p
		}
	}
	return ir.NoModule
}

func isAncestor(m *ir.Model, a, b ir.ModuleID) bool {
	for p := m.Modules[b].Parent; p != ir.NoModule; p = m.Modules[p].Parent {
		if p == a {
			return true
		}
	}
	return false
}

// postOrder lists the modules children first, as accelerate's
// get_module_children_bottom_up.
func postOrder(m *ir.Model) []ir.ModuleID {
	var out []ir.ModuleID
	var walk func(id ir.ModuleID)
	walk = func(id ir.ModuleID) {
		for _, c := range m.RegisteredChildren(id) {
			walk(c)
		}
		out = append(out, id)
	}
	walk(0)
	return out
}

// subtreeParams is sum(p.numel() for p in module.parameters()) for every
// module: each tensor once, tied parameters counted under their owner.
func subtreeParams(m *ir.Model) []int64 {
	owners := make([]map[ir.ParamID]bool, len(m.Modules))
	sizes := make([]int64, len(m.Modules))
	for _, id := range postOrder(m) {
		own := map[ir.ParamID]bool{}
		for _, c := range m.Modules[id].Children {
			for p := range owners[c] {
				own[p] = true
			}
			owners[c] = nil
		}
		for _, p := range m.Modules[id].Params {
			if t := m.Params[p].TiedTo; t != ir.NoParam {
				p = t
			}
			own[p] = true
		}
		for p := range own {
			sizes[id] += m.Params[p].Numel
		}
		owners[id] = own
	}
	return sizes
}

// tied reports whether two modules share a parameter.
func tied(m *ir.Model, a, b ir.ModuleID) bool {
	owner := func(p ir.ParamID) ir.ParamID {
		if t := m.Params[p].TiedTo; t != ir.NoParam {
			return t
		}
		return p
	}
	for _, p := range m.Modules[a].Params {
		for _, q := range m.Modules[b].Params {
			if owner(p) == owner(q) {
				return true
			}
		}
	}
	return false
}

func quoteList(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	q := slices.Clone(xs)
	for i, x := range q {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
