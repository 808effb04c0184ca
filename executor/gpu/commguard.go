package gpu

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Guard makes a communicator safe to Abort from another goroutine (the
// watchdog) while its owner is inside a call on it. ncclCommAbort frees
// the communicator, so aborting under a call that is still inside NCCL
// (a first collective connecting to its peers, a Split waiting for
// them) would be a use after free. A guarded communicator counts the
// calls under way; Abort refuses new calls at once, and aborts the
// communicator when the last call has left: at once if none is inside,
// else after waiting up to grace for them, and otherwise when the last
// one returns (Abort then reports that the abort is deferred, so that
// the watchdog is not held by a call that may never return).
//
// On a non-blocking communicator (Poller) that deferral never happens: a
// call that returns ErrInProgress is polled to completion, and the guard
// lets go of the communicator between polls, so Abort finds no call
// inside for longer than one poll, aborts, and the polling call returns
// an error. That is how a peer that never arrives (at a first
// collective's connection, or at a Split) ends: the watchdog's Abort
// frees the waiting caller.
func Guard(c Comm, grace time.Duration) Comm {
	return &guarded{c: c, grace: grace, cond: make(chan struct{})}
}

// ErrAbortDeferred: Abort could not free the communicator yet because a
// call was still inside it; the last call to leave aborts it.
var ErrAbortDeferred = errors.New("a call is still inside the communicator; it is aborted when that call returns")

var errGuardAborted = errors.New("the communicator was aborted")

type guarded struct {
	c     Comm
	grace time.Duration

	mu       sync.Mutex
	calls    int
	aborting bool          // no new call enters
	aborted  bool          // c.Abort has been called
	result   error         // what c.Abort returned
	cond     chan struct{} // closed and replaced when calls drops to 0
}

// enter admits a call, or refuses it once Abort has begun.
func (g *guarded) enter(call string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aborting {
		return fmt.Errorf("%s: %w", call, errGuardAborted)
	}
	g.calls++
	return nil
}

// exit lets a call out; the last one out after an Abort aborts.
func (g *guarded) exit() {
	g.mu.Lock()
	g.calls--
	last := g.calls == 0
	if last {
		close(g.cond)
		g.cond = make(chan struct{})
	}
	abort := last && g.aborting && !g.aborted
	if abort {
		g.aborted = true
	}
	g.mu.Unlock()
	if abort {
		err := g.c.Abort()
		g.mu.Lock()
		g.result = err
		g.mu.Unlock()
	}
}

func (g *guarded) Size() int { return g.c.Size() }
func (g *guarded) Rank() int { return g.c.Rank() }

// call makes one call on the communicator and, where it returns
// ErrInProgress, polls p until it has finished.
func (g *guarded) call(name string, p Poller, f func() error) error {
	if err := g.enter(name); err != nil {
		return err
	}
	err := f()
	g.exit()
	if !errors.Is(err, ErrInProgress) {
		return err
	}
	return g.poll(name, p)
}

// maxPollGap bounds the sleep between two polls of a call in progress.
const maxPollGap = time.Millisecond

// poll asks p until its call has finished, holding the communicator only
// during each ask, so that an Abort waits for one at most; once Abort has
// begun, enter refuses and the call ends with its error.
func (g *guarded) poll(name string, p Poller) error {
	if p == nil {
		return fmt.Errorf("%s: %w, but the communicator cannot be polled", name, ErrInProgress)
	}
	for gap := time.Microsecond; ; gap = min(2*gap, maxPollGap) {
		time.Sleep(gap)
		if err := g.enter(name); err != nil {
			return err
		}
		err := p.Poll()
		g.exit()
		if !errors.Is(err, ErrInProgress) {
			return err
		}
	}
}

// poller is c's Poller, nil if it has none.
func poller(c Comm) Poller {
	p, _ := c.(Poller)
	return p
}

func (g *guarded) AllGather(send, recv Ptr, bytes int64, s Stream) error {
	return g.call("all-gather", poller(g.c), func() error { return g.c.AllGather(send, recv, bytes, s) })
}

func (g *guarded) ReduceScatter(send, recv Ptr, n int64, dt ir.DType, op schedule.ReduceOp, factor float64, s Stream) error {
	return g.call("reduce-scatter", poller(g.c), func() error { return g.c.ReduceScatter(send, recv, n, dt, op, factor, s) })
}

func (g *guarded) AllReduce(buf Ptr, n int64, dt ir.DType, op schedule.ReduceOp, factor float64, s Stream) error {
	return g.call("all-reduce", poller(g.c), func() error { return g.c.AllReduce(buf, n, dt, op, factor, s) })
}

// Split: a non-blocking Split returns the new communicator in progress,
// which is polled; if the parent is aborted meanwhile, the new one is
// aborted too, since no one else holds it.
func (g *guarded) Split(color, key int) (Comm, error) {
	if err := g.enter("split"); err != nil {
		return nil, err
	}
	sub, err := g.c.Split(color, key)
	g.exit()
	if errors.Is(err, ErrInProgress) && sub != nil {
		if err = g.poll("split", poller(sub)); err != nil {
			err = errors.Join(err, sub.Abort())
		}
	}
	if err != nil {
		return nil, err
	}
	return Guard(sub, g.grace), nil
}

// AsyncError asks the communicator while no Abort can free it.
func (g *guarded) AsyncError() error {
	ae, ok := g.c.(AsyncErrorer)
	if !ok || g.enter("async error") != nil {
		return nil
	}
	defer g.exit()
	return ae.AsyncError()
}

// Abort: see Guard. A second Abort returns the first's outcome.
func (g *guarded) Abort() error {
	g.mu.Lock()
	if g.aborting {
		defer g.mu.Unlock()
		if !g.aborted {
			return ErrAbortDeferred
		}
		return g.result
	}
	g.aborting = true
	deadline := time.After(g.grace)
	for g.calls > 0 {
		wait := g.cond
		g.mu.Unlock()
		select {
		case <-wait:
		case <-deadline:
			g.mu.Lock()
			if g.calls > 0 {
				g.mu.Unlock()
				return ErrAbortDeferred // exit aborts
			}
			continue // still under the lock: the loop ends
		}
		g.mu.Lock()
	}
	g.aborted = true
	g.mu.Unlock()
	err := g.c.Abort()
	g.mu.Lock()
	g.result = err
	g.mu.Unlock()
	return err
}

// Close waits for no call, as the owner makes none during it; after an
// Abort the communicator is only released.
func (g *guarded) Close() error { return g.c.Close() }
