package torchgen

import (
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// CompareAccelerate checks what accelerate's FSDP2 path did against the
// plan fsdpc made from the same config: the units (which modules
// accelerate called fully_shard on, each call nested-first as FSDP2
// needs, and every FSDP2 state with the plan's reshard_after_forward,
// mixed precision and offload), then on every rank what Compare checks
// (each unit's parameters and padded shard sizes, every collective's
// size, reduce op and group, the order of unshards, copy-outs and
// reshards) and every collective's dtype; and, given the model m the
// plan was made from (nil: not compared), that accelerate's activation
// checkpointing wrapped exactly the modules m marks checkpoint = true. It
// returns one line per mismatch.
func CompareAccelerate(m *ir.Model, p *schedule.Plan, recs []AccelerateRecord) []string {
	if len(recs) == 0 {
		return []string{"no rank recorded anything"}
	}
	for r, rec := range recs {
		if rec.Error != "" {
			return []string{fmt.Sprintf("accelerate's run failed on rank %d (%s): %s", r, rec.Where, rec.Error)}
		}
	}
	bad := compareUnits(p, recs[0])
	if m != nil {
		bad = append(bad, compareCheckpointed(m, recs[0].Checkpointed)...)
	}
	perRank := make([][]string, len(recs))
	for r, rec := range recs {
		perRank[r] = append(Compare(p, []Record{rec.Record}), compareDTypes(p, 0, rec.Record)...)
	}
	return append(bad, mergeRanks(perRank)...)
}

// mergeRanks lists each rank's mismatches (each written as of rank 0),
// saying "every rank" once for a mismatch all ranks have alike.
func mergeRanks(perRank [][]string) []string {
	count := map[string]int{}
	for _, lines := range perRank {
		seen := map[string]bool{}
		for _, l := range lines {
			if !seen[l] {
				seen[l] = true
				count[l]++
			}
		}
	}
	var out []string
	done := map[string]bool{}
	for r, lines := range perRank {
		for _, l := range lines {
			switch {
			case count[l] == len(perRank) && len(perRank) > 1:
				if !done[l] {
					done[l] = true
					rest, _ := strings.CutPrefix(l, "rank 0")
					out = append(out, "every rank: "+strings.TrimPrefix(strings.TrimPrefix(rest, ":"), " "))
				}
			default:
				out = append(out, strings.Replace(l, "rank 0", fmt.Sprintf("rank %d", r), 1))
			}
		}
	}
	return out
}

func moduleList(mods []string) string {
	q := make([]string, len(mods))
	for i, m := range mods {
		if m == "" {
			m = "(root)"
		}
		q[i] = m
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// compareUnits checks accelerate's units against the plan's groups.
func compareUnits(p *schedule.Plan, rec AccelerateRecord) []string {
	var bad []string
	key := func(m []string) string { return strings.Join(m, "\x00") }
	groups := map[string]int{}
	for i, g := range p.Groups {
		groups[key(g.Modules)] = i
	}
	seen := map[int]bool{}
	for _, st := range rec.States {
		gi, ok := groups[key(st.Modules)]
		if !ok {
			bad = append(bad, fmt.Sprintf("accelerate made a unit of %s (%d parameters) that the plan does not have", moduleList(st.Modules), len(st.Params)))
			continue
		}
		seen[gi] = true
		g := &p.Groups[gi]
		if len(st.Params) == 0 {
			continue // no parameter group: no policy to compare (Compare names missing parameters)
		}
		if got, want := reshardText(st.Reshard), planReshard(g); got != want {
			bad = append(bad, fmt.Sprintf("unit %s: reshard_after_forward is %s under accelerate, %s in the plan", g.Label(), got, want))
		}
		for _, d := range []struct {
			what      string
			got       string
			want      ir.DType
			unsetNone bool
		}{{"param_dtype", st.ParamDType, g.Policy.Param, false}, {"reduce_dtype", st.ReduceDType, g.Policy.Reduce, false}, {"output_dtype", st.OutputDType, g.Policy.Output, true}} {
			if msg := compareDType(d.got, d.want, g.Policy.Orig, d.unsetNone); msg != "" {
				bad = append(bad, fmt.Sprintf("unit %s: %s is %s", g.Label(), d.what, msg))
			}
		}
		if st.Offload != g.Policy.Offload {
			bad = append(bad, fmt.Sprintf("unit %s: CPU offload is %v under accelerate, %v in the plan", g.Label(), st.Offload, g.Policy.Offload))
		}
	}
	for i, g := range p.Groups {
		if !seen[i] {
			bad = append(bad, fmt.Sprintf("the plan's unit %s (modules %s) is no unit under accelerate", g.Label(), moduleList(g.Modules)))
		}
	}
	bad = append(bad, compareCallOrder(rec.Calls)...)
	return bad
}

// compareCallOrder checks that every fully_shard call came before the call
// on any module containing one of its modules (FSDP2 gives a unit the
// parameters no earlier unit took, so a parent sharded first would take
// its children's), and that the calls made one state each.
func compareCallOrder(calls []FullyShardArg) []string {
	var bad []string
	contains := func(outer, inner string) bool {
		return outer == "" && inner != "" || strings.HasPrefix(inner, outer+".")
	}
	for i, c := range calls {
		for _, later := range calls[i+1:] {
			for _, m := range c.Modules {
				for _, l := range later.Modules {
					if contains(m, l) {
						bad = append(bad, fmt.Sprintf("accelerate called fully_shard on %s before %s, which it contains", moduleList(c.Modules), moduleList(later.Modules)))
					}
				}
			}
		}
	}
	return bad
}

func reshardText(v any) string {
	switch x := v.(type) {
	case bool:
		return fmt.Sprint(x)
	case float64:
		return fmt.Sprintf("%d ranks", int(x))
	case nil:
		return "unset"
	}
	return fmt.Sprint(v)
}

func planReshard(g *schedule.Group) string {
	switch g.Policy.Reshard {
	case schedule.ReshardTrue:
		return "true"
	case schedule.ReshardFalse:
		return "false"
	}
	return fmt.Sprintf("%d ranks", g.Policy.ReshardTo)
}

// compareDType compares a MixedPrecisionPolicy dtype FSDP2 holds (torch's
// name; "" for None) with the plan's resolved one. None means the
// parameters' own dtype for param and reduce dtypes (the plan resolves it
// to orig), and no cast for the output dtype (ir.DTypeInvalid).
func compareDType(got string, want, orig ir.DType, unsetNone bool) string {
	var g ir.DType
	switch {
	case got == "" && unsetNone:
		g = ir.DTypeInvalid
	case got == "":
		g = orig
	default:
		var ok bool
		if g, ok = ir.ParseDType(got); !ok {
			return fmt.Sprintf("%s under accelerate, which fsdpc does not know", got)
		}
	}
	if g == want || (unsetNone && want == orig && g == ir.DTypeInvalid) || (unsetNone && g == orig && want == ir.DTypeInvalid) {
		return ""
	}
	name := func(d ir.DType) string {
		if d == ir.DTypeInvalid {
			return "None"
		}
		return d.String()
	}
	return fmt.Sprintf("%s under accelerate, %s in the plan", name(g), name(want))
}

// compareDTypes checks each collective's dtype against the plan's, kind
// by kind in issue order (Compare checks their sizes): an all-gather in
// its group's gather dtype, a reduction in the op's.
func compareDTypes(p *schedule.Plan, rank int, rec Record) []string {
	var bad []string
	for _, ck := range collectiveKinds {
		var want []schedule.Op
		for _, op := range p.Ops {
			if op.Kind == ck.kind && op.PGSize > 1 {
				want = append(want, op)
			}
		}
		i := 0
		for _, c := range rec.Collectives {
			if c.Op != ck.name {
				continue
			}
			if i >= len(want) {
				break
			}
			w := want[i]
			i++
			dt := w.DType
			if ck.kind == schedule.OpAllGather && w.Group >= 0 && int(w.Group) < len(p.Groups) {
				dt = gatherDType(&p.Groups[w.Group])
			}
			got, ok := ir.ParseDType(c.DType)
			if !ok || got != dt {
				bad = append(bad, fmt.Sprintf("rank %d %s %d (%s) of %s: dtype %s in FSDP2, %s in the plan", rank, ck.name, i, c.Phase, groupName(p, int(w.Group)), c.DType, dt))
				break // later ones of the kind usually differ alike
			}
		}
	}
	return bad
}

// compareCheckpointed checks the modules accelerate wrapped with
// checkpoint_wrapper against the model's checkpoint regions.
func compareCheckpointed(m *ir.Model, got []string) []string {
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	marked := map[string]bool{}
	var bad []string
	for _, mod := range m.Modules {
		if !mod.Checkpoint {
			continue
		}
		marked[mod.Name] = true
		if !have[mod.Name] {
			bad = append(bad, fmt.Sprintf("the model checkpoints %s, accelerate does not", moduleList([]string{mod.Name})))
		}
	}
	for _, g := range got {
		if !marked[g] {
			bad = append(bad, fmt.Sprintf("accelerate checkpoints %s, the model does not", moduleList([]string{g})))
		}
	}
	return bad
}
