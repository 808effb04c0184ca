package gpu

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/schedule"
)

// The measured step is the last one: the first steps warm the caching
// allocator and run the data check. Every operation of it is bracketed by
// two events on its stream; times are on the device clock, from an event
// recorded when the backend opened.

type measurer struct {
	b      *Backend
	step   int // the measured step
	base   Event
	starts [][]Event // [rank][op]: the event's ID + 1, 0 for none
	ends   [][]Event
	// collected, in seconds since base: [rank][op], NaN for none
	t0, t1 [][]float64
	used0  int64 // device memory in use when the backend opened
	used   int64 // and at the end

	// The steps without timing events: marks[s] is recorded on the
	// first local rank's compute stream when its CPU enters step s, for
	// s from free (the first unchecked step) to step, so that the
	// steps free … step−1, which carry no per-op events, are timed as a
	// whole on the device clock beside the measured one (issue 29, N4:
	// the measured step's two records per op may slow it).
	free, markRank int
	marks          map[int]Event
	unmeasured     float64 // seconds a step, mean of free … step−1; 0 if none

	// callsAt is the device calls made when the first local rank entered
	// the measured step, callsEnd when Drain began: the measured step's
	// calls, timing records included, every local rank's.
	callsAt, callsEnd int64
}

func newMeasurer(b *Backend, local []int, step int) (*measurer, error) {
	m := &measurer{b: b, step: step, free: b.opt.CheckSteps, markRank: local[0], marks: map[int]Event{}}
	n := len(b.plan.Ops)
	m.starts = make([][]Event, b.t.World())
	m.ends = make([][]Event, b.t.World())
	for _, r := range local {
		m.starts[r] = make([]Event, n)
		m.ends[r] = make([]Event, n)
	}
	ev, err := b.dev.NewEvent()
	if err != nil {
		return nil, fmt.Errorf("gpu backend: timing: %w", err)
	}
	m.base = ev
	if err := b.dev.Record(ev, b.ranks[local[0]].streams[schedule.StreamCompute]); err != nil {
		return nil, fmt.Errorf("gpu backend: timing: %w", err)
	}
	if free, total, err := b.dev.MemInfo(); err == nil {
		m.used0 = total - free
	}
	return m, nil
}

func (m *measurer) event(list []Event, op int) (Event, error) {
	if list[op] == 0 {
		ev, err := m.b.dev.NewEvent()
		if err != nil {
			return 0, err
		}
		list[op] = ev + 1 // 0 means none
	}
	return list[op] - 1, nil
}

// enterStep marks the first local rank's entry into step (Backend.enter).
func (m *measurer) enterStep(r *rank, step int) {
	if r.rank == m.markRank && step == m.step {
		m.callsAt = m.b.calls.Calls()
	}
	if r.rank != m.markRank || step < m.free || step > m.step || m.step-m.free < 1 {
		return
	}
	ev, err := m.b.dev.NewEvent() // timed: Elapsed reads it
	if err == nil {
		err = m.b.dev.Record(ev, r.streams[schedule.StreamCompute])
	}
	if err != nil {
		m.b.must(r.rank, schedule.StreamCompute, -1, err)
		return
	}
	m.marks[step] = ev
}

func (m *measurer) begin(r *rank, s schedule.Stream, op, step int) {
	m.mark(m.starts, r, s, op, step)
}

func (m *measurer) end(r *rank, s schedule.Stream, op, step int) {
	m.mark(m.ends, r, s, op, step)
}

func (m *measurer) mark(list [][]Event, r *rank, s schedule.Stream, op, step int) {
	if step != m.step {
		return
	}
	ev, err := m.event(list[r.rank], op)
	if err == nil {
		err = m.b.dev.Record(ev, r.stream(s))
	}
	m.b.must(r.rank, s, op, err)
}

// collect reads the events once every stream has drained.
func (m *measurer) collect() error {
	m.t0 = make([][]float64, len(m.starts))
	m.t1 = make([][]float64, len(m.starts))
	for r := range m.starts {
		if m.starts[r] == nil {
			continue
		}
		m.t0[r] = make([]float64, len(m.starts[r]))
		m.t1[r] = make([]float64, len(m.starts[r]))
		for op := range m.starts[r] {
			m.t0[r][op], m.t1[r][op] = math.NaN(), math.NaN()
			if m.starts[r][op] == 0 || m.ends[r][op] == 0 {
				continue
			}
			a, err := m.b.dev.Elapsed(m.base, m.starts[r][op]-1)
			if err != nil {
				return fmt.Errorf("rank %d, %s: %w", r, m.b.describe(op), err)
			}
			z, err := m.b.dev.Elapsed(m.base, m.ends[r][op]-1)
			if err != nil {
				return fmt.Errorf("rank %d, %s: %w", r, m.b.describe(op), err)
			}
			m.t0[r][op], m.t1[r][op] = a.Seconds(), z.Seconds()
		}
	}
	if a, ok := m.marks[m.free]; ok {
		if z, ok := m.marks[m.step]; ok {
			d, err := m.b.dev.Elapsed(a, z)
			if err != nil {
				return fmt.Errorf("the unmeasured steps: %w", err)
			}
			m.unmeasured = d.Seconds() / float64(m.step-m.free)
		}
	}
	if free, total, err := m.b.dev.MemInfo(); err == nil {
		m.used = total - free
	}
	return nil
}

// fill puts a rank's measured step into the executor's statistics: the
// phases of the measured step and each stream's busy time.
func (m *measurer) fill(rk int, st *executor.RankStats) {
	if m.t0 == nil || m.t0[rk] == nil {
		return
	}
	st.PhaseStart = make([][3]int64, m.step+1)
	st.PhaseEnd = make([][3]int64, m.step+1)
	ps, pe := &st.PhaseStart[m.step], &st.PhaseEnd[m.step]
	for i := range ps {
		ps[i] = math.MaxInt64
	}
	for op, a := range m.t0[rk] {
		if math.IsNaN(a) {
			continue
		}
		o := &m.b.plan.Ops[op]
		z := m.t1[rk][op]
		ph := o.Phase
		ps[ph] = min(ps[ph], int64(a*1e9))
		pe[ph] = max(pe[ph], int64(z*1e9))
		st.Busy[o.Stream] += time.Duration((z - a) * 1e9)
	}
	for i := range ps {
		if ps[i] == math.MaxInt64 {
			ps[i] = 0
		}
	}
}

// Measurement is a run's measured step set against the prediction.
type Measurement struct {
	Device string
	Step   int // the measured step (0-based)
	Ranks  int // ranks measured in this process
	// Measured and Predicted: step time, compute-stream time spent on
	// compute, exposed communication (the compute stream idle within the
	// step), all in seconds; device memory in bytes.
	Measured, Predicted Figures
	// PredictionErr says why Predicted is empty: the simulator could not
	// settle the plan on the backend's model.
	PredictionErr error
	// CallsPerOp is the device calls the measured step made per plan op
	// and rank (its timing records included); PredictedIssued the
	// simulator's step time when each op's issue costs that many calls,
	// not one (issue 29, N4: the model charged one issue per op).
	CallsPerOp      float64
	PredictedIssued float64
	// Unmeasured is the mean device time of the steps between the data
	// check and the measured step, which carry no timing events, from
	// one event at each step's entry on the compute stream; 0 when there
	// are none (fewer than CheckSteps+2 steps, or --graph).
	Unmeasured      float64
	UnmeasuredSteps int
	// Collectives per kind: count, bytes (one rank's output), time, and
	// the bus bandwidth nccl-tests reports.
	Collectives []CollectiveFigures
	// Timings is rank 0's (the first local rank's) measured step as a
	// simulation, for a trace aligned with the simulator's.
	Timings *schedule.Simulation
	// Check: the data check's coverage.
	CheckedGathers, CheckedCollectives, CheckedBytes int64
	// Graph: the replayed steps against the eager one, with --graph.
	Graph *GraphFigures
	// AllocatorReserved is the device blocks the caching allocator holds
	// at the end, over every local rank: what the prediction models.
	AllocatorReserved int64
	// AllocatorModel is what the backend's pools, which reuse a freed
	// block only for an allocation of exactly its size, reserve for this
	// plan, over every local rank (exactSizeReserved): the like-for-like
	// prediction of AllocatorReserved. Predicted.PeakMemory models
	// PyTorch's caching allocator, another policy.
	AllocatorModel int64
	// Memory is the device memory sampled during the run
	// (Options.Memory); nil when there was no sampler, and MemoryOff
	// (Options.MemoryOff) then says why.
	Memory    *MemoryFigures
	MemoryOff string
}

// Figures are one step's headline numbers.
type Figures struct {
	StepTime, ComputeTime, ExposedComm float64
	PeakMemory                         int64
}

// CollectiveFigures sum one kind of collective over the measured step.
type CollectiveFigures struct {
	Kind      schedule.OpKind
	Count     int
	Bytes     int64
	Time      float64 // measured, seconds
	Predicted float64
	// Exposed and PredExposed: the time within these collectives when
	// the compute stream runs no op, measured and on the simulator's
	// timeline of the same step (exposedWithin).
	Exposed, PredExposed float64
	BusBW                float64 // measured bytes/s, nccl-tests' bus bandwidth
	PredBusBW            float64
}

// Measurement returns the measured step against the simulator's
// prediction for the same (scaled) plan on the backend's model. It is
// only meaningful after a Drain without failures.
func (b *Backend) Measurement() *Measurement {
	m := b.meas
	out := &Measurement{Device: b.dev.Name(), Step: m.step, Unmeasured: m.unmeasured}
	if m.unmeasured > 0 {
		out.UnmeasuredSteps = m.step - m.free
	}
	locals := 0
	for _, r := range b.ranks {
		if r != nil {
			locals++
		}
	}
	if n := len(b.plan.Ops) * locals; n > 0 && m.callsEnd > m.callsAt && m.callsAt > 0 {
		out.CallsPerOp = float64(m.callsEnd-m.callsAt) / float64(n)
		issued := *b.mdl
		issued.Cal.IssueKernel *= out.CallsPerOp
		issued.Cal.IssueOther *= out.CallsPerOp
		if sim, err := schedule.Simulate(b.plan, &issued); err == nil {
			out.PredictedIssued = sim.Prediction().StepTime
		}
	}
	out.CheckedGathers, out.CheckedCollectives, out.CheckedBytes = b.Checked()
	sim, err := schedule.Simulate(b.plan, b.mdl)
	if err != nil {
		out.PredictionErr = err
	} else {
		pred := sim.Prediction()
		out.Predicted = Figures{StepTime: pred.StepTime, ComputeTime: pred.ComputeTime, ExposedComm: pred.ExposedComm, PeakMemory: pred.PeakReserved}
	}
	first := -1
	for r := range m.t0 {
		if m.t0[r] == nil {
			continue
		}
		out.Ranks++
		lo, hi := math.Inf(1), math.Inf(-1)
		var compute, computeStream float64
		for op, a := range m.t0[r] {
			if math.IsNaN(a) {
				continue
			}
			z := m.t1[r][op]
			lo, hi = math.Min(lo, a), math.Max(hi, z)
			o := &b.plan.Ops[op]
			if o.Stream == schedule.StreamCompute {
				computeStream += z - a
				if o.Kind == schedule.OpForward || o.Kind == schedule.OpBackward {
					compute += z - a
				}
			}
		}
		if hi < lo {
			continue
		}
		step := hi - lo
		if step > out.Measured.StepTime {
			out.Measured.StepTime = step
			out.Measured.ComputeTime = compute
			out.Measured.ExposedComm = math.Max(step-computeStream, 0)
		}
		if first < 0 {
			first = r
			out.Timings = m.simulation(b.plan, r, lo)
		}
	}
	// The device holds every rank of this process; the prediction is one
	// rank's reserved memory.
	out.Measured.PeakMemory = m.used - m.used0
	out.Predicted.PeakMemory *= int64(out.Ranks)
	perRank := exactSizeReserved(b.plan)
	for _, r := range b.ranks {
		if r == nil {
			continue
		}
		out.AllocatorModel += perRank
		for p := range r.pools {
			if schedule.Pool(p) != schedule.PoolHost {
				out.AllocatorReserved += r.pools[p].stats.Reserved
			}
		}
	}
	out.Memory, out.MemoryOff = b.sampler.figures(), b.opt.MemoryOff
	if g, err := b.graphFigures(time.Duration(out.Measured.StepTime * 1e9)); err == nil {
		out.Graph = g
	}
	// Collectives of the first measured rank, with the prediction's own
	// durations for the same ops.
	if first >= 0 {
		byKind := map[schedule.OpKind]*CollectiveFigures{}
		var order []schedule.OpKind
		measured := exposedWithin(b.plan, func(op int) (float64, float64, bool) {
			a := m.t0[first][op]
			return a, m.t1[first][op], !math.IsNaN(a)
		})
		var predicted map[int]float64
		if sim != nil {
			predicted = exposedWithin(b.plan, func(op int) (float64, float64, bool) {
				t := sim.Ops[op]
				return t.Start, t.End, t.End > t.Start
			})
		}
		for op, a := range m.t0[first] {
			o := &b.plan.Ops[op]
			if math.IsNaN(a) || (o.Kind != schedule.OpAllGather && o.Kind != schedule.OpReduceScatter && o.Kind != schedule.OpAllReduce) || o.PGSize < 2 {
				continue
			}
			cf := byKind[o.Kind]
			if cf == nil {
				cf = &CollectiveFigures{Kind: o.Kind}
				byKind[o.Kind] = cf
				order = append(order, o.Kind)
			}
			cf.Count++
			cf.Bytes += o.Bytes
			cf.Time += m.t1[first][op] - a
			cf.Predicted += b.mdl.OpDuration(b.plan, o)
			cf.Exposed += measured[op]
			cf.PredExposed += predicted[op]
			n := float64(o.PGSize)
			factor := (n - 1) / n // bus bandwidth: nccl-tests' PERFORMANCE.md
			if o.Kind == schedule.OpAllReduce {
				factor = 2 * (n - 1) / n
			}
			cf.BusBW += float64(o.Bytes) * factor // summed, divided below
			cf.PredBusBW += float64(o.Bytes) * factor
		}
		for _, k := range order {
			cf := byKind[k]
			if cf.Time > 0 {
				cf.BusBW /= cf.Time
			}
			if cf.Predicted > 0 {
				cf.PredBusBW /= cf.Predicted
			}
			out.Collectives = append(out.Collectives, *cf)
		}
	}
	return out
}

// simulation is a rank's measured step as a schedule.Simulation (times
// from the step's first op), so schedule.WriteTrace draws it on the same
// tracks as the simulator's trace.
func (m *measurer) simulation(p *schedule.Plan, r int, lo float64) *schedule.Simulation {
	s := &schedule.Simulation{Ops: make([]schedule.Timing, len(p.Ops))}
	for op, a := range m.t0[r] {
		if math.IsNaN(a) {
			continue
		}
		s.Ops[op] = schedule.Timing{Start: a - lo, End: m.t1[r][op] - lo}
		s.StepTime = math.Max(s.StepTime, m.t1[r][op]-lo)
	}
	return s
}

// Write prints the measurement as a table: measured, predicted, ratio.
func (x *Measurement) Write(w io.Writer) {
	fmt.Fprintf(w, "\nmeasured on %s, step %d (%d rank(s) in this process), against the simulator on the same figures\n", x.Device, x.Step, x.Ranks)
	// Names are padded by runes, not bytes: "×" and "−" are two and
	// three bytes of UTF-8 but one column.
	pad := func(name string) string { return name + strings.Repeat(" ", max(26-utf8.RuneCountInString(name), 0)) }
	fmt.Fprintf(w, "  %s %12s %12s %8s\n", pad(""), "measured", "predicted", "ratio")
	row := func(name string, got, want float64, unit func(float64) string) {
		ratio := "-"
		if want > 0 {
			ratio = fmt.Sprintf("%.3f", got/want)
		}
		fmt.Fprintf(w, "  %s %12s %12s %8s\n", pad(name), unit(got), unit(want), ratio)
	}
	ms := func(s float64) string { return fmt.Sprintf("%.3f ms", s*1e3) }
	row("step time", x.Measured.StepTime, x.Predicted.StepTime, ms)
	if x.PredictedIssued > 0 {
		row(fmt.Sprintf("  issue at %.2f calls/op", x.CallsPerOp), x.Measured.StepTime, x.PredictedIssued, ms)
	}
	if x.UnmeasuredSteps > 0 {
		row(fmt.Sprintf("  steps %d–%d, no events", x.Step-x.UnmeasuredSteps, x.Step-1), x.Unmeasured, x.Predicted.StepTime, ms)
	}
	row("compute", x.Measured.ComputeTime, x.Predicted.ComputeTime, ms)
	row("exposed communication", x.Measured.ExposedComm, x.Predicted.ExposedComm, ms)
	row(fmt.Sprintf("device memory (%d rank(s))", x.Ranks), float64(x.Measured.PeakMemory), float64(x.Predicted.PeakMemory), func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) })
	x.writeMemory(w, row)
	for _, c := range x.Collectives {
		row(fmt.Sprintf("%s ×%d", c.Kind, c.Count), c.Time, c.Predicted, ms)
		row("  bus bandwidth", c.BusBW, c.PredBusBW, func(v float64) string { return fmt.Sprintf("%.1f GB/s", v/1e9) })
		row("  exposed", c.Exposed, c.PredExposed, ms)
	}
	if g := x.Graph; g != nil {
		fmt.Fprintf(w, "  CUDA graph: %d replay(s) of step %d; a replay takes %v on the device (eager step %v) and %v of CPU to launch (eager issue %v): %v of launch overhead saved per step\n",
			g.Replays, x.Step+1, g.Replay, g.Eager, g.Launch, g.Issue, g.Eager-g.Replay)
	}
	if x.CheckedGathers+x.CheckedCollectives > 0 {
		fmt.Fprintf(w, "  data check: %d parameter reads equal the reference, %d collectives equal the host's recomputation (%d bytes compared)\n",
			x.CheckedGathers, x.CheckedCollectives, x.CheckedBytes)
	}
}

// exposedWithin is, for every collective op of a step's timeline (span
// gives an op's start and end, and whether it ran), the time within it
// when the compute stream runs no op: the communication the compute does
// not hide, per collective (issue 29, N4), on the measured timeline or
// the simulator's alike.
func exposedWithin(p *schedule.Plan, span func(op int) (start, end float64, ok bool)) map[int]float64 {
	var busy [][2]float64
	for op := range p.Ops {
		if p.Ops[op].Stream != schedule.StreamCompute {
			continue
		}
		if a, z, ok := span(op); ok && z > a {
			busy = append(busy, [2]float64{a, z})
		}
	}
	slices.SortFunc(busy, func(x, y [2]float64) int { return cmp.Compare(x[0], y[0]) })
	merged := busy[:0]
	for _, iv := range busy {
		if n := len(merged); n > 0 && iv[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], iv[1])
			continue
		}
		merged = append(merged, iv)
	}
	out := map[int]float64{}
	for op := range p.Ops {
		switch p.Ops[op].Kind {
		case schedule.OpAllGather, schedule.OpReduceScatter, schedule.OpAllReduce:
		default:
			continue
		}
		a, z, ok := span(op)
		if !ok || z <= a {
			continue
		}
		covered := 0.0
		for _, iv := range merged {
			covered += max(0, min(z, iv[1])-max(a, iv[0]))
		}
		out[op] = z - a - covered
	}
	return out
}
