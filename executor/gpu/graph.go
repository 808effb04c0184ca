package gpu

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fsdpc/fsdpc/schedule"
)

// --graph: one step is captured as a CUDA graph and every later step
// replays it. The steps are:
//
//	0 … CheckSteps−1   checked (eager)
//	CheckSteps          eager, measured: the launch-bound baseline
//	CheckSteps+1        captured: every local rank's streams fork from the
//	                    first rank's compute stream, so one capture holds
//	                    all of them, virtual collectives included
//	later steps         the driver's issue is skipped; at each step's
//	                    start the graph is launched (at the first, twice:
//	                    for the captured step, which has not run, and
//	                    for itself)
//
// Step boundaries are barriers of the local ranks' CPUs (the last to
// arrive begins or ends the capture, or launches the graph), which is
// safe because every rank issues the same program. A plan whose CPU
// waits for a stream (offload's host syncs) cannot be captured.

type graphRun struct {
	on      bool
	capture int // the captured step
	mu      sync.Mutex
	cond    *sync.Cond
	arrived map[int]int
	done    map[int]bool
	origin  Stream
	g       Graph
	have    bool
	// Per launch: events around it on the origin stream, and the CPU time
	// LaunchGraph took.
	starts, ends []Event
	issue        []time.Duration
}

func (b *Backend) openGraph(local []int) error {
	g := &b.graph
	g.on = true
	g.capture = b.opt.CheckSteps + 1
	if b.t.Steps < g.capture+1 {
		return fmt.Errorf("gpu backend: --graph needs at least %d steps (%d checked, one eager to compare with, one captured), not %d", g.capture+1, b.opt.CheckSteps, b.t.Steps)
	}
	if b.opt.Comm != nil {
		return fmt.Errorf("gpu backend: --graph captures the virtual ranks of a rehearsal; NCCL collectives are not captured yet")
	}
	for i := range b.plan.Ops {
		if o := &b.plan.Ops[i]; o.Stream == schedule.StreamHost || o.Kind == schedule.OpSync {
			return fmt.Errorf("gpu backend: --graph cannot capture a step whose CPU waits for the device (%s on the %s stream: offload's host work)", o.Kind, o.Stream)
		}
	}
	g.cond = sync.NewCond(&g.mu)
	g.arrived = map[int]int{}
	g.done = map[int]bool{}
	g.origin = b.ranks[local[0]].streams[schedule.StreamCompute]
	return nil
}

// enter is called before each device operation a rank's CPU issues for a
// step; it reports whether to issue it (false: a replayed step).
func (b *Backend) enter(r *rank, step int) bool {
	if step > r.step {
		r.step = step
		b.enterMu.Lock()
		if _, ok := b.enters[step]; !ok {
			b.enters[step] = time.Now()
		}
		b.enterMu.Unlock()
		b.meas.enterStep(r, step)
		if b.graph.on {
			b.boundary(step)
		}
	}
	return !b.graph.on || step <= b.graph.capture
}

// boundary is the barrier at the start of a step.
func (b *Backend) boundary(step int) {
	g := &b.graph
	if step < g.capture {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.arrived[step]++
	if g.arrived[step] < b.localCount() {
		for !g.done[step] && !b.Failed() {
			g.cond.Wait()
		}
		return
	}
	if err := b.stepAction(step); err != nil {
		b.Abort(failure(-1, err))
	}
	g.done[step] = true
	g.cond.Broadcast()
}

func (b *Backend) localCount() int {
	n := 0
	for _, r := range b.ranks {
		if r != nil {
			n++
		}
	}
	return n
}

// stepAction begins the capture, or ends it, or launches the graph.
func (b *Backend) stepAction(step int) error {
	g := &b.graph
	if step == g.capture {
		return b.beginCapture()
	}
	if step == g.capture+1 {
		// The captured step has not run: run it, then this one.
		if err := b.endCapture(); err != nil {
			return err
		}
		if err := b.launchGraph(); err != nil {
			return err
		}
	}
	return b.launchGraph()
}

func (b *Backend) streams() []Stream {
	var out []Stream
	for _, r := range b.ranks {
		if r != nil {
			out = append(out, r.streams[:]...)
		}
	}
	return out
}

func (b *Backend) beginCapture() error {
	g := &b.graph
	// Putting a stream into capture severs its dependency on the work
	// enqueued before, and a graph launch waits only for its own stream's
	// earlier work: so, before the capture begins, the origin waits for
	// the eager step's work on every other stream. Every replay is
	// launched on the origin, so the first is ordered after all of it.
	for _, s := range b.streams() {
		if s == g.origin {
			continue
		}
		e, err := b.dev.NewSyncEvent()
		if err != nil {
			return err
		}
		if err := b.dev.Record(e, s); err != nil {
			return err
		}
		if err := b.dev.Wait(g.origin, e); err != nil {
			return fmt.Errorf("ordering the capture after the eager step: %w", err)
		}
	}
	if err := b.dev.BeginCapture(g.origin); err != nil {
		return fmt.Errorf("beginning the capture: %w", err)
	}
	fork, err := b.dev.NewSyncEvent()
	if err != nil {
		return err
	}
	if err := b.dev.Record(fork, g.origin); err != nil {
		return err
	}
	for _, s := range b.streams() {
		if s != g.origin {
			if err := b.dev.Wait(s, fork); err != nil {
				return fmt.Errorf("joining a stream to the capture: %w", err)
			}
		}
	}
	return nil
}

func (b *Backend) endCapture() error {
	g := &b.graph
	for _, s := range b.streams() {
		if s == g.origin {
			continue
		}
		join, err := b.dev.NewSyncEvent()
		if err != nil {
			return err
		}
		if err := b.dev.Record(join, s); err != nil {
			return err
		}
		if err := b.dev.Wait(g.origin, join); err != nil {
			return err
		}
	}
	graph, err := b.dev.EndCapture(g.origin)
	if err != nil {
		return fmt.Errorf("ending the capture: %w", err)
	}
	g.g, g.have = graph, true
	return nil
}

func (b *Backend) launchGraph() error {
	g := &b.graph
	start, err := b.dev.NewEvent()
	if err != nil {
		return err
	}
	end, err := b.dev.NewEvent()
	if err != nil {
		return err
	}
	if err := b.dev.Record(start, g.origin); err != nil {
		return err
	}
	t := time.Now()
	if err := b.dev.LaunchGraph(g.g, g.origin); err != nil {
		return fmt.Errorf("launching the step's graph: %w", err)
	}
	g.issue = append(g.issue, time.Since(t))
	if err := b.dev.Record(end, g.origin); err != nil {
		return err
	}
	g.starts, g.ends = append(g.starts, start), append(g.ends, end)
	return nil
}

// finishGraph, at Drain: a capture still open ends and runs once.
func (b *Backend) finishGraph() error {
	g := &b.graph
	if !g.on || g.have || b.Failed() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.arrived[g.capture] == 0 {
		return nil
	}
	if err := b.endCapture(); err != nil {
		return err
	}
	return b.launchGraph()
}

// GraphFigures compares the replayed steps with the measured eager step.
type GraphFigures struct {
	Replays int
	// Device time of a replayed step and the CPU time of its launch
	// (medians), against the eager step's device time and the CPU time
	// its issue took.
	Replay, Launch time.Duration
	Eager, Issue   time.Duration
}

func (b *Backend) graphFigures(eager time.Duration) (*GraphFigures, error) {
	g := &b.graph
	if !g.on || len(g.starts) == 0 {
		return nil, nil
	}
	f := &GraphFigures{Replays: len(g.starts), Eager: eager}
	b.enterMu.Lock()
	e0, ok0 := b.enters[g.capture-1]
	e1, ok1 := b.enters[g.capture]
	b.enterMu.Unlock()
	if ok0 && ok1 {
		f.Issue = e1.Sub(e0)
	}
	var replay []time.Duration
	for i := range g.starts {
		d, err := b.dev.Elapsed(g.starts[i], g.ends[i])
		if err != nil {
			return nil, err
		}
		replay = append(replay, d)
	}
	slices.Sort(replay)
	issue := slices.Clone(g.issue)
	slices.Sort(issue)
	f.Replay, f.Launch = replay[len(replay)/2], issue[len(issue)/2]
	return f, nil
}
