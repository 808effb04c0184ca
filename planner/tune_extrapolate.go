package planner

import (
	"fmt"
	"math"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// Extrapolation: every decision the search tries applies to each block of
// the model alike (the last-k-blocks knob is counted from the end), so
// once the pipeline of gathers, compute and reductions has reached its
// steady state each further block adds the same operations at the same
// pace, and a candidate's step time on N blocks is a + b·N. The tuner
// plans each candidate on three short copies of the model, of n, n+p and
// n+2p blocks, and extrapolates to N from the last two; the first checks
// that the three lie on a line, and how far from one they are bounds the
// error. Candidates then cost the blocks of the three short models
// instead of N.
//
// Reserved memory does not extrapolate (the caching allocator's segments,
// and its retries at the budget, are not linear in the blocks); peak
// allocated memory only bounds it from below (allocFloor). So an estimate
// is used only to rule a candidate out: by time (its estimate, less its
// error bound, is slower than a fitting candidate it is compared with) or
// by allocated memory (more than the usable). Every candidate that could
// be chosen, listed as an alternative or make memory the binding
// constraint is planned in full first, so the search decides and reports
// what it would if it planned every candidate in full.
const (
	// extrapolationPeriod is p: units of 1, 2 or 4 blocks and selective
	// checkpointing of every second block fall on the same blocks of
	// every short model, and n ≡ N (mod p) ends each with the same
	// partial unit as the file's model.
	extrapolationPeriod = 4
	// extrapolationMinBlocks is the least n: the last-k-blocks knob
	// keeps up to 4 blocks unsharded, which must leave a middle.
	extrapolationMinBlocks = 8
	// extrapolationMinDepth: a model of fewer blocks plans every
	// candidate in full. About two thirds of the distinct candidates of a
	// search are planned in full anyway (ties on time that memory decides,
	// faster candidates whose fit is not known), one batch of a candidate
	// per core at a time, where the full search plans all of a
	// dimension's values on both cores at once: on a quiet machine the
	// short models lose 15% at 256 blocks and gain 11% at 1,024 and 20%
	// at 2,048 (BenchmarkTuneDepth against BenchmarkTuneDepthFull), and
	// break even on llama3-70b's 80 blocks and llama3.1-405b's 126
	// (BenchmarkTuneShortModels, docs/performance.md).
	extrapolationMinDepth = 512
	// extrapolationMaxDrift bounds how far the three short models may be
	// from a line, relative to the step: beyond it the candidate is
	// planned in full.
	extrapolationMaxDrift = 1e-4
	// extrapolationFloor is the least error bound of an estimate,
	// relative to the step: a near tie is planned in full.
	extrapolationFloor = 1e-6
)

// shortcut plans candidates on short copies of the model.
type shortcut struct {
	holder string // the repeated module
	full   int    // its blocks in the file's model
	sizes  [3]int
	tuners [3]*tuner
}

// newShortcut prepares the short models, or says why the tuner plans
// every candidate in full: the model has no single deep stack of blocks
// (nothing to gain below 512 blocks), its policy treats some blocks
// differently from others, or the short models do not load.
func (t *tuner) newShortcut() (*shortcut, string) {
	m := t.m
	holder := ir.NoModule
	for _, name := range t.blockNames() {
		id := moduleNamed(m, name)
		if id < 0 {
			return nil, "a block has no module"
		}
		p := m.Modules[id].Parent
		if holder != ir.NoModule && p != holder {
			return nil, "its blocks repeat in more than one stack"
		}
		holder = p
	}
	if holder == ir.NoModule || m.Modules[holder].Repeat == 0 {
		return nil, "it has no repeated blocks"
	}
	s := &shortcut{holder: m.Modules[holder].Name, full: m.Modules[holder].Repeat}
	n := extrapolationMinBlocks + (s.full-extrapolationMinBlocks)%extrapolationPeriod
	for i := range s.sizes {
		s.sizes[i] = n + i*extrapolationPeriod
	}
	if s.sizes[2] >= s.full {
		return nil, fmt.Sprintf("%d blocks are fewer than the short models' %d", s.full, s.sizes[2])
	}
	if s.full < extrapolationMinDepth && !t.opts.forceExtrapolation {
		return nil, fmt.Sprintf("%d blocks are too few to gain from short models of %d, %d and %d", s.full, s.sizes[0], s.sizes[1], s.sizes[2])
	}
	if pat := nonUniformPattern(m, holder); pat != "" {
		return nil, fmt.Sprintf("its policy pattern %q treats some blocks differently from others", pat)
	}
	for i, n := range s.sizes {
		short, err := m.Resized(s.holder, n)
		if err != nil {
			return nil, fmt.Sprintf("a short model of %d blocks does not load: %v", n, err)
		}
		s.tuners[i] = &tuner{m: short, opts: t.opts}
	}
	return s, ""
}

func moduleNamed(m *ir.Model, name string) ir.ModuleID {
	for i := range m.Modules {
		if m.Modules[i].Name == name {
			return ir.ModuleID(i)
		}
	}
	return ir.NoModule
}

// nonUniformPattern returns a units or override pattern of the policy that
// matches a module of some blocks but not the same module of the others
// ("layers.7*"), or "": short models would lose what it does to the
// middle blocks.
func nonUniformPattern(m *ir.Model, holder ir.ModuleID) string {
	var pats []ir.Pattern
	pats = append(pats, m.Policy.Units...)
	for _, o := range m.Policy.Overrides {
		pats = append(pats, o.Match)
	}
	prefix := m.Modules[holder].Name + "."
	for _, pat := range pats {
		// Per module of a block, by its name within the block: matched in
		// some instances, in all of them.
		some, all := map[string]bool{}, map[string]bool{}
		for i := range m.Modules {
			name, ok := strings.CutPrefix(m.Modules[i].Name, prefix)
			if !ok {
				continue
			}
			_, within, _ := strings.Cut(name, ".")
			hit := pat.Glob.Match(m.Modules[i].Name)
			if _, seen := all[within]; !seen {
				all[within] = true
			}
			some[within] = some[within] || hit
			all[within] = all[within] && hit
		}
		for within := range some {
			if some[within] != all[within] {
				return pat.Glob.String()
			}
		}
	}
	return ""
}

// allocFloor bounds the file's model's peak allocated memory from below
// by the short models'. Where the program repeats block by block, the
// memory live at each point of a block's pattern is affine in the block's
// index and in the number of blocks (one more block's parameters,
// gradients and activations), so the peak, the largest of them, is convex
// in the number of blocks: the line through the two longer short models
// stays below it. Short models that are not convex (the pattern does not
// repeat) give no floor.
func (s *shortcut) allocFloor(allocs [3]int64) int64 {
	d1, d2 := allocs[1]-allocs[0], allocs[2]-allocs[1]
	if d2 < d1 || d1 < 0 {
		return 0
	}
	periods := int64(s.full-s.sizes[2]) / extrapolationPeriod
	if d2 > 0 && periods > (math.MaxInt64-allocs[2])/d2 {
		return math.MaxInt64
	}
	return allocs[2] + periods*d2
}

// extrapolate estimates the step time on the file's blocks from the three
// short models' and bounds its error; ok is false where the short models
// are too far from a line.
func (s *shortcut) extrapolate(steps [3]float64) (step, bound float64, ok bool) {
	d1, d2 := steps[1]-steps[0], steps[2]-steps[1]
	periods := float64(s.full-s.sizes[2]) / extrapolationPeriod
	step = steps[2] + periods*d2
	drift := math.Abs(d2 - d1)
	if !(d1 > 0 && d2 > 0) || !(step > 0) || drift > extrapolationMaxDrift*step || math.IsInf(step, 0) {
		return 0, 0, false
	}
	// If the increment per period still drifts by as much as it did
	// between the short models, the error grows with the square of the
	// periods extrapolated over.
	bound = extrapolationFloor*step + periods*periods*drift
	return step, bound, true
}
