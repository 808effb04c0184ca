//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"gorgonia.org/cu"
)

// Streams, events and graphs are 1-based indexes into the state's
// tables, as on gputest's fake device: the gpu types are plain integers,
// the tables let every handle be checked, and a zero value is never valid.

func (st *state) stream(s gpu.Stream) (cu.Stream, error) {
	if s < 1 || int(s) > len(st.streams) {
		return cu.Stream{}, fmt.Errorf("cuda: stream %d was not made by this device", s)
	}
	return st.streams[s-1], nil
}

func (st *state) event(e gpu.Event) (cu.Event, error) {
	if e < 1 || int(e) > len(st.events) {
		return cu.Event{}, fmt.Errorf("cuda: event %d was not made by this device", e)
	}
	return st.events[e-1], nil
}

// PriorityRange is CUDA's: least is the least urgent priority (the
// default, 0), greatest the most urgent (negative).
func (d *Device) PriorityRange() (least, greatest int) { return d.least, d.greatest }

// NewStream makes a non-blocking stream (it does not synchronise with the
// legacy default stream, which Upload and Download use), its priority
// clamped to PriorityRange.
func (d *Device) NewStream(priority int) (gpu.Stream, error) {
	var id gpu.Stream
	err := d.do(func(st *state) error {
		p := min(max(priority, st.greatest), st.least)
		s, err := cu.MakeStreamWithPriority(p, cu.NonBlocking)
		if err != nil {
			return fmt.Errorf("cuda: cuStreamCreateWithPriority %d: %w", p, err)
		}
		st.streams = append(st.streams, s)
		id = gpu.Stream(len(st.streams))
		return nil
	})
	return id, err
}

// NewEvent makes an event that records timing, for Elapsed.
func (d *Device) NewEvent() (gpu.Event, error) {
	var id gpu.Event
	err := d.do(func(st *state) error {
		e, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return fmt.Errorf("cuda: cuEventCreate: %w", err)
		}
		st.events = append(st.events, e)
		id = gpu.Event(len(st.events))
		return nil
	})
	return id, err
}

// NewSyncEvent makes an event without timing (CU_EVENT_DISABLE_TIMING):
// cheaper to record, for ordering and completion only.
func (d *Device) NewSyncEvent() (gpu.Event, error) {
	var id gpu.Event
	err := d.do(func(st *state) error {
		e, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			return fmt.Errorf("cuda: cuEventCreate (CU_EVENT_DISABLE_TIMING): %w", err)
		}
		st.events = append(st.events, e)
		id = gpu.Event(len(st.events))
		return nil
	})
	return id, err
}

// Record enqueues e on s.
func (d *Device) Record(e gpu.Event, s gpu.Stream) error {
	return d.do(func(st *state) error {
		ce, err := st.event(e)
		if err != nil {
			return err
		}
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		if err := ce.Record(cs); err != nil {
			return fmt.Errorf("cuda: cuEventRecord event %d on stream %d: %w", e, s, err)
		}
		return nil
	})
}

// Wait makes s's later work wait for e's latest record.
func (d *Device) Wait(s gpu.Stream, e gpu.Event) error {
	return d.do(func(st *state) error {
		ce, err := st.event(e)
		if err != nil {
			return err
		}
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		if err := cs.Wait(ce, 0); err != nil {
			return fmt.Errorf("cuda: cuStreamWaitEvent stream %d on event %d: %w", s, e, err)
		}
		return nil
	})
}

// SyncEvent blocks until e's latest record has executed. It looks e up
// under the device's mutex but waits outside it, with the device's
// context made current on the caller's thread: waiting under the mutex
// would stop every other goroutine from enqueuing work on the device
// meanwhile, serialising the host side of streams that should overlap.
// cuEventSynchronize is thread-safe; the event must not be destroyed
// (Close) while a SyncEvent waits on it.
func (d *Device) SyncEvent(e gpu.Event) error {
	var ce cu.Event
	if err := d.do(func(st *state) error {
		var err error
		ce, err = st.event(e)
		return err
	}); err != nil {
		return err
	}
	return onThread(func() error {
		if err := cu.SetCurrentContext(d.ctx); err != nil {
			return fmt.Errorf("cuda: cuCtxSetCurrent for cuEventSynchronize: %w", err)
		}
		if err := ce.Synchronize(); err != nil {
			return fmt.Errorf("cuda: cuEventSynchronize event %d: %w", e, err)
		}
		return nil
	})
}

// Query reports whether e's latest record has executed (cuEventQuery): it
// does not block on the device, so the watchdog's polls stay cheap.
func (d *Device) Query(e gpu.Event) (bool, error) {
	var done bool
	err := d.do(func(st *state) error {
		ce, err := st.event(e)
		if err != nil {
			return err
		}
		switch err := ce.Query(); {
		case err == nil:
			done = true
		case errors.Is(err, cu.NotReady):
		default:
			return fmt.Errorf("cuda: cuEventQuery event %d: %w", e, err)
		}
		return nil
	})
	return done, err
}

// Elapsed is the time between two executed records, at the driver's
// resolution (about half a microsecond).
func (d *Device) Elapsed(from, to gpu.Event) (time.Duration, error) {
	var ms float64
	err := d.do(func(st *state) error {
		a, err := st.event(from)
		if err != nil {
			return err
		}
		b, err := st.event(to)
		if err != nil {
			return err
		}
		if ms, err = a.Elapsed(b); err != nil {
			return fmt.Errorf("cuda: cuEventElapsedTime events %d -> %d: %w", from, to, err)
		}
		return nil
	})
	return time.Duration(math.Round(ms * 1e6)), err
}
