package planner

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// The autotuner: it searches the decisions the policy leaves open against
// the simulator and returns the fastest plan that fits the memory budget
// (with a safety margin for fragmentation), breaking ties by lower memory.
//
// The search space (knobs) is per class of groups, not per group: every
// instance of a repeated block gets the same decision, since identical
// layers cost the same; the one per-layer exception it tries is keeping the
// last k blocks unsharded after forward (their backward then needs no
// all-gather). It never changes what the file fixed.
//
// The search is coordinate descent: start from the file's own plan (FSDP2's
// defaults where the file says nothing), try every value of one knob with
// the others held, keep the best that fits, and sweep the knobs until a
// sweep improves nothing. Candidates are cached by their knobs. If the
// file's plan does not fit, the first sweep looks for memory before speed,
// and CPU offload is tried only when nothing else fits. On a model of
// one deep stack of blocks a candidate is first scored on short copies of
// the model and planned in full only where that could change the answer
// (tune_extrapolate.go).

// DefaultHeadroom is the share of the memory budget the tuner keeps free:
// the model's memory error on measured runs (docs/cost-model.md,
// "Fidelity") and the allocator's fragmentation, which the plan's
// reserved peak does not see.
const DefaultHeadroom = 0.10

// Uncertainty is the model's error on the ratio of two measured runs that
// differ in one decision (checkpointing mode, compile), the tuner's kind
// of comparison: 6–20% on the calibration set's pairs, median about 10%
// (docs/cost-model.md, "Fidelity"). A gain below it is reported as not
// significant.
const Uncertainty = 0.10

// TuneOptions control the search.
type TuneOptions struct {
	// Margin is the share of the budget kept free (headroom); 0 means
	// DefaultHeadroom.
	Margin float64
	// Progress, if set, is called after each candidate.
	Progress func(evaluated int)
	// FsdpcKnobs lets the search choose decisions FSDP2 offers only as
	// experimental APIs (reduce_scatter_buffers); without it every
	// decision uses FSDP2's stable options.
	FsdpcKnobs bool
	// Exhaustive evaluates every combination of the knobs instead of
	// descending coordinate by coordinate (for tests on small models).
	Exhaustive bool
	// Times, if set, adds up each planner pass's time over every
	// candidate planned (`fsdpc plan -tune -d time`).
	Times *PassTimes
	// noExtrapolation plans every candidate in full; forceExtrapolation
	// plans them on short models first even where that does not pay
	// (tests compare the two).
	noExtrapolation, forceExtrapolation bool
}

// Candidate is one evaluated setting of the knobs.
type Candidate struct {
	Decisions    []string // what differs from the file's own plan
	StepTime     float64
	ExposedComm  float64
	PeakReserved int64
	Fits         bool
	knobs        knobs
	// estimated: StepTime is extrapolated from short models of the
	// model (tune_extrapolate.go), to within bound, and allocFloor is at
	// most its peak allocated memory; the other scores are not known until
	// the candidate is planned in full.
	estimated  bool
	bound      float64
	allocFloor int64
}

// Tuning is the autotuner's answer.
type Tuning struct {
	Plan *schedule.Plan
	// Sim and Warnings are the tuned plan's, as Compile returns them.
	Sim      *schedule.Simulation
	Warnings ir.Diagnostics
	Baseline Candidate
	Best     Candidate
	// Alternatives are the next-best candidates that fit, fastest first.
	Alternatives []Candidate
	// Binding names what limits the tuned plan: "memory" (a faster
	// candidate did not fit), "communication" (exposed communication
	// remains) or "compute".
	Binding   string
	Evaluated int
	// Failed lists, by reason, the candidates that did not plan for a
	// reason other than the memory budget (a knob invalid for this model,
	// or an internal error), sorted by reason: the search skips them, and
	// says so rather than dropping them silently.
	Failed  []Failure
	Elapsed time.Duration
	Usable  int64 // the budget less the margin
	// Extrapolated says how candidates were first planned on short models
	// of the model, or why each was planned in full.
	Extrapolated string
}

// Failure is a reason candidates failed to plan, how many, and the first
// such candidate's decisions.
type Failure struct {
	Reason    string
	Count     int
	Decisions []string
}

// Internal reports whether the failure is a bug in fsdpc (an unsafe
// schedule, a panic caught): a test fails on one.
func (f Failure) Internal() bool { return strings.Contains(f.Reason, "internal error") }

// Gain is the tuned plan's step-time saving over the file's own plan, as
// a fraction of the latter.
func (t *Tuning) Gain() float64 {
	if t.Baseline.StepTime <= 0 {
		return 0
	}
	return (t.Baseline.StepTime - t.Best.StepTime) / t.Baseline.StepTime
}

// Significant reports whether the gain exceeds the model's uncertainty.
func (t *Tuning) Significant() bool { return t.Gain() > Uncertainty }

// knobs is one point of the search space. Zero values mean "as the file
// says".
type knobs struct {
	reshard       string // "", "true", "false", or N ranks
	lastUnsharded int    // keep the last k blocks unsharded after forward
	prefetchF     int    // -1: as the file says
	prefetchB     int
	blocks        int // blocks per unit; 0: as the file says
	children      bool
	// ownUnits: the model's top-level embedding and output projection
	// are their own units beside the blocks, as torchtitan wraps them
	// (fully_shard(tok_embeddings), fully_shard(output)), instead of
	// staying with the root.
	ownUnits      bool
	rsBuffers     int
	paramDType    ir.DType
	reduceDType   ir.DType
	checkpointing string // "": as the file says
	offload       bool
	shard         int // HSDP shard group size; 0: as the file says
	replicate     int
}

func (k knobs) key() string { return fmt.Sprintf("%+v", k) }

// dimension is one knob and the values it may take for this model.
type dimension struct {
	name   string
	values []func(*knobs)
	labels []string
	memory bool // its values can save memory
}

// Tune searches for the fastest plan that fits.
func Tune(m *ir.Model, opts TuneOptions) (*Tuning, error) {
	start := time.Now()
	if opts.Margin == 0 {
		opts.Margin = DefaultHeadroom
	}
	t := &tuner{m: m, opts: opts, cache: map[string]*Candidate{}}
	t.usable = int64(float64(m.Cluster.MemoryBudget) * (1 - opts.Margin))
	base := knobs{prefetchF: -1, prefetchB: -1}
	baseline, err := t.eval(base)
	if err != nil {
		return nil, err
	}
	// The file's own plan is acceptable to its author if it fits the
	// budget itself: the margin never makes the tuner return something
	// slower than what the user would get without it.
	if !baseline.Fits && baseline.StepTime > 0 && baseline.PeakReserved <= m.Cluster.MemoryBudget {
		t.usable = baseline.PeakReserved
		for _, c := range t.cache {
			c.Fits = c.StepTime > 0 && c.PeakReserved <= t.usable
		}
	}
	dims := t.dimensions()
	var why string
	if !opts.Exhaustive && !opts.noExtrapolation {
		t.short, why = t.newShortcut()
	}
	var best *Candidate
	if opts.Exhaustive {
		best = t.exhaustive(base, dims)
	} else {
		best = t.descend(baseline, dims)
	}
	if best == nil || !best.Fits {
		// Offload is the last resort.
		k := base
		k.offload = true
		if c, err := t.eval(k); err == nil && c.Fits {
			best = t.descend(c, dims)
		}
	}
	if best == nil || !best.Fits {
		t.confirm(func(*Candidate) bool { return true })
		return nil, fmt.Errorf("%s: no plan fits the memory budget of %s (with a %.0f%% margin): the best candidate reserves %s; %s",
			m.File, ir.FormatBytes(m.Cluster.MemoryBudget), opts.Margin*100, ir.FormatBytes(t.smallest().PeakReserved),
			"more GPUs, a shorter sequence or a smaller micro-batch are left")
	}
	// Verify the winner: the search skipped the verifier.
	final, err := t.final(best.knobs)
	if err != nil {
		return nil, err
	}
	t.settle(best)
	tu := &Tuning{Plan: final.Plan, Sim: final.Sim, Warnings: final.Warnings, Baseline: *baseline, Best: *best, Evaluated: len(t.cache), Failed: t.failures(), Usable: t.usable}
	if s := t.short; s != nil {
		tu.Extrapolated = fmt.Sprintf("candidates planned first on %d, %d and %d of the %d blocks of %s", s.sizes[0], s.sizes[1], s.sizes[2], s.full, s.holder)
	} else if why != "" {
		tu.Extrapolated = "every candidate planned in full: " + why
	}
	tu.Alternatives = t.alternatives(best)
	tu.Binding = t.binding(best)
	tu.Elapsed = time.Since(start)
	return tu, nil
}

type tuner struct {
	m      *ir.Model
	opts   TuneOptions
	cache  map[string]*Candidate
	usable int64
	// plans holds every plan made, by the job of its canonical knobs:
	// planned ahead (planAhead) or when first needed (planOf), and kept
	// for every later candidate with the same canonical knobs.
	plans map[planJob]planned
	// short, if set, estimates candidates on short models first.
	short *shortcut
	// failed counts candidates that did not plan for a reason other than
	// the budget, by reason (Tuning.Failed).
	failed map[string]*Failure
}

func (t *tuner) fixed() (reshard, prefetchF, prefetchB, paramDT, reduceDT, offload bool) {
	p := t.m.Policy
	check := func(g ir.GroupPolicy) {
		reshard = reshard || g.ReshardAfterForward != nil
		prefetchF = prefetchF || g.PrefetchForward != nil
		prefetchB = prefetchB || g.PrefetchBackward != nil
		paramDT = paramDT || g.ParamDType != ir.DTypeInvalid
		reduceDT = reduceDT || g.ReduceDType != ir.DTypeInvalid
		offload = offload || g.Offload != nil
	}
	check(p.Default)
	for _, o := range p.Overrides {
		check(o.GroupPolicy)
	}
	return
}

// dimensions lists the knobs the file leaves open, memory savers first.
func (t *tuner) dimensions() []dimension {
	m := t.m
	fReshard, fPF, fPB, fParam, fReduce, _ := t.fixed()
	var dims []dimension
	blocks := m.Policy.UnitsMode == ir.UnitsBlocks || m.Policy.UnitsMode == ir.UnitsAuto
	if !m.Train.CheckpointingSet {
		d := dimension{name: "checkpointing", memory: true}
		for _, c := range []string{"full", "selective-op", "selective-layer", "none"} {
			c := c
			d.values = append(d.values, func(k *knobs) { k.checkpointing = c })
			d.labels = append(d.labels, c)
		}
		dims = append(dims, d)
	}
	if !fReshard {
		d := dimension{name: "reshard_after_forward", memory: true}
		add := func(label string, f func(*knobs)) { d.values = append(d.values, f); d.labels = append(d.labels, label) }
		add("true", func(k *knobs) { k.reshard = "true"; k.lastUnsharded = 0 })
		add("false", func(k *knobs) { k.reshard = "false"; k.lastUnsharded = 0 })
		// Reshard to a node: the backward all-gather stays on NVLink.
		W := m.Cluster.ShardSize()
		for _, n := range []int{m.Cluster.GPUsPerNode, m.Cluster.GPUsPerNode / 2} {
			if n > 1 && n < W && W%n == 0 {
				n := n
				add(fmt.Sprint(n), func(k *knobs) { k.reshard = fmt.Sprint(n); k.lastUnsharded = 0 })
			}
		}
		if blocks {
			for _, last := range []int{1, 2, 4} {
				last := last
				add(fmt.Sprintf("false for the last %d blocks", last), func(k *knobs) { k.reshard = "true"; k.lastUnsharded = last })
			}
		}
		dims = append(dims, d)
	}
	if !fPF {
		d := dimension{name: "prefetch_forward"}
		for _, v := range []int{0, 1, 2} {
			v := v
			d.values = append(d.values, func(k *knobs) { k.prefetchF = v })
			d.labels = append(d.labels, prefetchLabel(v))
		}
		dims = append(dims, d)
	}
	if !fPB {
		d := dimension{name: "prefetch_backward"}
		for _, v := range []int{0, 1, 2} {
			v := v
			d.values = append(d.values, func(k *knobs) { k.prefetchB = v })
			d.labels = append(d.labels, prefetchLabel(v))
		}
		dims = append(dims, d)
	}
	if blocks {
		d := dimension{name: "units"}
		for _, b := range []int{1, 2, 4} {
			b := b
			d.values = append(d.values, func(k *knobs) { k.blocks = b; k.children = false })
			d.labels = append(d.labels, fmt.Sprintf("%d block(s) per unit", b))
		}
		d.values = append(d.values, func(k *knobs) { k.blocks = 0; k.children = true })
		d.labels = append(d.labels, "each block's children")
		dims = append(dims, d)
	}
	if blocks && len(t.ownUnitNames()) > 0 {
		d := dimension{name: "embedding and output units"}
		d.values = append(d.values, func(k *knobs) { k.ownUnits = false }, func(k *knobs) { k.ownUnits = true })
		d.labels = append(d.labels, "with the root", "their own units")
		dims = append(dims, d)
	}
	if m.Cluster.Mesh == nil {
		// HSDP: shard within a few nodes, replicate across the rest; the
		// all-gathers and reduce-scatters stay on fewer, closer ranks and
		// only the sharded gradients cross the replicas.
		d := dimension{name: "mesh"}
		W, per := m.Cluster.WorldSize, m.Cluster.GPUsPerNode
		for s := per; s < W; s *= 2 {
			if W%s == 0 {
				s := s
				r := W / s
				d.values = append(d.values, func(k *knobs) { k.shard, k.replicate = s, r })
				d.labels = append(d.labels, fmt.Sprintf("%d × %d", W/s, s))
			}
		}
		if len(d.values) > 0 {
			dims = append(dims, d)
		}
	}
	if t.opts.FsdpcKnobs {
		// FSDP2 keeps one reduce-scatter input in flight by default; more
		// is torch 2.14's experimental set_reduce_scatter_max_input_buffers.
		d := dimension{name: "reduce_scatter_buffers"}
		for _, b := range []int{1, 2} {
			b := b
			d.values = append(d.values, func(k *knobs) { k.rsBuffers = b })
			d.labels = append(d.labels, fmt.Sprint(b))
		}
		dims = append(dims, d)
	}
	if !fParam {
		d := dimension{name: "param_dtype", memory: true}
		d.values = append(d.values, func(k *knobs) { k.paramDType = ir.BF16 })
		d.labels = append(d.labels, "bf16")
		dims = append(dims, d)
	}
	if !fReduce {
		d := dimension{name: "reduce_dtype"}
		d.values = append(d.values, func(k *knobs) { k.reduceDType = ir.FP32 }, func(k *knobs) { k.reduceDType = ir.DTypeInvalid })
		d.labels = append(d.labels, "fp32", "the parameter dtype")
		dims = append(dims, d)
	}
	// Memory savers first when the file's plan does not fit.
	sort.SliceStable(dims, func(i, j int) bool { return dims[i].memory && !dims[j].memory })
	return dims
}

func prefetchLabel(v int) string {
	if v == 0 {
		return "implicit"
	}
	return fmt.Sprint(v)
}

// stepTolerance is how close two predicted step times are to count as
// equally fast: the simulator sums thousands of operation times, and
// candidates that plan the same work in another order differ by a few
// rounding steps (about 1e-16 of the step each), never by 1e-9.
const stepTolerance = 1e-9

// sameStep reports whether two step times are equal to stepTolerance.
func sameStep(a, b float64) bool {
	return math.Abs(a-b) <= stepTolerance*max(math.Abs(a), math.Abs(b))
}

// better orders candidates: fitting first, then faster, then smaller.
// Equally fast (sameStep) fitting candidates are ordered by memory; where
// that is equal too neither is better, and the search keeps the one it
// met first (docs/tuning.md).
func better(a, b *Candidate) bool {
	if a.Fits != b.Fits {
		return a.Fits
	}
	if a.Fits && !sameStep(a.StepTime, b.StepTime) {
		return a.StepTime < b.StepTime
	}
	return a.PeakReserved < b.PeakReserved
}

func (t *tuner) descend(start *Candidate, dims []dimension) *Candidate {
	best := start
	for sweep := 0; sweep < 4; sweep++ {
		improved := false
		for _, d := range dims {
			// A dimension's values are independent of each other: plan
			// them on every core first, then compare them in order as
			// before, so the search and its result do not change.
			ks := make([]knobs, len(d.values))
			for i, set := range d.values {
				ks[i] = best.knobs
				set(&ks[i])
			}
			t.prefetch(ks)
			cs := make([]*Candidate, len(ks))
			for i, k := range ks {
				cs[i], _ = t.estimate(k)
			}
			t.confirmContenders(cs, best)
			for _, c := range cs {
				// An estimate left as one cannot beat best
				// (confirmContenders).
				if c != nil && !c.estimated && better(c, best) {
					best, improved = c, true
				}
			}
		}
		if !improved {
			break
		}
	}
	return best
}

func (t *tuner) exhaustive(base knobs, dims []dimension) *Candidate {
	var best *Candidate
	var walk func(i int, k knobs)
	walk = func(i int, k knobs) {
		if i == len(dims) {
			if c, err := t.eval(k); err == nil && (best == nil || better(c, best)) {
				best = c
			}
			return
		}
		walk(i+1, k) // the file's own value
		for _, set := range dims[i].values {
			kk := k
			set(&kk)
			walk(i+1, kk)
		}
	}
	walk(0, base)
	return best
}

// planned is a candidate's plan, its prediction only (tuner.plan), or why
// it has none.
type planned struct {
	p   *schedule.Plan
	err error
}

// planJob is a candidate, by its knobs' key, planned on the file's model
// (size -1) or on one of the short models (0, 1, 2).
type planJob struct {
	key  string
	size int
}

// planAhead plans the jobs not yet planned concurrently, one per core;
// estimate and eval then take their plans in their own order, so what the
// search records and decides is what it would be planning them one by
// one. Planning reads the model and builds its own state, so candidates
// are independent.
func (t *tuner) planAhead(jobs []planJob, ks map[string]knobs) {
	var todo []planJob
	var knobsOf []knobs
	seen := map[planJob]bool{}
	for _, j := range jobs {
		k := t.canonical(ks[j.key])
		j = planJob{k.key(), j.size}
		if _, ok := t.plans[j]; ok || seen[j] {
			continue
		}
		seen[j] = true
		todo = append(todo, j)
		knobsOf = append(knobsOf, k)
	}
	if len(todo) < 2 || runtime.GOMAXPROCS(0) < 2 {
		return
	}
	out := make([]planned, len(todo))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, j := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p, err := t.planner(j.size).plan(knobsOf[i], true)
			out[i] = planned{p, err}
		}()
	}
	wg.Wait()
	if t.plans == nil {
		t.plans = map[planJob]planned{}
	}
	for i, j := range todo {
		t.plans[j] = out[i]
	}
}

// planner is the tuner that plans a job of the size.
func (t *tuner) planner(size int) *tuner {
	if size < 0 {
		return t
	}
	return t.short.tuners[size]
}

// planOf returns the candidate's plan of the size: planned ahead, planned
// before for a candidate with the same canonical knobs, or now. Only
// predictions are kept.
func (t *tuner) planOf(k knobs, size int) (*schedule.Plan, error) {
	k = t.canonical(k)
	j := planJob{k.key(), size}
	if a, ok := t.plans[j]; ok {
		return a.p, a.err
	}
	p, err := t.planner(size).plan(k, true)
	if t.plans == nil {
		t.plans = map[planJob]planned{}
	}
	t.plans[j] = planned{p, err}
	return p, err
}

// canonical spells every "as the file says" of the knobs as the value the
// file's model has, where a dimension offers both (the implicit prefetch
// and an explicit 0, the file's unset reshard_after_forward and true,
// blocks_per_unit, reduce_scatter_buffers, a checkpointing mode): such
// candidates plan the same step, and plan it once.
// TestCanonicalKnobsPlanAlike checks each pair on the zoo.
func (t *tuner) canonical(k knobs) knobs {
	fReshard, fPF, fPB, _, _, _ := t.fixed()
	if !fPF && k.prefetchF < 0 {
		k.prefetchF = 0
	}
	if !fPB && k.prefetchB < 0 {
		k.prefetchB = 0
	}
	if !fReshard && k.reshard == "" {
		k.reshard = "true"
	}
	if k.blocks == t.m.Policy.BlocksPerUnit {
		k.blocks = 0
	}
	if k.rsBuffers == t.m.Policy.ReduceScatterBuffers {
		k.rsBuffers = 0
	}
	if k.checkpointing != "" && ir.CheckpointingModes[k.checkpointing] == t.m.Train.Checkpointing {
		k.checkpointing = ""
	}
	return k
}

// prefetch plans a dimension's candidates ahead: on the short models
// where the tuner extrapolates, in full otherwise.
func (t *tuner) prefetch(ks []knobs) {
	byKey := map[string]knobs{}
	var jobs []planJob
	for _, k := range ks {
		key := k.key()
		if _, ok := t.cache[key]; ok {
			continue
		}
		byKey[key] = k
		if t.short == nil {
			jobs = append(jobs, planJob{key, -1})
			continue
		}
		for size := range t.short.sizes {
			jobs = append(jobs, planJob{key, size})
		}
	}
	t.planAhead(jobs, byKey)
}

// eval plans and simulates one candidate in full, once; an estimated
// candidate is planned in full in place.
func (t *tuner) eval(k knobs) (*Candidate, error) {
	key := k.key()
	c, ok := t.cache[key]
	if ok && !c.estimated {
		return c, nil
	}
	if !ok {
		c = &Candidate{knobs: k, Decisions: k.describe(t.unitGlobs())}
	}
	*c = Candidate{knobs: c.knobs, Decisions: c.Decisions}
	p, err := t.planOf(k, -1)
	if err != nil {
		// A candidate that does not plan (over budget, or invalid for this
		// model) is recorded as not fitting.
		c.PeakReserved = 1<<63 - 1
		if p != nil {
			pr := p.Prediction
			c.StepTime, c.ExposedComm, c.PeakReserved = pr.StepTime, pr.ExposedComm, pr.PeakReserved
		}
		if !ok {
			t.record(key, c)
		}
		if len(t.cache) == 1 && p == nil && !isBudgetError(err) {
			return nil, err // the file itself does not plan
		}
		if !isBudgetError(err) {
			t.fail(err, c)
		}
		return c, nil
	}
	pr := p.Prediction
	c.StepTime, c.ExposedComm, c.PeakReserved = pr.StepTime, pr.ExposedComm, pr.PeakReserved
	c.Fits = pr.PeakReserved <= t.usable
	if !ok {
		t.record(key, c)
	}
	return c, nil
}

// fail counts a candidate that did not plan for a reason other than the
// budget, under the error's first line.
func (t *tuner) fail(err error, c *Candidate) {
	reason, _, _ := strings.Cut(err.Error(), "\n")
	if t.failed == nil {
		t.failed = map[string]*Failure{}
	}
	f, ok := t.failed[reason]
	if !ok {
		f = &Failure{Reason: reason, Decisions: append([]string(nil), c.Decisions...)}
		t.failed[reason] = f
	}
	f.Count++
}

// failures lists the failures sorted by reason.
func (t *tuner) failures() []Failure {
	var out []Failure
	for _, r := range slices.Sorted(maps.Keys(t.failed)) {
		out = append(out, *t.failed[r])
	}
	return out
}

// record caches a new candidate under its knobs' key and reports the
// count to Progress.
func (t *tuner) record(key string, c *Candidate) {
	t.cache[key] = c
	if t.opts.Progress != nil {
		t.opts.Progress(len(t.cache))
	}
}

func isBudgetError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "does not fit")
}

// plan applies the knobs to the model and plans it. Over-budget plans are
// returned with their prediction so the search can compare them.
func (t *tuner) plan(k knobs, skipVerify bool) (*schedule.Plan, error) {
	m, err := t.model(k)
	if err != nil {
		return nil, err
	}
	// Plan without the budget check: the tuner applies its own margin.
	p, err := Plan(m, Options{skipVerify: skipVerify, scoreOnly: skipVerify, overBudget: true, Times: t.opts.Times})
	if err != nil {
		return nil, err
	}
	if skipVerify {
		// A scored candidate is read for its prediction only: its program
		// goes back for the next candidate to emit into.
		recycleOps(p)
		p = &schedule.Plan{Prediction: p.Prediction}
	}
	if p.Prediction.PeakReserved > m.Cluster.MemoryBudget {
		return p, fmt.Errorf("does not fit")
	}
	return p, nil
}

// final plans the winner in full (verified, its simulation kept), as plan
// does with the verifier on.
func (t *tuner) final(k knobs) (*Result, error) {
	m, err := t.model(k)
	if err != nil {
		return nil, err
	}
	r, err := Compile(m, Options{overBudget: true, Times: t.opts.Times})
	if err != nil {
		return nil, err
	}
	if r.Plan.Prediction.PeakReserved > m.Cluster.MemoryBudget {
		return nil, fmt.Errorf("does not fit")
	}
	return r, nil
}

// model builds the model with the knobs applied to its policy (and, for
// checkpointing, lowered again).
func (t *tuner) model(k knobs) (*ir.Model, error) {
	apply := func(m *ir.Model) {
		pol := &m.Policy
		pol.Overrides = append([]ir.Override(nil), pol.Overrides...)
		d := &pol.Default
		if k.checkpointing != "" {
			m.Train.Checkpointing = ir.CheckpointingModes[k.checkpointing]
		}
		switch k.reshard {
		case "true":
			d.ReshardAfterForward = &ir.Reshard{Bool: true}
		case "false":
			d.ReshardAfterForward = &ir.Reshard{Bool: false}
		case "":
		default:
			var n int
			fmt.Sscan(k.reshard, &n)
			d.ReshardAfterForward = &ir.Reshard{N: n}
		}
		if k.reshard != "" {
			// The root keeps FSDP2's default (false) unless the file said.
			if root, err := ir.CompileGlob(""); err == nil {
				pol.Overrides = append(pol.Overrides, ir.Override{Match: ir.Pattern{Glob: root},
					GroupPolicy: ir.GroupPolicy{ReshardAfterForward: &ir.Reshard{Bool: false}}})
			}
		}
		for _, name := range t.lastBlocks(k.lastUnsharded) {
			if g, err := ir.CompileGlob(name); err == nil {
				pol.Overrides = append(pol.Overrides, ir.Override{Match: ir.Pattern{Glob: g},
					GroupPolicy: ir.GroupPolicy{ReshardAfterForward: &ir.Reshard{Bool: false}}})
			}
		}
		if k.prefetchF >= 0 {
			v := k.prefetchF
			d.PrefetchForward = &v
		}
		if k.prefetchB >= 0 {
			v := k.prefetchB
			d.PrefetchBackward = &v
		}
		if k.blocks > 0 {
			pol.BlocksPerUnit = k.blocks
		}
		if k.children {
			pol.UnitsMode = ir.UnitsBlockChildren
		} else if k.ownUnits {
			pol.UnitsMode = ir.UnitsPatterns
			pol.Units, pol.Groups = nil, nil
			for _, name := range append(t.blockNames(), t.ownUnitNames()...) {
				if g, err := ir.CompileGlob(name); err == nil {
					pol.Units = append(pol.Units, ir.Pattern{Glob: g})
				}
			}
		}
		if k.rsBuffers > 0 {
			pol.ReduceScatterBuffers = k.rsBuffers
		}
		if k.paramDType != ir.DTypeInvalid {
			d.ParamDType = k.paramDType
		}
		if k.reduceDType != ir.DTypeInvalid {
			d.ReduceDType = k.reduceDType
		}
		if k.offload {
			v := true
			d.Offload = &v
		}
		if k.shard > 0 {
			m.Cluster.Mesh = &ir.Mesh{Replicate: k.replicate, Shard: k.shard}
		}
	}
	if k.checkpointing != "" || k.paramDType != ir.DTypeInvalid {
		// Costs depend on these: lower again.
		return t.m.Relower(apply)
	}
	m := *t.m
	apply(&m)
	return &m, nil
}

// blocks lists every instance of the model's repeated blocks, the units
// of units = "blocks".
func (t *tuner) blocks() []ir.ModuleID {
	var out []ir.ModuleID
	for i := range t.m.Modules {
		if isBlock(t.m, ir.ModuleID(i)) {
			out = append(out, ir.ModuleID(i))
		}
	}
	return out
}

// blockNames names blocks.
func (t *tuner) blockNames() []string {
	var out []string
	for _, id := range t.blocks() {
		out = append(out, t.m.Modules[id].Name)
	}
	return out
}

// ownUnitNames names the root's embedding and linear children (the token
// embedding and the output projection of a decoder), which torchtitan
// shards as their own units.
func (t *tuner) ownUnitNames() []string {
	var out []string
	for _, c := range t.m.Modules[0].Children {
		mod := &t.m.Modules[c]
		if (mod.Kind == ir.KindEmbedding || mod.Kind == ir.KindLinear) && len(mod.Params) > 0 {
			out = append(out, mod.Name)
		}
	}
	return out
}

// lastBlocks names the last k instances of the model's repeated blocks.
func (t *tuner) lastBlocks(k int) []string {
	if k == 0 {
		return nil
	}
	var out []string
	for i := len(t.m.Modules) - 1; i >= 0 && len(out) < k; i-- {
		if isBlock(t.m, ir.ModuleID(i)) {
			out = append(out, t.m.Modules[i].Name)
		}
	}
	return out
}

// unitGlobs is units = [...] for the ownUnits knob: each repeated block's
// instances by a glob, then the embedding and output.
func (t *tuner) unitGlobs() []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range t.blockNames() {
		g := name
		if i := strings.LastIndex(name, "."); i >= 0 {
			g = name[:i] + ".*"
		}
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return append(out, t.ownUnitNames()...)
}

// describe says what the knobs decide, as [policy] and [train] lines;
// units are the ownUnits knob's patterns.
func (k knobs) describe(units []string) []string {
	var out []string
	if k.checkpointing != "" {
		out = append(out, fmt.Sprintf("checkpointing = %q", k.checkpointing))
	}
	switch {
	case k.reshard != "" && k.lastUnsharded > 0:
		out = append(out, fmt.Sprintf("reshard_after_forward = false for the last %d blocks", k.lastUnsharded))
	case k.reshard == "true" || k.reshard == "false":
		out = append(out, "reshard_after_forward = "+k.reshard)
	case k.reshard != "":
		out = append(out, fmt.Sprintf("reshard_after_forward = %s (keep a 1/%s slice; backward re-gathers within a node)", k.reshard, k.reshard))
	}
	if k.prefetchF > 0 {
		out = append(out, "prefetch_forward = "+fmt.Sprint(k.prefetchF))
	}
	if k.prefetchB > 0 {
		out = append(out, "prefetch_backward = "+fmt.Sprint(k.prefetchB))
	}
	if k.blocks > 1 {
		out = append(out, fmt.Sprintf("blocks_per_unit = %d", k.blocks))
	}
	if k.children {
		out = append(out, `units = "block-children"`)
	} else if k.ownUnits {
		q := make([]string, len(units))
		for i, u := range units {
			q[i] = fmt.Sprintf("%q", u)
		}
		out = append(out, "units = ["+strings.Join(q, ", ")+"]")
	}
	if k.rsBuffers > 1 {
		out = append(out, fmt.Sprintf("reduce_scatter_buffers = %d", k.rsBuffers))
	}
	if k.paramDType != ir.DTypeInvalid {
		out = append(out, fmt.Sprintf("param_dtype = %q", k.paramDType))
	}
	if k.reduceDType != ir.DTypeInvalid {
		out = append(out, fmt.Sprintf("reduce_dtype = %q", k.reduceDType))
	}
	if k.offload {
		out = append(out, "offload = true")
	}
	if k.shard > 0 {
		out = append(out, fmt.Sprintf("mesh = { replicate = %d, shard = %d } (HSDP, in [cluster])", k.replicate, k.shard))
	}
	return out
}

func (t *tuner) smallest() *Candidate {
	var s *Candidate
	for _, c := range t.cache {
		if s == nil || c.PeakReserved < s.PeakReserved || c.PeakReserved == s.PeakReserved && c.knobs.key() < s.knobs.key() {
			s = c
		}
	}
	return s
}

func (t *tuner) sorted() []*Candidate {
	var all []*Candidate
	for _, c := range t.cache {
		all = append(all, c)
	}
	// better's tolerance is not transitive: order by key first, so the
	// stable sort by better starts from the same order on every run.
	sort.Slice(all, func(i, j int) bool { return all[i].knobs.key() < all[j].knobs.key() })
	sort.SliceStable(all, func(i, j int) bool { return better(all[i], all[j]) })
	return all
}

func (t *tuner) alternatives(best *Candidate) []Candidate {
	var out []Candidate
	// Different knobs can give the same plan (an explicit prefetch of 0 is
	// the implicit one): list only candidates whose predictions differ.
	type outcome struct {
		step int64
		mem  int64
	}
	seen := map[outcome]bool{{int64(best.StepTime * 1e6), best.PeakReserved}: true}
	for _, c := range t.sorted() {
		o := outcome{int64(c.StepTime * 1e6), c.PeakReserved}
		if c == best || !c.Fits || seen[o] {
			continue
		}
		seen[o] = true
		out = append(out, *c)
		if len(out) == 3 {
			break
		}
	}
	return out
}

// binding says what stops the tuned plan from being faster.
func (t *tuner) binding(best *Candidate) string {
	for _, c := range t.sorted() {
		if !c.estimated && !c.Fits && c.StepTime > 0 && c.StepTime < best.StepTime*(1-1e-6) && c.PeakReserved < 1<<62 {
			return "memory"
		}
	}
	if best.ExposedComm > 0.05*best.StepTime {
		return "communication"
	}
	return "compute"
}
