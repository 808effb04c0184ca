package planner

import (
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// Advice says what the model file pins that the tuner leaves alone, and
// what changing each choice would give: the checkpointing mode, the
// micro-batch and gradient accumulation, how gradients accumulate, the
// dtypes, and any [policy] or [cluster] key the search would otherwise
// decide. The tuner never changes what the file says (its author may
// have reasons the model does not see: convergence, numerics, a global
// batch), so a faster plan it could have found stays unsaid without
// this.
//
// Each alternative is the model file with that one choice changed,
// lowered again and tuned again: the search starts from the tuned
// plan's decisions and descends over the knobs the changed file leaves
// open, so what an alternative reports is a plan the tuner would
// return for that file, planned and simulated like any candidate, not
// an estimate. It fits when its peak reserved memory is within the
// usable memory the tuned plan was held to.

// Pin is one choice the model file fixes.
type Pin struct {
	Setting string   // the keys, "checkpointing", "micro_batch, grad_accum"
	Section string   // where they are written: "train", "policy", "cluster"
	File    []string // what the file says, as TOML lines
	// Alternatives are the other values, each tuned, in a fixed order.
	Alternatives []Alternative
	tokens       int64 // the file's tokens per step per GPU
}

// Alternative is one pinned choice changed, and the plan the tuner
// finds for it.
type Alternative struct {
	Change []string // the TOML lines to write instead of Pin.File
	// Note says what the change means beyond speed and memory ("the same
	// tokens per step", "2× the tokens per step"); "" when nothing.
	Note string
	// Why is set when no plan was made for the change (the model does
	// not accept it); the figures below are then zero.
	Why           string
	StepTime      float64
	PeakReserved  int64
	Fits          bool
	TokensPerStep int64 // per GPU: micro_batch × seq_len × grad_accum
	// Gain is the change in tokens per second per GPU over the tuned
	// plan, a fraction: 0.2 is 20% more throughput. With the same tokens
	// per step it is the step-time speedup.
	Gain float64
	// Decisions are the tuner's decisions with the change, as
	// Candidate.Decisions.
	Decisions []string
	// The changed model and the tuner that found the plan, which
	// planned it without the verifier (TestAdviceZoo verifies it).
	tuner *tuner
	knobs knobs
}

// Planned reports whether the alternative has a plan.
func (a *Alternative) Planned() bool { return a.Why == "" && a.StepTime > 0 }

// Significant reports whether the gain exceeds the model's uncertainty.
func (a *Alternative) Significant() bool { return a.Gain > Uncertainty }

// MinSuggestedGain is the least gain an alternative is suggested for:
// the precision gains are printed at (0.1%). Below it a change buys
// nothing the user could see (bf16 reductions of a LoRA model's
// adapters save 66 µs of a 3.29 s step).
const MinSuggestedGain = 0.001

// Suggested is the index of the pin's alternative to suggest, the one
// with the most throughput among those that fit and gain at least
// MinSuggestedGain over the tuned plan, keeping the file's tokens per step if any such does (a
// larger global batch is the training recipe's decision); -1 when none
// is.
func (p *Pin) Suggested() int {
	best := -1
	for i := range p.Alternatives {
		a := &p.Alternatives[i]
		if !a.Planned() || !a.Fits || a.Gain < MinSuggestedGain {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &p.Alternatives[best]
		if sa, sb := a.TokensPerStep == p.tokens, b.TokensPerStep == p.tokens; sa != sb {
			if sa {
				best = i
			}
		} else if a.Gain > b.Gain {
			best = i
		}
	}
	return best
}

// Advice is every pin of a model file with its alternatives.
type Advice struct {
	Pins []Pin
	// Evaluated counts the candidates planned for the alternatives.
	Evaluated int
}

// maxDoublings bounds how far past the file's tokens per step the
// micro-batch is doubled while it fits.
const maxDoublings = 3

// Advise names the choices m pins and tunes each alternative; tu is
// Tune's answer for m with the same options.
// An alternative the model does not accept, or that plans no candidate,
// says why instead of failing the advice: the tuned plan stands.
func Advise(m *ir.Model, tu *Tuning, opts TuneOptions) *Advice {
	if opts.Margin == 0 {
		opts.Margin = DefaultHeadroom
	}
	opts.Progress, opts.Exhaustive = nil, false
	a := &adviser{m: m, tu: tu, opts: opts}
	pins := a.pins()
	for i := range pins {
		pins[i].tokens = tokensPerStep(m)
	}
	return &Advice{Pins: pins, Evaluated: a.evaluated}
}

type adviser struct {
	m         *ir.Model
	tu        *Tuning
	opts      TuneOptions
	evaluated int
}

// try tunes the model with change applied.
func (a *adviser) try(change func(*ir.Model), lines []string, note string) Alternative {
	alt := Alternative{Change: lines, Note: note}
	mm, err := a.m.Relower(change)
	if err != nil {
		alt.Why = err.Error()
		return alt
	}
	t := &tuner{m: mm, opts: a.opts, cache: map[string]*Candidate{}, usable: a.tu.Usable}
	// From the tuned plan's decisions, or from the file's own plan where
	// they do not plan with the change (a unit inside a checkpoint
	// region).
	start, err := t.eval(a.tu.Best.knobs)
	if base := (knobs{prefetchF: -1, prefetchB: -1}); err != nil || start.StepTime <= 0 {
		c, err2 := t.eval(base)
		if err2 != nil {
			a.evaluated += len(t.cache)
			alt.Why = err2.Error()
			return alt
		}
		if err != nil || better(c, start) {
			start = c
		}
	}
	best := t.descend(start, t.dimensions())
	a.evaluated += len(t.cache)
	if best.StepTime <= 0 || best.PeakReserved >= 1<<62 {
		alt.Why = "no candidate plans"
		return alt
	}
	alt.tuner, alt.knobs = t, best.knobs
	alt.StepTime, alt.PeakReserved, alt.Fits = best.StepTime, best.PeakReserved, best.Fits
	alt.Decisions = append([]string{}, best.Decisions...)
	alt.TokensPerStep = tokensPerStep(mm)
	if base := a.tu.Best; base.StepTime > 0 {
		alt.Gain = float64(alt.TokensPerStep)/alt.StepTime/(float64(tokensPerStep(a.m))/base.StepTime) - 1
	}
	return alt
}

func tokensPerStep(m *ir.Model) int64 {
	return m.Train.MicroBatch * m.Train.SeqLen * m.Train.GradAccum
}

// pins lists the model's pinned choices with their alternatives tuned,
// in the order [train], [policy], [cluster].
func (a *adviser) pins() []Pin {
	var out []Pin
	m := a.m
	tr := m.Train
	if tr.CheckpointingSet {
		p := Pin{Setting: "checkpointing", Section: "train", File: []string{fmt.Sprintf("checkpointing = %q", tr.Checkpointing)}}
		for _, mode := range []ir.Checkpointing{ir.CheckpointNone, ir.CheckpointSelective, ir.CheckpointSelectiveLayer, ir.CheckpointFull} {
			if mode == tr.Checkpointing {
				continue
			}
			p.Alternatives = append(p.Alternatives, a.try(func(x *ir.Model) { x.Train.Checkpointing = mode },
				[]string{fmt.Sprintf("checkpointing = %q", mode)}, ""))
		}
		out = append(out, p)
	}
	out = append(out, a.batchPin())
	if tr.GradAccum > 1 {
		out = append(out, a.accumulatePin())
	}
	if p, ok := a.unitsPin(); ok {
		out = append(out, p)
	}
	out = append(out, a.policyPins()...)
	if m.Cluster.Mesh != nil {
		mesh := *m.Cluster.Mesh
		p := Pin{Setting: "mesh", Section: "cluster", File: []string{fmt.Sprintf("mesh = { replicate = %d, shard = %d }", mesh.Replicate, mesh.Shard)}}
		p.Alternatives = append(p.Alternatives, a.try(func(x *ir.Model) { x.Cluster.Mesh = nil },
			[]string{"remove mesh"}, "the tuner decides"))
		out = append(out, p)
	}
	return out
}

// batchPin is the micro-batch and accumulation: larger micro-batches
// with the same tokens per step (fewer micro-batches, so fewer
// all-gathers and larger kernels), then, while they fit, with more
// tokens per step (a larger global batch, which the training recipe
// must allow).
func (a *adviser) batchPin() Pin {
	tr := a.m.Train
	p := Pin{Setting: "micro_batch, grad_accum", Section: "train",
		File: []string{fmt.Sprintf("micro_batch = %d", tr.MicroBatch), fmt.Sprintf("grad_accum = %d", tr.GradAccum)}}
	set := func(mb, ga int64) func(*ir.Model) {
		return func(x *ir.Model) { x.Train.MicroBatch, x.Train.GradAccum = mb, ga }
	}
	lines := func(mb, ga int64) []string {
		return []string{fmt.Sprintf("micro_batch = %d", mb), fmt.Sprintf("grad_accum = %d", ga)}
	}
	for k := int64(2); k <= tr.GradAccum; k++ {
		if tr.GradAccum%k == 0 {
			mb, ga := tr.MicroBatch*k, tr.GradAccum/k
			p.Alternatives = append(p.Alternatives, a.try(set(mb, ga), lines(mb, ga), "the same tokens per step"))
		}
	}
	// With no accumulation left, grow the batch while it fits.
	if last := len(p.Alternatives) - 1; last >= 0 && !p.Alternatives[last].Fits {
		return p
	}
	mb := tr.MicroBatch * tr.GradAccum
	for i, f := 0, int64(2); i < maxDoublings; i, f = i+1, f*2 {
		alt := a.try(set(mb*f, 1), lines(mb*f, 1), fmt.Sprintf("%d× the tokens per step: a larger global batch", f))
		p.Alternatives = append(p.Alternatives, alt)
		if !alt.Fits {
			break
		}
	}
	return p
}

// accumulatePin is how gradients accumulate across micro-batches.
func (a *adviser) accumulatePin() Pin {
	cur, other := "sharded", "unsharded"
	if a.m.Train.AccumulateUnsharded {
		cur, other = other, cur
	}
	p := Pin{Setting: "accumulate", Section: "train", File: []string{fmt.Sprintf("accumulate = %q", cur)}}
	p.Alternatives = append(p.Alternatives, a.try(func(x *ir.Model) { x.Train.AccumulateUnsharded = !x.Train.AccumulateUnsharded },
		[]string{fmt.Sprintf("accumulate = %q", other)}, ""))
	return p
}

// policyPins are the [policy] keys the tuner would decide but the file
// sets: the dtypes are tried at the other value, the rest left to the
// tuner.
func (a *adviser) policyPins() []Pin {
	var out []Pin
	pol := a.m.Policy
	// each calls f on the default and every override.
	each := func(x *ir.Model, f func(g *ir.GroupPolicy)) {
		f(&x.Policy.Default)
		x.Policy.Overrides = append([]ir.Override(nil), x.Policy.Overrides...)
		for i := range x.Policy.Overrides {
			f(&x.Policy.Overrides[i].GroupPolicy)
		}
	}
	pinned := func(f func(g ir.GroupPolicy) bool) bool {
		n := f(pol.Default)
		for _, o := range pol.Overrides {
			n = n || f(o.GroupPolicy)
		}
		return n
	}
	// The values the tuner tries where the file is silent: bf16
	// parameters; fp32 or bf16 (the parameters') reductions.
	dtypes := []struct {
		key    string
		get    func(g ir.GroupPolicy) ir.DType
		set    func(g *ir.GroupPolicy, d ir.DType)
		values []ir.DType
	}{
		{"param_dtype", func(g ir.GroupPolicy) ir.DType { return g.ParamDType }, func(g *ir.GroupPolicy, d ir.DType) { g.ParamDType = d }, []ir.DType{ir.BF16}},
		{"reduce_dtype", func(g ir.GroupPolicy) ir.DType { return g.ReduceDType }, func(g *ir.GroupPolicy, d ir.DType) { g.ReduceDType = d }, []ir.DType{ir.BF16, ir.FP32}},
	}
	for _, d := range dtypes {
		if !pinned(func(g ir.GroupPolicy) bool { return d.get(g) != ir.DTypeInvalid }) {
			continue
		}
		p := Pin{Setting: d.key, Section: "policy", File: a.policyLines(d.key, func(g ir.GroupPolicy) (string, bool) {
			v := d.get(g)
			return fmt.Sprintf("%q", v), v != ir.DTypeInvalid
		})}
		for _, v := range d.values {
			if d.get(pol.Default) == v && !pinned(func(g ir.GroupPolicy) bool { return d.get(g) != ir.DTypeInvalid && d.get(g) != v }) {
				continue // the file's own
			}
			p.Alternatives = append(p.Alternatives, a.try(func(x *ir.Model) {
				each(x, func(g *ir.GroupPolicy) { d.set(g, ir.DTypeInvalid) })
				d.set(&x.Policy.Default, v)
			}, []string{fmt.Sprintf("%s = %q", d.key, v)}, ""))
		}
		out = append(out, p)
	}
	open := []struct {
		key   string
		set   func(g ir.GroupPolicy) (string, bool)
		clear func(g *ir.GroupPolicy)
	}{
		{"reshard_after_forward", func(g ir.GroupPolicy) (string, bool) {
			if g.ReshardAfterForward == nil {
				return "", false
			}
			return g.ReshardAfterForward.String(), true
		}, func(g *ir.GroupPolicy) { g.ReshardAfterForward = nil }},
		{"prefetch_forward", intKey(func(g ir.GroupPolicy) *int { return g.PrefetchForward }), func(g *ir.GroupPolicy) { g.PrefetchForward = nil }},
		{"prefetch_backward", intKey(func(g ir.GroupPolicy) *int { return g.PrefetchBackward }), func(g *ir.GroupPolicy) { g.PrefetchBackward = nil }},
		{"offload", func(g ir.GroupPolicy) (string, bool) {
			if g.Offload == nil {
				return "", false
			}
			return fmt.Sprint(*g.Offload), true
		}, func(g *ir.GroupPolicy) { g.Offload = nil }},
	}
	for _, k := range open {
		if !pinned(func(g ir.GroupPolicy) bool { _, ok := k.set(g); return ok }) {
			continue
		}
		p := Pin{Setting: k.key, Section: "policy", File: a.policyLines(k.key, k.set)}
		p.Alternatives = append(p.Alternatives, a.try(func(x *ir.Model) { each(x, k.clear) },
			[]string{"remove " + k.key}, "the tuner decides"))
		out = append(out, p)
	}
	return out
}

func intKey(get func(g ir.GroupPolicy) *int) func(g ir.GroupPolicy) (string, bool) {
	return func(g ir.GroupPolicy) (string, bool) {
		if v := get(g); v != nil {
			return fmt.Sprint(*v), true
		}
		return "", false
	}
}

// policyLines writes a policy key as the file sets it: in [policy] and in
// each override that sets it.
func (a *adviser) policyLines(key string, get func(g ir.GroupPolicy) (string, bool)) []string {
	var out []string
	if v, ok := get(a.m.Policy.Default); ok {
		out = append(out, fmt.Sprintf("%s = %s", key, v))
	}
	for _, o := range a.m.Policy.Overrides {
		if v, ok := get(o.GroupPolicy); ok {
			out = append(out, fmt.Sprintf("%s = %s (override %q)", key, v, o.Match.Glob.String()))
		}
	}
	return out
}

// unitsPin is units written as patterns or as each block's children, on
// a model with repeated blocks: the tuner chooses units only from
// units = "blocks" (blocks per unit, the children, the embedding and
// output on their own).
func (a *adviser) unitsPin() (Pin, bool) {
	pol := a.m.Policy
	if pol.UnitsMode != ir.UnitsPatterns && pol.UnitsMode != ir.UnitsBlockChildren {
		return Pin{}, false
	}
	if len((&tuner{m: a.m}).blocks()) == 0 {
		return Pin{}, false
	}
	line := fmt.Sprintf("units = %q", pol.UnitsMode)
	if pol.UnitsMode == ir.UnitsPatterns {
		var items []string
		for _, u := range pol.Units {
			items = append(items, fmt.Sprintf("%q", u.Glob.String()))
		}
		for _, g := range pol.Groups {
			var in []string
			for _, u := range g.Patterns {
				in = append(in, fmt.Sprintf("%q", u.Glob.String()))
			}
			items = append(items, "["+strings.Join(in, ", ")+"]")
		}
		line = "units = [" + strings.Join(items, ", ") + "]"
	}
	p := Pin{Setting: "units", Section: "policy", File: []string{line}}
	p.Alternatives = append(p.Alternatives, a.try(func(x *ir.Model) {
		x.Policy.UnitsMode, x.Policy.Units, x.Policy.Groups = ir.UnitsBlocks, nil, nil
	}, []string{`units = "blocks"`}, "the tuner decides the grouping"))
	return p, true
}
