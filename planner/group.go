package planner

import (
	"slices"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// groupUnits decides the units, FSDP2's fully_shard calls: the root always,
// plus each instance of a repeated module ("blocks", what FSDP2 users write
// for transformer blocks) or every module a policy pattern matches. Each
// unit then collects its parameters as FSDP2 does: a post-order walk
// (children before their parent) that does not enter nested units, each
// module's own parameters in order, a tied parameter once.
func groupUnits(s *state) error {
	m := s.m
	checkpointingApplies(s)
	isUnit := make([]bool, len(m.Modules))
	isUnit[0] = true
	var groupOf []int // the listed group (policy.units array) of each module, -1 for none
	switch m.Policy.UnitsMode {
	case ir.UnitsBlocks, ir.UnitsAuto:
		for i := range m.Modules {
			if isBlock(m, ir.ModuleID(i)) {
				isUnit[i] = true
			}
		}
	case ir.UnitsBlockChildren:
		// Each child of each instance: finer units, more collectives.
		for i := range m.Modules {
			if isBlock(m, ir.ModuleID(i)) {
				for _, c := range m.Modules[i].Children {
					isUnit[c] = true
				}
				if len(m.Modules[i].Params) > 0 {
					isUnit[i] = true // its own parameters need a unit too
				}
			}
		}
	case ir.UnitsPatterns:
		// Literal names (the tuner lists every block by name) are looked
		// up; only real patterns are matched against every module.
		literal := map[string]bool{}
		var globs []ir.Glob
		for _, p := range m.Policy.Units {
			if name, ok := p.Glob.Literal(); ok {
				literal[name] = true
			} else {
				globs = append(globs, p.Glob)
			}
		}
		for i := range m.Modules {
			name := m.Modules[i].Name
			isUnit[i] = isUnit[i] || literal[name] || slices.ContainsFunc(globs, func(g ir.Glob) bool { return g.Match(name) })
		}
		if groupOf = s.listedGroups(); s.failed() {
			return nil
		}
		for i, g := range groupOf {
			if g >= 0 {
				isUnit[i] = true
			}
		}
	}
	for i := range m.Modules {
		if !isUnit[i] {
			continue
		}
		for p := m.Modules[i].Parent; p != ir.NoModule; p = m.Modules[p].Parent {
			if m.Modules[p].Compute {
				s.errorAt(s.unitPos(ir.ModuleID(i)), []ir.Note{note(m.Modules[p].Pos, "%s module %q is declared here", m.Modules[p].Kind, m.Modules[p].Name)},
					"policy.units makes %q a unit, but it is part of %s module %q, which runs as one piece; make %q the unit instead",
					m.Modules[i].Name, m.Modules[p].Kind, m.Modules[p].Name, m.Modules[p].Name)
				break
			}
			// FSDP2 skips a unit's forward hooks during recompute only in
			// the pre-backward state (_fsdp_state.py _pre_forward): a unit
			// inside a checkpointed region is gathered and resharded again
			// when backward recomputes the region, recorded twice in the
			// post-forward order, and the implicit backward prefetch goes
			// astray. fsdpc does not model that recompute, so it refuses
			// rather than plan collectives FSDP2 would not issue.
			if m.Modules[p].Checkpoint {
				s.errorAt(s.unitPos(ir.ModuleID(i)), []ir.Note{note(m.Modules[p].Pos, "the activation-checkpoint region %q is declared here", m.Modules[p].Name)},
					"%q is an FSDP unit inside the activation-checkpoint region %q: FSDP2 re-runs the unit's hooks when backward recomputes the region (gathering it again), which fsdpc does not model; make %q (or a module around it) the unit, or checkpoint inside the unit instead (train.checkpointing, checkpoint = true on a module within it)",
					m.Modules[i].Name, m.Modules[p].Name, m.Modules[p].Name)
				break
			}
		}
	}
	if s.failed() {
		return nil // every unit is checked; the driver reports them all
	}

	s.unitOf = make([]int, len(m.Modules))
	unitIndex := map[ir.ModuleID]int{}
	for i := range m.Modules {
		if isUnit[i] {
			unitIndex[ir.ModuleID(i)] = len(s.units)
			s.units = append(s.units, &unit{modules: []ir.ModuleID{ir.ModuleID(i)}, aliases: map[ir.ParamID][]string{}})
		}
		if isUnit[i] {
			s.unitOf[i] = unitIndex[ir.ModuleID(i)]
		} else {
			s.unitOf[i] = s.unitOf[m.Modules[i].Parent]
		}
	}
	for _, u := range s.units {
		u.params = collectParams(m, u.modules, isUnit, u.aliases)
	}
	if groupOf != nil {
		s.mergeListed(groupOf)
	}
	if k := m.Policy.BlocksPerUnit; k > 1 {
		s.mergeConsecutive(k)
	}
	// Refuse a schedule too long to hold before the passes build it; the
	// emitter bounds it exactly (MaxOpsPerRank).
	if minOpsPerUnit*m.Train.GradAccum*int64(len(s.units)) > int64(opLimit) {
		s.scheduleTooLong(len(s.units))
	}
	return nil
}

// mergeConsecutive makes one unit of every k consecutive instances of a
// repeated module, as fully_shard([layers[i], …, layers[i+k-1]]) would:
// fewer, larger collectives.
func (s *state) mergeConsecutive(k int) {
	m := s.m
	var merged []*unit
	remap := make([]int, len(s.units))
	var run []int // current run of units: instances of one module
	flush := func() {
		for start := 0; start < len(run); start += k {
			end := min(start+k, len(run))
			u := s.units[run[start]]
			for _, ui := range run[start+1 : end] {
				u.modules = append(u.modules, s.units[ui].modules...)
			}
			if end-start > 1 {
				u.merged = true
			}
			for _, ui := range run[start:end] {
				remap[ui] = len(merged)
			}
			merged = append(merged, u)
		}
		run = run[:0]
	}
	for ui, u := range s.units {
		mod := &m.Modules[u.modules[0]]
		if mod.Instance >= 0 && len(run) > 0 && m.Modules[s.units[run[0]].modules[0]].Parent == mod.Parent {
			run = append(run, ui)
			continue
		}
		flush()
		if mod.Instance >= 0 {
			run = append(run, ui)
			continue
		}
		remap[ui] = len(merged)
		merged = append(merged, u)
	}
	flush()
	recollectMerged(m, merged)
	for i := range s.unitOf {
		s.unitOf[i] = remap[s.unitOf[i]]
	}
	s.units = merged
}

// listedGroups finds the modules of each group policy.units lists as an
// array (one fully_shard call on several modules): groupOf[module] is the
// group's index, -1 for modules in none. A module in two groups, the root
// in one, or a group holding a module and one inside it is an error:
// fully_shard takes each module once, and the root is its own unit. Each
// is reported at the pattern that matched the module.
func (s *state) listedGroups() []int {
	m := s.m
	if len(m.Policy.Groups) == 0 {
		return nil
	}
	at := func(gi int, name string) ir.Pos {
		for _, p := range m.Policy.Groups[gi].Patterns {
			if p.Glob.Match(name) {
				return p.Pos
			}
		}
		return ir.Pos{}
	}
	groupOf := make([]int, len(m.Modules))
	for i := range groupOf {
		groupOf[i] = -1
	}
	for gi, g := range m.Policy.Groups {
		for i := range m.Modules {
			if !slices.ContainsFunc(g.Patterns, func(p ir.Pattern) bool { return p.Glob.Match(m.Modules[i].Name) }) {
				continue
			}
			name := m.Modules[i].Name
			switch {
			case i == 0:
				s.errorAt(at(gi, name), nil, "policy.units[%d]: a group cannot hold the root, which is a unit of its own", gi)
				continue
			case groupOf[i] >= 0 && groupOf[i] != gi:
				s.errorAt(at(gi, name), []ir.Note{note(at(groupOf[i], name), "group %d lists it here", groupOf[i])},
					"policy.units: module %q is in two groups (%d and %d); fully_shard takes a module once", name, groupOf[i], gi)
				continue
			}
			groupOf[i] = gi
		}
	}
	for i := range m.Modules {
		if groupOf[i] < 0 {
			continue
		}
		for p := m.Modules[i].Parent; p != ir.NoModule; p = m.Modules[p].Parent {
			if groupOf[p] == groupOf[i] {
				s.errorAt(at(groupOf[i], m.Modules[i].Name), []ir.Note{note(at(groupOf[i], m.Modules[p].Name), "%q is listed here", m.Modules[p].Name)},
					"policy.units: group %d holds %q and %q, which contains it; list modules side by side", groupOf[i], m.Modules[p].Name, m.Modules[i].Name)
				break
			}
		}
	}
	return groupOf
}

// mergeListed makes one unit of each listed group's modules, in module
// order, as fully_shard([a, b]) does.
func (s *state) mergeListed(groupOf []int) {
	m := s.m
	remap := make([]int, len(s.units))
	first := map[int]int{} // group -> index in merged
	var merged []*unit
	for ui, u := range s.units {
		g := groupOf[u.modules[0]]
		if g < 0 {
			remap[ui] = len(merged)
			merged = append(merged, u)
			continue
		}
		if at, ok := first[g]; ok {
			merged[at].modules = append(merged[at].modules, u.modules...)
			merged[at].merged = true
			remap[ui] = at
			continue
		}
		first[g] = len(merged)
		remap[ui] = len(merged)
		merged = append(merged, u)
	}
	recollectMerged(m, merged)
	for i := range s.unitOf {
		s.unitOf[i] = remap[s.unitOf[i]]
	}
	s.units = merged
}

// isBlock reports whether module id is an instance of a repeated block
// that no other instance contains: a unit of units = "blocks".
func isBlock(m *ir.Model, id ir.ModuleID) bool {
	return m.Modules[id].Instance >= 0 && !insideInstance(m, m.Modules[id].Parent)
}

func insideInstance(m *ir.Model, id ir.ModuleID) bool {
	for p := id; p != ir.NoModule; p = m.Modules[p].Parent {
		if m.Modules[p].Instance >= 0 {
			return true
		}
	}
	return false
}

// checkpointingApplies carries ir's warning into the plan: a checkpointing
// mode that matches no module checkpoints nothing.
func checkpointingApplies(s *state) {
	if s.m.CheckpointingUnused() {
		s.warnAt(s.m.KeyPos("train.checkpointing"), "%s", s.m.CheckpointingUnusedMessage())
	}
}

// collectParams walks the unit's modules in post-order, skipping nested
// units, and returns the owning parameters in FSDP2's order. Aliases (tied
// parameters) record their names under the owner.
func collectParams(m *ir.Model, roots []ir.ModuleID, isUnit []bool, aliases map[ir.ParamID][]string) []ir.ParamID {
	var out []ir.ParamID
	seen := map[ir.ParamID]bool{}
	visited := map[ir.ModuleID]bool{}
	var walk func(id ir.ModuleID)
	walk = func(id ir.ModuleID) {
		if visited[id] {
			return
		}
		visited[id] = true
		for _, c := range m.RegisteredChildren(id) {
			if !isUnit[c] {
				walk(c)
			}
		}
		for _, p := range m.Modules[id].Params {
			owner := p
			if t := m.Params[p].TiedTo; t != ir.NoParam {
				owner = t
				aliases[owner] = append(aliases[owner], m.Params[p].Name)
			}
			if !seen[owner] {
				seen[owner] = true
				out = append(out, owner)
			}
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

// recollectMerged collects the parameters of merged units again:
// fully_shard([a, b]) walks from each module in turn and enters the others
// where they sit, since they are one state, not nested ones.
func recollectMerged(m *ir.Model, units []*unit) {
	isUnit := make([]bool, len(m.Modules))
	for _, u := range units {
		for _, mod := range u.modules {
			isUnit[mod] = true
		}
	}
	for _, u := range units {
		if !u.merged {
			continue
		}
		own := append([]bool(nil), isUnit...)
		for _, mod := range u.modules {
			own[mod] = false
		}
		u.aliases = map[ir.ParamID][]string{}
		u.params = collectParams(m, u.modules, own, u.aliases)
	}
}

// resolveTies finds tensors that more than one unit uses. FSDP2 rejects
// them (older versions silently mis-sharded them); the policy may instead
// merge the units into one group, as fully_shard([a, b]) does.
func resolveTies(s *state) error {
	m := s.m
	users := map[ir.ParamID][]int{}
	for ui, u := range s.units {
		for _, p := range u.params {
			users[p] = append(users[p], ui)
		}
	}
	var shared []ir.ParamID
	for p, us := range users {
		if len(us) > 1 {
			shared = append(shared, p)
		}
	}
	if len(shared) == 0 {
		return nil
	}
	sort.Slice(shared, func(i, j int) bool { return shared[i] < shared[j] })
	if m.Policy.Tied == ir.TiedError {
		// Each shared tensor is a problem of its own, placed at the
		// parameter, with a note at each unit that uses it.
		for _, p := range shared {
			var units []string
			var notes []ir.Note
			for _, ui := range users[p] {
				units = append(units, quoteUnit(s.units[ui].name(m)))
				notes = append(notes, note(s.unitPos(s.units[ui].modules[0]), "unit %s uses it", quoteUnit(s.units[ui].name(m))))
			}
			names := append([]string{m.Params[p].Name}, s.units[users[p][0]].aliases[p]...)
			for _, ui := range users[p][1:] {
				names = append(names, s.units[ui].aliases[p]...)
			}
			s.errorAt(m.Params[p].Pos, notes, "parameter %s is shared by units %s (tied: %s); FSDP2 rejects a tensor shared between parameter groups: set policy.tied = \"merge\" to put the units in one group, or choose units that keep tied parameters together",
				m.Params[p].Name, strings.Join(units, " and "), strings.Join(dedup(names), " = "))
		}
		return nil
	}
	// Merge with union-find; the merged unit keeps the lowest index.
	parent := make([]int, len(s.units))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for _, p := range shared {
		a := find(users[p][0])
		for _, ui := range users[p][1:] {
			b := find(ui)
			if a != b {
				parent[max(a, b)] = min(a, b)
				a = min(a, b)
			}
		}
	}
	remap := make([]int, len(s.units))
	var merged []*unit
	for i, u := range s.units {
		r := find(i)
		if r == i {
			remap[i] = len(merged)
			merged = append(merged, u)
			continue
		}
		target := merged[remap[r]]
		target.modules = append(target.modules, u.modules...)
		target.merged = true
		remap[i] = remap[r]
	}
	recollectMerged(m, merged)
	for _, u := range merged {
		if u.merged {
			var names []string
			for _, mod := range u.modules {
				names = append(names, quoteUnit(m.Modules[mod].Name))
			}
			s.warnAt(m.KeyPos("policy.tied"), "units %s share tied parameters and were merged into one group (policy.tied = \"merge\")", strings.Join(names, ", "))
		}
	}
	for i := range s.unitOf {
		s.unitOf[i] = remap[s.unitOf[i]]
	}
	s.units = merged
	return nil
}

func quoteUnit(name string) string {
	if name == "" {
		return "(root)"
	}
	return name
}

func dedup(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
