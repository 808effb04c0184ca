package gputest

import (
	"fmt"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
)

// stream is a stream: a goroutine (run) executing queue in order.
type stream struct {
	id       gpu.Stream
	priority int
	queue    []*item
	vc       vclock // its clock at the last work enqueued (race detection)

	// In a capture: the capture, the stream's thread in it, the nodes the
	// stream's next captured work depends on, and its clock in the capture.
	cap     *capture
	capIdx  int
	capTail []int
	capVC   vclock
}

type event struct {
	latest   *record // nil: never recorded
	noTiming bool    // NewSyncEvent's: Elapsed fails on it
}

// record is one Record of an event.
type record struct {
	done bool      // executed
	at   time.Time // when it executed
	vc   vclock    // the stream's clock when recorded (race detection)

	// Recorded in a capture: it never executes; a Wait on it makes the
	// waiting stream depend on tail, the recording stream's captured work.
	cap   *capture
	tail  []int
	capVC vclock
}

// item is one entry of a stream's queue: a kernel, a graph launch, a
// record or a wait.
type item struct {
	k    *kernel
	bufs [][]byte // the bytes of k's accesses, nil for empty ones
	err  error    // a bad address found when enqueued, reported when run

	graph    *graph
	nodeBufs [][][]byte
	nodeErrs []error

	rec  *record // execute: mark it done
	wait *record // block until it is done

	pins []pinned // released when the item has run
}

type pinned struct {
	a *alloc
	p *pin
}

// NewStream makes a stream running on its own goroutine.
func (d *Device) NewStream(priority int) (gpu.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open("NewStream"); err != nil {
		return 0, err
	}
	priority = min(max(priority, d.cfg.greatest), d.cfg.least)
	s := &stream{id: gpu.Stream(len(d.streams) + 1), priority: priority}
	d.streams = append(d.streams, s)
	d.wg.Add(1)
	go d.run(s)
	return s.id, nil
}

// PriorityRange is the configured range (WithPriorityRange).
func (d *Device) PriorityRange() (least, greatest int) { return d.cfg.least, d.cfg.greatest }

// Priority is the priority a stream was made with, after clamping.
func (d *Device) Priority(s gpu.Stream) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := d.stream("Priority", s)
	if err != nil {
		return 0, err
	}
	return st.priority, nil
}

// NewEvent makes an event that records timing.
func (d *Device) NewEvent() (gpu.Event, error) { return d.newEvent("NewEvent", false) }

// NewSyncEvent makes an event without timing, as
// CU_EVENT_DISABLE_TIMING: Elapsed on it fails.
func (d *Device) NewSyncEvent() (gpu.Event, error) { return d.newEvent("NewSyncEvent", true) }

func (d *Device) newEvent(call string, noTiming bool) (gpu.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(call); err != nil {
		return 0, err
	}
	d.events = append(d.events, &event{noTiming: noTiming})
	d.stats.Events++
	if !noTiming {
		d.stats.TimingEvents++
	}
	return gpu.Event(len(d.events)), nil
}

// stream looks a stream up. d.mu is held.
func (d *Device) stream(call string, s gpu.Stream) (*stream, error) {
	if err := d.open(call); err != nil {
		return nil, err
	}
	if s < 1 || int(s) > len(d.streams) {
		return nil, fmt.Errorf("gputest: %s: stream %d: %w", call, s, ErrInvalidHandle)
	}
	return d.streams[s-1], nil
}

// event looks an event up. d.mu is held.
func (d *Device) event(call string, e gpu.Event) (*event, error) {
	if err := d.open(call); err != nil {
		return nil, err
	}
	if e < 1 || int(e) > len(d.events) {
		return nil, fmt.Errorf("gputest: %s: event %d: %w", call, e, ErrInvalidHandle)
	}
	return d.events[e-1], nil
}

// Record enqueues a record of e on s; in a capture, it records where the
// capture is instead.
func (d *Device) Record(e gpu.Event, s gpu.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	call := fmt.Sprintf("Record(event %d, stream %d)", e, s)
	ev, err := d.event(call, e)
	if err != nil {
		return err
	}
	st, err := d.stream(call, s)
	if err != nil {
		return err
	}
	if st.cap != nil {
		ev.latest = &record{cap: st.cap, tail: st.capTail, capVC: st.capVC}
		return nil
	}
	r := &record{vc: st.vc}
	ev.latest = r
	d.push(st, &item{rec: r})
	return nil
}

// Wait makes s's later work wait for e's latest record; a no-op if e was
// never recorded. Waiting on a record made in a capture joins s to it.
func (d *Device) Wait(s gpu.Stream, e gpu.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	call := fmt.Sprintf("Wait(stream %d, event %d)", s, e)
	ev, err := d.event(call, e)
	if err != nil {
		return err
	}
	st, err := d.stream(call, s)
	if err != nil {
		return err
	}
	r := ev.latest
	switch {
	case r == nil:
		return nil
	case r.cap != nil && r.cap.ended:
		return fmt.Errorf("gputest: %s: the event's latest record was made in a capture that has ended: %w", call, ErrCapture)
	case r.cap != nil:
		return d.joinCapture(call, st, r)
	case st.cap != nil:
		err := fmt.Errorf("gputest: %s: stream %d is capturing and the event was recorded outside the capture: %w", call, s, ErrCapture)
		st.cap.invalidate(err)
		return err
	}
	if d.cfg.race {
		st.vc = st.vc.join(r.vc)
	}
	d.push(st, &item{wait: r})
	return nil
}

// SyncEvent blocks until e's latest record at the time of the call has
// executed, and returns the sticky error if there is one.
func (d *Device) SyncEvent(e gpu.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	call := fmt.Sprintf("SyncEvent(event %d)", e)
	ev, err := d.event(call, e)
	if err != nil {
		return err
	}
	r := ev.latest
	if r == nil {
		return d.sticky(call)
	}
	if r.cap != nil {
		return fmt.Errorf("gputest: %s: the event's latest record was made in a capture: %w", call, ErrCapture)
	}
	for !r.done && !d.closed {
		d.cond.Wait()
	}
	if err := d.open(call); err != nil {
		return err
	}
	if d.cfg.race {
		d.host = d.host.join(r.vc)
	}
	return d.sticky(call)
}

// Query reports whether e's latest record has executed, and the sticky
// error if there is one. It orders nothing for race detection: the
// backend's watchdog polls it and touches no memory.
func (d *Device) Query(e gpu.Event) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	call := fmt.Sprintf("Query(event %d)", e)
	ev, err := d.event(call, e)
	if err != nil {
		return false, err
	}
	r := ev.latest
	if r != nil && r.cap != nil {
		return false, fmt.Errorf("gputest: %s: the event's latest record was made in a capture: %w", call, ErrCapture)
	}
	return r == nil || r.done, d.sticky(call)
}

// Elapsed is the time from from's latest record to to's, both executed.
func (d *Device) Elapsed(from, to gpu.Event) (time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	call := fmt.Sprintf("Elapsed(event %d, event %d)", from, to)
	var at [2]time.Time
	for i, e := range []gpu.Event{from, to} {
		ev, err := d.event(call, e)
		if err != nil {
			return 0, err
		}
		switch r := ev.latest; {
		case ev.noTiming:
			return 0, fmt.Errorf("gputest: %s: event %d was made without timing (NewSyncEvent): %w", call, e, ErrInvalidHandle)
		case r == nil:
			return 0, fmt.Errorf("gputest: %s: event %d was never recorded: %w", call, e, ErrInvalidHandle)
		case r.cap != nil:
			return 0, fmt.Errorf("gputest: %s: event %d was recorded in a capture: %w", call, e, ErrCapture)
		case !r.done:
			return 0, fmt.Errorf("gputest: %s: event %d: %w", call, e, ErrNotReady)
		default:
			at[i] = r.at
		}
	}
	return at[1].Sub(at[0]), nil
}

// push appends to a stream's queue. d.mu is held.
func (d *Device) push(st *stream, it *item) {
	st.queue = append(st.queue, it)
	d.cond.Broadcast()
}

// launch enqueues a kernel on s, or captures it. It binds the kernel's
// accesses to their allocations and pins them; with race detection it
// checks them.
func (d *Device) launch(s gpu.Stream, k *kernel) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := d.stream(k.kind.String(), s)
	if err != nil {
		return err
	}
	if st.cap != nil {
		d.captureKernel(st, k)
		return nil
	}
	label := fmt.Sprintf("%s on stream %d", k.kind, s)
	it := &item{k: k}
	it.bufs, it.err = d.bind(label, st, it, k)
	if d.cfg.race {
		st.vc = st.vc.join(d.host).tick(int(st.id))
		if it.err == nil {
			d.checkKernel(label, st, k)
		}
	}
	d.push(st, it)
	return nil
}

// bind resolves k's accesses for it to their bytes, pinning them; label
// names k in errors. d.mu is held.
func (d *Device) bind(label string, st *stream, it *item, k *kernel) ([][]byte, error) {
	bufs := make([][]byte, len(k.acc))
	for i, x := range k.acc {
		if x.n == 0 {
			continue
		}
		a, off, err := d.resolve(x.p, x.n)
		if err != nil {
			return nil, fmt.Errorf("gputest: %s: %w", label, err)
		}
		q := &pin{stream: st.id, lo: off, hi: off + x.n}
		a.pins[q] = struct{}{}
		it.pins = append(it.pins, pinned{a, q})
		bufs[i] = a.mem[off : off+x.n : off+x.n]
	}
	return bufs, nil
}

// checkKernel runs the race check of k's accesses, reads first, as
// stream st at its current clock, recording a hazard as an asynchronous
// error. d.mu is held.
func (d *Device) checkKernel(label string, st *stream, k *kernel) {
	for _, write := range []bool{false, true} {
		for _, x := range k.acc {
			if x.write != write || x.n == 0 {
				continue
			}
			a, off, err := d.resolve(x.p, x.n)
			if err != nil {
				continue
			}
			if err := hazard(a, a.sh, off, x.n, write, int(st.id), st.vc, liveName); err != nil {
				d.fail(fmt.Errorf("gputest: %s: %w", label, err))
				return
			}
		}
	}
}

// run is a stream's goroutine.
func (d *Device) run(st *stream) {
	defer d.wg.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for len(st.queue) == 0 && !d.closed {
			d.cond.Wait()
		}
		if d.closed {
			return
		}
		it := st.queue[0]
		st.queue[0] = nil
		st.queue = st.queue[1:]
		switch {
		case it.wait != nil:
			for !it.wait.done && !d.closed {
				d.cond.Wait()
			}
		case it.rec != nil:
			it.rec.done, it.rec.at = true, time.Now()
		case d.err == nil:
			d.mu.Unlock()
			d.execute(st, it)
			d.mu.Lock()
		}
		for _, p := range it.pins {
			delete(p.a.pins, p.p)
		}
		d.cond.Broadcast()
	}
}

// execute runs a kernel or a graph launch. d.mu is not held.
func (d *Device) execute(st *stream, it *item) {
	if it.err != nil {
		d.mu.Lock()
		d.fail(it.err)
		d.mu.Unlock()
		return
	}
	if it.graph != nil {
		d.replay(st, it)
		return
	}
	d.runKernel(it.k, it.bufs)
}
