package gpu

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/schedule"
)

// The watchdog of collectives over communicators (NCCL), after PyTorch's
// ProcessGroupNCCL watchdog: every collective is bracketed by two events
// on its stream, and a goroutine polls them. A collective that has not
// finished within the run's timeout of when it could start, or an
// asynchronous error a communicator reports, fails the run naming the
// collective and aborts every communicator (ncclCommAbort), which ends
// the hung kernels, so that the streams drain, the CPU's waits return
// and the process exits instead of hanging.
//
// The clock of a collective starts when the call to enqueue it begins,
// so an enqueue that never returns (a peer that never connects) is timed
// too; once it has returned, the clock restarts when the event before
// the collective has executed, i.e. when the stream reaches it: the
// timeout need cover the collective, not the compute queued before it.
//
// Once the watchdog has fired, the process has Options.AbortDeadline to
// end the run on its own; then Options.Exit is called (the worker exits
// non-zero), whatever is still stuck, as PyTorch's async error handling
// ends a process whose abort did not free it.
//
// Virtual collectives need none of this: their members meet on the CPU
// first, with the same timeout (virtual.go).

// defaultTimeout is the watchdog's timeout when the run sets none.
const defaultTimeout = time.Minute

// DefaultAbortDeadline is Options.AbortDeadline when it is zero.
const DefaultAbortDeadline = 30 * time.Second

type watchdog struct {
	b       *Backend
	rank    int // the process's rank
	timeout time.Duration
	poll    time.Duration

	mu      sync.Mutex
	pending []watched
	free    []Event
	quit    chan struct{}
	done    chan struct{}
	halt    sync.Once
	fired   atomic.Bool
	nextID  uint64
	// exitTimer calls Options.Exit at the process deadline.
	exitTimer *time.Timer
}

// watched is one collective in flight: being enqueued while ev is 0,
// then enqueued between the records of start and ev.
type watched struct {
	id             uint64
	start, ev      Event
	rank, step, op int
	s              schedule.Stream
	comm           commKey
	since          time.Time // when the clock started
	started        bool      // start has executed: since is when it was seen to
	what           string
}

// start begins polling for the process's rank; a no-op without
// communicators.
func (w *watchdog) start(b *Backend, rank int) {
	if len(b.comms) == 0 {
		return
	}
	w.b, w.rank = b, rank
	w.timeout = b.t.Timeout
	if w.timeout <= 0 {
		w.timeout = defaultTimeout
	}
	w.poll = min(max(w.timeout/50, time.Millisecond), 100*time.Millisecond)
	w.quit, w.done = make(chan struct{}), make(chan struct{})
	go w.run()
}

// stop ends polling and waits for the goroutine.
func (w *watchdog) stop() {
	if w.quit == nil {
		return
	}
	w.halt.Do(func() { close(w.quit) })
	<-w.done
}

// final checks once more when the streams have drained: an asynchronous
// error reported after the last poll still fails the run.
func (w *watchdog) final() {
	if w.quit != nil {
		w.check()
	}
}

// event takes an event for a watched collective, a recycled one if it
// can.
func (w *watchdog) event() (Event, error) {
	w.mu.Lock()
	if n := len(w.free); n > 0 {
		ev := w.free[n-1]
		w.free = w.free[:n-1]
		w.mu.Unlock()
		return ev, nil
	}
	w.mu.Unlock()
	ev, err := w.b.dev.NewSyncEvent()
	if err != nil {
		return 0, fmt.Errorf("watchdog event: %w", err)
	}
	return ev, nil
}

// watch runs enqueue, the call that enqueues collective k on st, under
// the watchdog: timed from before the call, then from when st reaches
// the collective until it has finished.
func (w *watchdog) watch(r *rank, st Stream, s schedule.Stream, k *executor.Kernel, step int, key commKey, enqueue func() error) error {
	if w.quit == nil {
		return enqueue()
	}
	start, err := w.event()
	if err != nil {
		return err
	}
	if err := w.b.dev.Record(start, st); err != nil {
		return fmt.Errorf("watchdog event: %w", err)
	}
	w.mu.Lock()
	w.nextID++
	id := w.nextID
	w.pending = append(w.pending, watched{id: id, start: start, rank: r.rank, step: step, op: k.Op, s: s, comm: key,
		since: time.Now(), what: w.b.describe(k.Op)})
	w.mu.Unlock()
	err = enqueue()
	var ev Event
	if err == nil {
		ev, err = w.event()
	}
	if err == nil {
		if err = w.b.dev.Record(ev, st); err != nil {
			err = fmt.Errorf("watchdog event: %w", err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.IndexFunc(w.pending, func(p watched) bool { return p.id == id })
	if i < 0 { // a check that fired has it; it stays
		return err
	}
	if err != nil {
		w.pending = slices.Delete(w.pending, i, i+1)
		if ev != 0 {
			w.free = append(w.free, ev)
		}
		return err
	}
	w.pending[i].ev = ev
	return nil
}

func (w *watchdog) run() {
	defer close(w.done)
	tick := time.NewTicker(w.poll)
	defer tick.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-tick.C:
		}
		if w.check() {
			return
		}
	}
}

// check polls every collective in flight and every communicator's
// asynchronous error; it reports whether it fired.
func (w *watchdog) check() bool {
	w.mu.Lock()
	pending := append([]watched(nil), w.pending...)
	w.mu.Unlock()

	// The device answers queries under its mutex, which a hung call
	// could hold: a query that does not come back in time counts as a
	// collective that has not finished.
	type answer struct {
		started, done []bool
		err           error
		at            int
	}
	ch := make(chan answer, 1)
	go func() {
		a := answer{started: make([]bool, len(pending)), done: make([]bool, len(pending))}
		for i, p := range pending {
			if p.ev == 0 { // still being enqueued
				continue
			}
			if !p.started {
				if a.started[i], a.err = w.b.dev.Query(p.start); a.err != nil || !a.started[i] {
					a.at = i
					if a.err != nil {
						break
					}
					continue
				}
			}
			if a.done[i], a.err = w.b.dev.Query(p.ev); a.err != nil {
				a.at = i
				break
			}
		}
		ch <- a
	}()
	var a answer
	select {
	case a = <-ch:
	case <-time.After(w.timeout):
		if len(pending) > 0 {
			w.fire(pending[0], time.Since(pending[0].since), errors.New("the device did not answer the watchdog's query"))
			return true
		}
		return false
	case <-w.quit:
		return true
	}
	if a.err != nil {
		w.fire(pending[a.at], time.Since(pending[a.at].since), a.err)
		return true
	}
	now := time.Now()
	var finished, started []uint64
	for i, p := range pending {
		switch {
		case a.done[i]:
			finished = append(finished, p.id)
		case a.started[i]:
			started = append(started, p.id) // its clock starts now
		case (p.ev == 0 || p.started) && now.Sub(p.since) > w.timeout:
			w.fire(p, now.Sub(p.since), nil)
			return true
		}
	}
	for _, key := range w.b.commOrder {
		if ae, ok := w.b.comms[key].(AsyncErrorer); ok {
			if err := ae.AsyncError(); err != nil {
				w.fireAsync(key, err)
				return true
			}
		}
	}
	// Recycle only what this check removes: final() may run beside the
	// goroutine's check, and an event must not be handed out twice.
	w.mu.Lock()
	w.pending = slices.DeleteFunc(w.pending, func(p watched) bool {
		if slices.Contains(finished, p.id) {
			w.free = append(w.free, p.start, p.ev)
			return true
		}
		return false
	})
	for i := range w.pending {
		if p := &w.pending[i]; slices.Contains(started, p.id) {
			p.started, p.since = true, now
		}
	}
	w.mu.Unlock()
	return false
}

// fire fails the run naming the collective, then aborts every
// communicator.
func (w *watchdog) fire(p watched, late time.Duration, err error) {
	if w.fired.Swap(true) {
		return
	}
	how := "could start"
	if p.ev == 0 {
		how = "began to be enqueued, and the enqueue has not returned,"
	}
	what := fmt.Sprintf("watchdog: %s, over %s(%d), %s %v ago and has not finished within the timeout of %v",
		p.what, p.comm.pg, p.comm.size, how, late.Round(time.Millisecond), w.timeout)
	if err != nil {
		what = fmt.Sprintf("watchdog: %s, over %s(%d): %v", p.what, p.comm.pg, p.comm.size, err)
	}
	w.b.Abort(executor.Failure{Kind: executor.Deadlock, Rank: p.rank, Stream: p.s, Step: p.step, Op: p.op,
		What: what + "; aborted the communicators"})
	w.deadline()
	w.abortAll()
}

func (w *watchdog) fireAsync(key commKey, err error) {
	if w.fired.Swap(true) {
		return
	}
	w.b.Abort(executor.Failure{Kind: executor.Internal, Rank: w.rank, Op: -1,
		What: fmt.Sprintf("watchdog: the communicator for %s(%d) reports %v; aborted the communicators", key.pg, key.size, err)})
	w.deadline()
	w.abortAll()
}

// deadline arms the process deadline (Options.AbortDeadline, Exit): a
// call stuck where no abort reaches (an enqueue blocked inside a library,
// an abort that does not return) cannot keep the process alive.
func (w *watchdog) deadline() {
	exit := w.b.opt.Exit
	if exit == nil {
		return
	}
	d := w.b.opt.AbortDeadline
	if d <= 0 {
		d = DefaultAbortDeadline
	}
	t := time.AfterFunc(d, exit)
	w.mu.Lock()
	w.exitTimer = t
	w.mu.Unlock()
}

// disarm stops the process deadline: the run has ended on its own.
func (w *watchdog) disarm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exitTimer != nil {
		w.exitTimer.Stop()
	}
}

// abortAll aborts every communicator at once: ncclCommAbort synchronises
// the device while it frees, so it can block while another
// communicator's kernel hangs, and aborting them one after another would
// wait on the very hang the next abort is to end.
func (w *watchdog) abortAll() {
	var wg sync.WaitGroup
	for _, key := range w.b.commOrder {
		c := w.b.comms[key]
		wg.Go(func() { c.Abort() })
	}
	wg.Wait()
}
