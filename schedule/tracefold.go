package schedule

import "fmt"

// TraceOpBudget is how many operations a trace draws, counted once per
// drawn rank, before it folds. A drawn operation is about 450 bytes of
// JSON (gpt2-124m, 8 ranks: 12 GB for 3.28 M operations a rank), so the
// budget keeps a trace near 240 MB, which Perfetto opens in the browser;
// every zoo plan's trace is well under it and drawn whole.
const TraceOpBudget = 1 << 19

// TraceFold is what a trace leaves out to stay within its budget: the
// micro-batches between the first two and the last, whose operations
// repeat, become one "folded" span per track; if that is still too much,
// only the first Ranks of the ranks asked for are drawn.
type TraceFold struct {
	// First and Last are the folded micro-batches, inclusive; First >
	// Last when none are.
	First, Last int
	// Ranks is how many of the ranks asked for are drawn; Asked how many
	// were asked for.
	Ranks, Asked int
	// Ops is the operations drawn per rank; Total the plan's.
	Ops, Total int
}

// Folded reports whether the trace leaves anything out.
func (f TraceFold) Folded() bool { return f.First <= f.Last || f.Ranks < f.Asked }

// folds reports whether an operation of micro-batch mb is folded.
func (f TraceFold) folds(mb int32) bool { return f.First <= int(mb) && int(mb) <= f.Last }

// Note says what was left out, for the trace's otherData and the user.
func (f TraceFold) Note() string {
	if !f.Folded() {
		return ""
	}
	s := fmt.Sprintf("the plan's %d operations a rank on %d ranks are more than a trace draws (%d); ", f.Total, f.Asked, TraceOpBudget)
	if f.First <= f.Last {
		s += fmt.Sprintf("micro-batches %d–%d, which repeat, are folded into one span per track (%d operations a rank drawn)", f.First, f.Last, f.Ops)
		if f.Ranks < f.Asked {
			s += "; "
		}
	}
	if f.Ranks < f.Asked {
		s += fmt.Sprintf("%d of the %d ranks asked for are drawn (every rank shares one simulated timeline)", f.Ranks, f.Asked)
	}
	return s
}

// FoldTrace decides what a trace of ranks ranks of p draws within budget
// operations (0: TraceOpBudget). A plan that fits is drawn whole. Else the
// micro-batches from the third to the last but one are folded (the first
// shows the pipeline filling, the second the steady state, the last the
// gradient reduction and optimizer); if that still does not fit, fewer
// ranks are drawn, never fewer than one.
func FoldTrace(p *Plan, ranks, budget int) TraceFold {
	if budget <= 0 {
		budget = TraceOpBudget
	}
	ranks = max(ranks, 1)
	f := TraceFold{First: 1, Last: 0, Ranks: ranks, Asked: ranks, Ops: len(p.Ops), Total: len(p.Ops)}
	if len(p.Ops)*ranks <= budget {
		return f
	}
	last := 0
	for i := range p.Ops {
		last = max(last, int(p.Ops[i].Micro))
	}
	if last >= 3 {
		f.First, f.Last = 2, last-1
		f.Ops = 0
		for i := range p.Ops {
			if !f.folds(p.Ops[i].Micro) {
				f.Ops++
			}
		}
	}
	if f.Ops*ranks > budget {
		f.Ranks = max(1, budget/max(f.Ops, 1))
	}
	return f
}

// foldRun is a run of folded operations on one track, drawn as one span.
type foldRun struct {
	n          int
	start, end float64
	lo, hi     int32 // micro-batches
}

func (r *foldRun) add(start, end float64, mb int32) {
	if r.n == 0 {
		r.start, r.end, r.lo, r.hi = start, end, mb, mb
	}
	r.n++
	r.start, r.end = min(r.start, start), max(r.end, end)
	r.lo, r.hi = min(r.lo, mb), max(r.hi, mb)
}

// flush draws the run, if any, and empties it.
func (tw *traceWriter) flush(r *foldRun, pid, tid int) {
	if r.n == 0 {
		return
	}
	tw.span(fmt.Sprintf("folded: %d operations of micro-batches %d–%d", r.n, r.lo, r.hi), "folded", pid, tid, r.start, r.end,
		map[string]any{"ops": r.n, "micro_first": r.lo, "micro_last": r.hi})
	*r = foldRun{}
}
