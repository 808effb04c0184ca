package planner

import (
	"github.com/fsdpc/fsdpc/ir"
)

// markDeferred finds the groups whose module inputs need no gradient: the
// root (it reads token ids) or a unit fed only by frozen modules. FSDP2
// registers post-backward on the unit's forward inputs that require grad,
// so for these autograd never fires it; the final callback reshards and
// reduce-scatters them after the whole backward, where nothing overlaps the
// communication.
func markDeferred(s *state) error {
	m := s.m
	needs := make([]bool, len(s.units))
	unitRoot := map[ir.ModuleID]int{}
	for ui, u := range s.units {
		for _, r := range u.modules {
			unitRoot[r] = ui
		}
	}
	inside := func(x ir.ModuleID, root ir.ModuleID) bool {
		for a := x; a != ir.NoModule; a = m.Modules[a].Parent {
			if a == root {
				return true
			}
		}
		return false
	}
	// FSDP2 registers a grouped unit's post-backward (fully_shard([emb,
	// output])) only on the forward inputs of the module that runs first:
	// the other modules' pre-forwards find the group already in FORWARD
	// (_fsdp_param_group.py pre_forward, entering_forward_pass).
	firstRun := make([]ir.ModuleID, len(s.units))
	for i := range firstRun {
		firstRun[i] = ir.NoModule
	}
	for _, c := range m.Forward {
		for a := c; a != ir.NoModule; a = m.Modules[a].Parent {
			ui, ok := unitRoot[a]
			if !ok {
				continue
			}
			if firstRun[ui] == ir.NoModule {
				firstRun[ui] = a
			}
			if a != firstRun[ui] {
				continue
			}
			for _, src := range m.Modules[c].Inputs {
				if !inside(src, a) && m.Modules[src].OutputRequiresGrad {
					needs[ui] = true
				}
			}
		}
	}
	for gi := range s.plan.Groups {
		g := &s.plan.Groups[gi]
		g.DeferredReduce = !needs[gi]
		if g.DeferredReduce && g.GradShardNumel > 0 {
			bytes := g.GradShardNumel * int64(s.m.Cluster.ShardSize()) * g.Policy.Reduce.Size()
			s.warnAt(s.groupPos(gi), "%s: its inputs need no gradient, so FSDP2 fires no post-backward hook for it: its reduce-scatter of %s runs after the whole backward with nothing to overlap it, and its parameters stay unsharded until then",
				groupLabel(g), ir.FormatBytes(bytes))
		}
	}
	return nil
}
