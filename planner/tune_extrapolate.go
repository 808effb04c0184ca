package planner

import (
	"fmt"
	"math"
	"runtime"
	"sort"
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
	for _, id := range t.blocks() {
		p := m.Modules[id].Parent
		if holder != ir.NoModule && p != holder {
			return nil, "its blocks repeat in more than one stack"
		}
		holder = p
	}
	if holder == ir.NoModule || m.Modules[holder].Repeat == 0 {
		return nil, "it has no repeated blocks"
	}
	if m.Modules[holder].Varied {
		return nil, "its blocks are not all alike (a blocks pattern)"
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

// confirmContenders plans in full the estimated candidates of a dimension
// that could change the descent's choice, so that comparing the others by
// their estimates alone (never better than best) decides what comparing
// every candidate in full would. Against a best that does not fit, any
// candidate that may reserve less could. Against one that fits, the
// candidates are planned fastest estimate first, until the next one's
// estimate, less its error bound, is slower than a fitting candidate (best,
// or one planned in full): such a candidate can never become best in the
// descent's comparisons — a fitting one at least as fast stands in its way
// whether it comes before or after it — so leaving it out changes nothing.
func (t *tuner) confirmContenders(cs []*Candidate, best *Candidate) {
	if t.short == nil {
		return
	}
	if !best.Fits {
		t.confirmAll(cs, func(c *Candidate) bool { return t.mayBeat(c, best) })
		return
	}
	fastest := best.StepTime
	var order []*Candidate
	seen := map[*Candidate]bool{}
	for _, c := range cs {
		switch {
		case c == nil || seen[c]:
		case !c.estimated:
			if c.Fits {
				fastest = min(fastest, c.StepTime)
			}
		case !t.unfit(c):
			order = append(order, c)
		}
		seen[c] = true
	}
	t.fastestFirst(order, &fastest)
}

// fastestFirst plans in full, by their estimates' lower bounds and a
// batch per core, the candidates that could be as fast as the fastest
// fitting one, which it lowers as they turn out to fit.
func (t *tuner) fastestFirst(order []*Candidate, fastest *float64) {
	sortByLowerBound(order)
	for len(order) > 0 {
		var batch []*Candidate
		for len(order) > 0 && len(batch) < max(runtime.GOMAXPROCS(0), 1) && mayBeFaster(order[0], *fastest) {
			batch, order = append(batch, order[0]), order[1:]
		}
		if len(batch) == 0 {
			return
		}
		t.confirmAll(batch, func(*Candidate) bool { return true })
		for _, c := range batch {
			if c.Fits {
				*fastest = min(*fastest, c.StepTime)
			}
		}
	}
}

// mayBeFaster reports whether an estimated candidate could take as long
// as step or less: its estimate, less the error bound, is not slower by
// more than better's tolerance.
func mayBeFaster(c *Candidate, step float64) bool {
	return lowerBound(c) <= step*(1+1e-8)
}

// lowerBound is the least step time an estimated candidate may have.
func lowerBound(c *Candidate) float64 { return c.StepTime - c.bound }

// sortByLowerBound orders estimated candidates by their lower bounds,
// keeping the order of ties.
func sortByLowerBound(cs []*Candidate) {
	sort.SliceStable(cs, func(i, j int) bool { return lowerBound(cs[i]) < lowerBound(cs[j]) })
}

// confirmAll plans in full, on every core, the estimated candidates of cs
// that need it.
func (t *tuner) confirmAll(cs []*Candidate, need func(*Candidate) bool) {
	byKey := map[string]knobs{}
	var jobs []planJob
	for _, c := range cs {
		if c == nil || !c.estimated || !need(c) {
			continue
		}
		key := c.knobs.key()
		if _, ok := byKey[key]; !ok {
			byKey[key] = c.knobs
			jobs = append(jobs, planJob{key, -1})
		}
	}
	t.planAhead(jobs, byKey)
	for _, j := range jobs {
		t.eval(byKey[j.key])
	}
}

// mayBeat reports whether an estimated candidate could be better than
// best: fit where best fits and be as fast, or reserve less where best
// does not fit.
func (t *tuner) mayBeat(c, best *Candidate) bool {
	if t.unfit(c) {
		return !best.Fits && c.allocFloor < best.PeakReserved
	}
	return !best.Fits || mayBeFaster(c, best.StepTime)
}

// unfit reports whether an estimated candidate is known not to fit: it
// allocates more than the usable memory, so it reserves more.
func (t *tuner) unfit(c *Candidate) bool { return c.allocFloor > t.usable }

// estimate scores a candidate from the short models where the tuner has
// them and they lie on a line, and in full otherwise; once.
func (t *tuner) estimate(k knobs) (*Candidate, error) {
	key := k.key()
	if c, ok := t.cache[key]; ok {
		return c, nil
	}
	if t.short == nil {
		return t.eval(k)
	}
	var steps [3]float64
	var allocs [3]int64
	for size := range t.short.sizes {
		p, _ := t.planOf(k, size)
		if p == nil {
			return t.eval(k) // let the full model say what is wrong
		}
		steps[size], allocs[size] = p.Prediction.StepTime, p.Prediction.PeakAllocated
	}
	step, bound, ok := t.short.extrapolate(steps)
	if !ok {
		return t.eval(k)
	}
	c := &Candidate{knobs: k, Decisions: k.describe(t.unitGlobs()), StepTime: step, estimated: true, bound: bound,
		allocFloor: t.short.allocFloor(allocs)}
	t.record(key, c)
	return c, nil
}

// confirm plans in full, on every core, the estimated candidates that need
// it.
func (t *tuner) confirm(need func(*Candidate) bool) {
	var cs []*Candidate
	for _, key := range sortedCacheKeys(t.cache) {
		cs = append(cs, t.cache[key])
	}
	t.confirmAll(cs, need)
}

func sortedCacheKeys(cache map[string]*Candidate) []string {
	keys := make([]string, 0, len(cache))
	for key := range cache {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// settle plans in full every estimated candidate that could be one of the
// alternatives or make memory the binding constraint: all whose estimate
// is not clearly slower than the third alternative among the candidates
// planned in full (which is slower than best).
func (t *tuner) settle(best *Candidate) {
	if t.short == nil {
		return
	}
	for {
		limit := math.Inf(1)
		if alts := t.alternatives(best); len(alts) == 3 {
			limit = alts[2].StepTime
		}
		var order []*Candidate
		for _, key := range sortedCacheKeys(t.cache) {
			if c := t.cache[key]; c.estimated && !t.unfit(c) && mayBeFaster(c, limit) {
				order = append(order, c)
			}
		}
		if len(order) == 0 {
			break
		}
		// Fastest first, a batch per core: each batch may complete
		// the alternatives and lower the limit.
		sortByLowerBound(order)
		t.confirmAll(order[:min(len(order), max(runtime.GOMAXPROCS(0), 1))], func(*Candidate) bool { return true })
	}
	// Memory binds if a faster candidate does not fit: one planned in
	// full must show it. Those left estimated are known not to fit.
	var faster []*Candidate
	for _, key := range sortedCacheKeys(t.cache) {
		if c := t.cache[key]; c.estimated && lowerBound(c) < best.StepTime {
			faster = append(faster, c)
		}
	}
	sort.SliceStable(faster, func(i, j int) bool { return faster[i].StepTime < faster[j].StepTime })
	for _, c := range faster {
		if t.binding(best) == "memory" {
			return
		}
		t.eval(c.knobs)
	}
}
