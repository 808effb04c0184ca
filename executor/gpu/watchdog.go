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
// ProcessGroupNCCL watchdog: every collective is followed by an event on
// its stream, and a goroutine polls the events. A collective that has
// not finished within the run's timeout after it was enqueued, or an
// asynchronous error a communicator reports, fails the run naming the
// collective and aborts every communicator (ncclCommAbort), which ends
// the hung kernels, so that the streams drain, the CPU's waits return
// and the process exits instead of hanging. The timeout counts from the
// enqueue, as PyTorch's does, so it must exceed the longest stretch of
// compute a collective can queue behind.
//
// Virtual collectives need none of this: their members meet on the CPU
// first, with the same timeout (virtual.go).

// defaultTimeout is the watchdog's timeout when the run sets none.
const defaultTimeout = time.Minute

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
}

// watched is one collective in flight.
type watched struct {
	ev             Event
	rank, step, op int
	s              schedule.Stream
	comm           commKey
	enqueued       time.Time
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

// watch records an event after collective k on its stream.
func (w *watchdog) watch(r *rank, st Stream, s schedule.Stream, k *executor.Kernel, step int, key commKey) error {
	if w.quit == nil {
		return nil
	}
	w.mu.Lock()
	var ev Event
	if n := len(w.free); n > 0 {
		ev, w.free = w.free[n-1], w.free[:n-1]
	}
	w.mu.Unlock()
	if ev == 0 {
		var err error
		if ev, err = w.b.dev.NewEvent(); err != nil {
			return fmt.Errorf("watchdog event: %w", err)
		}
	}
	if err := w.b.dev.Record(ev, st); err != nil {
		return fmt.Errorf("watchdog event: %w", err)
	}
	w.mu.Lock()
	w.pending = append(w.pending, watched{ev: ev, rank: r.rank, step: step, op: k.Op, s: s, comm: key,
		enqueued: time.Now(), what: w.b.describe(k.Op)})
	w.mu.Unlock()
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
		done []bool
		err  error
		at   int
	}
	ch := make(chan answer, 1)
	go func() {
		a := answer{done: make([]bool, len(pending))}
		for i, p := range pending {
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
			w.fire(pending[0], time.Since(pending[0].enqueued), errors.New("the device did not answer the watchdog's query"))
			return true
		}
		return false
	case <-w.quit:
		return true
	}
	if a.err != nil {
		w.fire(pending[a.at], time.Since(pending[a.at].enqueued), a.err)
		return true
	}
	now := time.Now()
	var finished []Event
	for i, p := range pending {
		if a.done[i] {
			finished = append(finished, p.ev)
		} else if late := now.Sub(p.enqueued); late > w.timeout {
			w.fire(p, late, nil)
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
		if slices.Contains(finished, p.ev) {
			w.free = append(w.free, p.ev)
			return true
		}
		return false
	})
	w.mu.Unlock()
	return false
}

// fire fails the run naming the collective, then aborts every
// communicator.
func (w *watchdog) fire(p watched, late time.Duration, err error) {
	if w.fired.Swap(true) {
		return
	}
	what := fmt.Sprintf("watchdog: %s, over %s(%d), was enqueued %v ago and has not finished within the timeout of %v",
		p.what, p.comm.pg, p.comm.size, late.Round(time.Millisecond), w.timeout)
	if err != nil {
		what = fmt.Sprintf("watchdog: %s, over %s(%d): %v", p.what, p.comm.pg, p.comm.size, err)
	}
	w.b.Abort(executor.Failure{Kind: executor.Deadlock, Rank: p.rank, Stream: p.s, Step: p.step, Op: p.op,
		What: what + "; aborted the communicators"})
	w.abortAll()
}

func (w *watchdog) fireAsync(key commKey, err error) {
	if w.fired.Swap(true) {
		return
	}
	w.b.Abort(executor.Failure{Kind: executor.Internal, Rank: w.rank, Op: -1,
		What: fmt.Sprintf("watchdog: the communicator for %s(%d) reports %v; aborted the communicators", key.pg, key.size, err)})
	w.abortAll()
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
