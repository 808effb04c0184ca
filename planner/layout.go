package planner

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/fsdpc/fsdpc/internal/buildinfo"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// buildGroups turns units into the plan's groups, ordered by when their
// forward starts, and lays out their shards exactly as FSDP2 does:
//
//   - a parameter of d rows on its shard dimension gets c = ceil(d/W) rows on
//     every rank; rank k owns rows [k·c, min((k+1)·c, d)), so the last ranks
//     may own fewer or none, and every rank stores c rows, zero-padded;
//   - the padded shard of s = c·(numel/d) elements sits at offset Σ s of
//     the parameters before it in the rank's all-gather row, with no
//     alignment between parameters; the all-gather buffer is W such rows;
//   - the reduce-scatter buffer has the same rank-major layout over the
//     parameters that have gradients.
//
// Sharding on a dimension i > 0 needs d_i divisible by W.
func buildGroups(s *state) error {
	m := s.m
	W := int64(m.Cluster.ShardSize())
	first, _ := s.forwardSpans()
	order := make([]int, len(s.units))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return first[order[a]] < first[order[b]] })

	s.plan = newPlanShell(m)
	sdOrder := stateOrder(m)
	remap := make([]int, len(s.units))
	units := make([]*unit, len(s.units))
	var padded []paddingNote
	for gi, ui := range order {
		u := s.units[ui]
		units[gi], remap[ui] = u, gi
		g := schedule.Group{Name: u.name(m), Root: u.modules[0] == 0}
		for _, mod := range u.modules {
			g.Modules = append(g.Modules, m.Modules[mod].Name)
		}
		pol := s.policyFor(u)
		var offset, gradOffset int64
		for _, pid := range u.params {
			p := &m.Params[pid]
			dim := 0
			if pol.ShardDim != nil && *pol.ShardDim < len(p.Shape) {
				dim = *pol.ShardDim
			}
			d := p.Shape[dim]
			if dim > 0 && d%W != 0 {
				s.errorAt(p.Pos, []ir.Note{note(s.settingPos(u, "shard_dim"), "shard_dim = %d is set here", dim)},
					"parameter %s: shard_dim = %d needs dimension %d (%d) divisible by the shard group size %d", p.Name, dim, dim, d, W)
			}
			c := (d + W - 1) / W
			shard := c * (p.Numel / d)
			gp := schedule.GroupParam{Name: p.Name, Shape: append([]int64(nil), p.Shape...), DType: p.DType,
				RequiresGrad: p.RequiresGrad, Aliases: append([]string(nil), u.aliases[pid]...),
				ShardDim: dim, ChunkRows: c, ShardNumel: shard, Offset: offset, GradOffset: -1, StateOrder: sdOrder[pid]}
			sort.Strings(gp.Aliases)
			offset += shard
			if p.RequiresGrad {
				gp.GradOffset = gradOffset
				gradOffset += shard
			}
			if d%W != 0 {
				withData := (d + c - 1) / c
				padded = append(padded, paddingNote{name: p.Name, pos: p.Pos, d: d, pad: (W*c - d) * (p.Numel / d) * p.DType.Size(), empty: W - withData})
			}
			g.Params = append(g.Params, gp)
		}
		g.ShardNumel, g.GradShardNumel = offset, gradOffset
		s.plan.Groups = append(s.plan.Groups, g)
	}
	s.units = units
	for i := range s.unitOf {
		s.unitOf[i] = remap[s.unitOf[i]]
	}
	s.warnPadding(padded, W)
	return nil
}

// stateOrder numbers the parameters as the model's state dict lists them
// (nn.Module.state_dict, named_parameters): a module's own parameters,
// then its children's in registration order; a tied parameter only under
// its owner. Tied parameters get -1.
func stateOrder(m *ir.Model) []int {
	order := make([]int, len(m.Params))
	for i := range order {
		order[i] = -1
	}
	n := 0
	var walk func(id ir.ModuleID)
	walk = func(id ir.ModuleID) {
		for _, pid := range m.Modules[id].Params {
			if m.Params[pid].TiedTo == ir.NoParam {
				order[pid] = n
				n++
			}
		}
		for _, c := range m.RegisteredChildren(id) {
			walk(c)
		}
	}
	if len(m.Modules) > 0 {
		walk(0)
	}
	return order
}

type paddingNote struct {
	name  string
	pos   ir.Pos
	d     int64
	pad   int64 // bytes of padding in the unsharded parameter
	empty int64 // ranks holding no rows
}

var instanceIndex = regexp.MustCompile(`\.[0-9]+\.`)

// warnPadding reports parameters whose sharded dimension is not a multiple
// of W, folding repeated blocks into one line: uneven shards cost padding
// and, where ranks hold nothing, break all-gather extensions such as float8
// (FSDP2 pitfall 8).
func (s *state) warnPadding(notes []paddingNote, W int64) {
	type agg struct {
		count        int
		d, pad       int64
		empty        int64
		firstExample string
		pos          ir.Pos
	}
	byPattern := map[string]*agg{}
	var keys []string
	for _, n := range notes {
		key := instanceIndex.ReplaceAllString(n.name, ".*.")
		a, ok := byPattern[key]
		if !ok {
			a = &agg{d: n.d, empty: n.empty, firstExample: n.name, pos: n.pos}
			byPattern[key] = a
			keys = append(keys, key)
		}
		a.count++
		a.pad += n.pad
	}
	for _, k := range keys {
		a := byPattern[k]
		what := k
		if a.count > 1 {
			what = fmt.Sprintf("%s (%d parameters)", k, a.count)
		}
		msg := fmt.Sprintf("%s: %d rows are not a multiple of the shard group size %d; padding adds %s to the all-gather",
			what, a.d, W, ir.FormatBytes(a.pad))
		if a.empty > 0 {
			msg += fmt.Sprintf(", and %d of %d ranks hold no rows (float8 all-gather and other extensions fail on empty shards)", a.empty, W)
		}
		s.warnAt(a.pos, "%s", msg)
	}
}

// forwardSpans returns, per unit, the positions in the forward order of the
// first and last compute module inside the unit's modules: where FSDP2's
// pre-forward and post-forward hooks fire.
func (s *state) forwardSpans() (first, last []int) {
	m := s.m
	first = make([]int, len(s.units))
	last = make([]int, len(s.units))
	for i := range first {
		first[i], last[i] = len(m.Forward), -1
	}
	unitRoot := map[ir.ModuleID]int{}
	for ui, u := range s.units {
		for _, root := range u.modules {
			unitRoot[root] = ui
		}
	}
	for pos, id := range m.Forward {
		// Every unit enclosing the module (not only the innermost) is in
		// its forward at this point.
		for a := id; a != ir.NoModule; a = m.Modules[a].Parent {
			if ui, ok := unitRoot[a]; ok {
				first[ui] = min(first[ui], pos)
				last[ui] = max(last[ui], pos)
			}
		}
	}
	return first, last
}

func newPlanShell(m *ir.Model) *schedule.Plan {
	c := m.Cluster
	p := &schedule.Plan{
		Header: schedule.Header{FsdpcVersion: buildinfo.Version(), InputSHA256: m.SourceHash, Model: m.Name, Semantics: schedule.Semantics},
		Cluster: schedule.Cluster{GPU: c.GPU.Name, Preset: c.GPU.Preset, WorldSize: c.WorldSize, GPUsPerNode: c.GPUsPerNode,
			Replicate: 1, Shard: c.WorldSize, IntraNodeBandwidth: c.IntraNodeBandwidth,
			InterNodeBandwidth: c.InterNodeBandwidth, HBMBytes: c.GPU.HBMBytes, MemoryBudget: c.MemoryBudget,
			PeakFLOPS: append([]float64(nil), c.GPU.PeakFLOPS[:]...), HBMBandwidth: c.GPU.HBMBandwidth,
			HostBandwidth: c.HostBandwidth, Profile: c.Profile},
		Train: schedule.Train{MicroBatch: m.Train.MicroBatch, SeqLen: m.Train.SeqLen, GradAccum: m.Train.GradAccum,
			AccumulateUnsharded: m.Train.AccumulateUnsharded,
			Checkpointing:       m.Train.Checkpointing.String(), Optimizer: m.Train.Optimizer,
			OptimizerStateBytes: m.Train.OptimizerStateBytes, ExpandableSegments: m.Train.ExpandableSegments,
			OptimizerImplementation: m.Train.OptimizerImplementation(), MaxGradNorm: m.Train.MaxGradNorm,
			ModelFLOPsPerToken: m.FLOPsPerToken()},
	}
	if c.Mesh != nil {
		p.Cluster.Replicate, p.Cluster.Shard = c.Mesh.Replicate, c.Mesh.Shard
	}
	return p
}
