package torchgen

import (
	"fmt"

	"github.com/fsdpc/fsdpc/schedule"
)

// Compare checks every rank's record against the plan: each group's
// parameters in FSDP2's order with their padded shard sizes, the
// collectives of each kind in issue order (size in bytes, reduce op, group
// size), and the order in which the groups unshard (prefetches included),
// copy out and reshard (compareOrder). It returns one line per mismatch;
// none means FSDP2 did what the plan says.
func Compare(p *schedule.Plan, recs []Record) []string {
	var bad []string
	for r, rec := range recs {
		bad = append(bad, compareLayouts(p, r, rec)...)
		bad = append(bad, compareCollectives(p, r, rec)...)
		bad = append(bad, compareOrder(p, r, rec)...)
	}
	return bad
}

func compareLayouts(p *schedule.Plan, rank int, rec Record) []string {
	var bad []string
	if len(rec.Layouts) != len(p.Groups) {
		return []string{fmt.Sprintf("rank %d: %d groups recorded, the plan has %d", rank, len(rec.Layouts), len(p.Groups))}
	}
	for i, g := range p.Groups {
		got := rec.Layouts[i].Params
		if len(got) != len(g.Params) {
			if len(got) == 0 && g.Root {
				bad = append(bad, fmt.Sprintf("rank %d group %s: FSDP2 made no parameter group, the plan has %d parameters", rank, g.Label(), len(g.Params)))
				continue
			}
			bad = append(bad, fmt.Sprintf("rank %d group %s: FSDP2 manages %d parameters, the plan %d", rank, g.Label(), len(got), len(g.Params)))
			continue
		}
		for j, gp := range g.Params {
			if got[j].FQN != gp.Name {
				bad = append(bad, fmt.Sprintf("rank %d group %s: parameter %d is %s in FSDP2, %s in the plan", rank, g.Label(), j, got[j].FQN, gp.Name))
				break
			}
			n := int64(1)
			for _, d := range got[j].Padded {
				n *= d
			}
			if n != gp.ShardNumel {
				bad = append(bad, fmt.Sprintf("rank %d group %s: %s shard is %d elements in FSDP2 (%v), %d in the plan", rank, g.Label(), gp.Name, n, got[j].Padded, gp.ShardNumel))
			}
		}
	}
	return bad
}

var torchSize = map[string]int64{"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8, "uint8": 1}

var collectiveKinds = []struct {
	kind schedule.OpKind
	name string
}{{schedule.OpAllGather, "all-gather"}, {schedule.OpReduceScatter, "reduce-scatter"}, {schedule.OpAllReduce, "all-reduce"}}

func reduceName(r schedule.ReduceOp) string {
	switch r {
	case schedule.ReduceAvg:
		return "avg"
	case schedule.ReduceSum:
		return "sum"
	case schedule.ReducePremulSum:
		return "premul_sum"
	}
	return ""
}

func compareCollectives(p *schedule.Plan, rank int, rec Record) []string {
	var bad []string
	for _, ck := range collectiveKinds {
		kind, name := ck.kind, ck.name
		var want []schedule.Op
		for _, op := range p.Ops {
			// A collective over one rank is the plan's stand-in for FSDP2's
			// local copy (docs/semantics.md D5); FSDP2 issues nothing.
			if op.Kind == kind && op.PGSize > 1 {
				want = append(want, op)
			}
		}
		var got []Collective
		for _, c := range rec.Collectives {
			if c.Op == name {
				got = append(got, c)
			}
		}
		if len(got) != len(want) {
			bad = append(bad, fmt.Sprintf("rank %d: FSDP2 issued %d %ss, the plan %d", rank, len(got), name, len(want)))
		}
		for i := 0; i < len(got) && i < len(want); i++ {
			w, g := want[i], got[i]
			out := g.Out * torchSize[g.DType]
			if kind == schedule.OpReduceScatter {
				out = g.In * torchSize[g.DType]
			}
			what := fmt.Sprintf("rank %d %s %d (%s)", rank, name, i+1, g.Phase)
			if w.Group >= 0 && int(w.Group) < len(p.Groups) {
				what += " of group " + p.Groups[w.Group].Label()
			}
			switch {
			case out != w.Bytes:
				bad = append(bad, fmt.Sprintf("%s: %d bytes (%d × %s) in FSDP2, %d in the plan", what, out, out/max(torchSize[g.DType], 1), g.DType, w.Bytes))
			case g.Reduce != reduceName(w.Reduce):
				bad = append(bad, fmt.Sprintf("%s: reduce op %s in FSDP2, %s in the plan", what, g.Reduce, reduceName(w.Reduce)))
			case g.GroupSize != int(w.PGSize):
				bad = append(bad, fmt.Sprintf("%s: over %d ranks in FSDP2, %d in the plan", what, g.GroupSize, w.PGSize))
			}
		}
	}
	return bad
}
