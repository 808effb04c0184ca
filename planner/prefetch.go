package planner

import (
	"fmt"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// PrefetchTargets returns, for each group of a plan made from m, the
// groups its explicit prefetch unshards: forward[g] the next
// prefetch_forward groups in pre-forward order, backward[g] the next
// prefetch_backward in pre-backward order, nil where the depth is 0
// (FSDP2's implicit prefetch). They are the groups the planner emitted
// the prefetches for, so `fsdpc emit torch` can hand FSDP2 the same lists
// (set_modules_to_forward_prefetch, set_modules_to_backward_prefetch).
func PrefetchTargets(m *ir.Model, p *schedule.Plan) (forward, backward [][]int, err error) {
	s := &state{m: m, plan: p}
	for _, g := range p.Groups {
		u := &unit{}
		for _, name := range g.Modules {
			id, err := m.ModuleByName(name)
			if err != nil {
				return nil, nil, fmt.Errorf("group %s: %w", g.Label(), err)
			}
			u.modules = append(u.modules, id)
		}
		s.units = append(s.units, u)
	}
	e := &emitter{s: s, m: m, p: p}
	e.first, e.last = s.forwardSpans()
	e.outDepth = e.outputDepths()
	forward = make([][]int, len(p.Groups))
	backward = make([][]int, len(p.Groups))
	for g, grp := range p.Groups {
		if k := grp.Policy.PrefetchForward; k > 0 {
			forward[g] = e.nextGroups(g, k, true)
		}
		if k := grp.Policy.PrefetchBackward; k > 0 {
			backward[g] = e.nextGroups(g, k, false)
		}
	}
	return forward, backward, nil
}
