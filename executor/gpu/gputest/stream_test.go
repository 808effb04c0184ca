package gputest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

// pattern is gpu.Pattern(seed, i) for i < n, times f.
func pattern(seed uint64, n int, f float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = gpu.Pattern(seed, int64(i)) * f
	}
	return v
}

func TestStreamOrder(t *testing.T) {
	const n = 64
	for _, c := range []struct {
		name string
		run  func(d *Device, s gpu.Stream, a, b gpu.Ptr) error
		want []float32 // b afterwards
	}{
		{"fill then copy", func(d *Device, s gpu.Stream, a, b gpu.Ptr) error {
			return first(d.Fill(a, ir.FP32, n, 7, s), d.Copy(b, a, 4*n, s))
		}, pattern(7, n, 1)},
		{"slow fill then copy", func(d *Device, s gpu.Stream, a, b gpu.Ptr) error {
			return first(d.Spin(20*time.Millisecond, s), d.Fill(a, ir.FP32, n, 7, s), d.Copy(b, a, 4*n, s))
		}, pattern(7, n, 1)},
		{"the last write wins", func(d *Device, s gpu.Stream, a, b gpu.Ptr) error {
			return first(d.Memset(a, 0, 4*n, s), d.Fill(a, ir.FP32, n, 3, s), d.Divide(a, ir.FP32, n, 2, s),
				d.Divide(a, ir.FP32, n, 2, s), d.Copy(b, a, 4*n, s))
		}, pattern(3, n, 0.25)},
		{"copy chain", func(d *Device, s gpu.Stream, a, b gpu.Ptr) error {
			return first(d.Fill(a, ir.FP32, n, 5, s), d.Copy(b, a, 4*n, s), d.Memset(a, 0, 4*n, s),
				d.PacedCopy(a, b, 4*n, 1e5, s), d.Add(a, ir.FP32, b, ir.FP32, n, s), d.Copy(b, a, 4*n, s))
		}, pattern(5, n, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevice(t)
			s := must(d.NewStream(0))
			a, b := must(d.Alloc(4*n)), must(d.Alloc(4*n))
			ok(t, c.run(d, s, a, b))
			ok(t, drain(t, d, s))
			if got := download(t, d, b, 4*n); !bytes.Equal(got, f32Bytes(c.want...)) {
				t.Errorf("got %v\nwant %v", f32s(got), c.want)
			}
		})
	}
}

// first is the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestWaitOnUnrecordedEventDoesNotBlock(t *testing.T) {
	d := newDevice(t)
	ss := newStreams(t, d, 2)
	es := newEvents(t, d, 2)
	ok(t, d.Wait(ss[1], es[0])) // never recorded yet: a no-op
	ok(t, d.Spin(time.Hour, ss[0]))
	ok(t, d.Record(es[0], ss[0])) // too late for the Wait
	ok(t, d.Record(es[1], ss[1]))
	ok(t, d.SyncEvent(es[1])) // would block for an hour if the Wait waited
}

func TestWaitUsesLatestRecordAtCallTime(t *testing.T) {
	d := newDevice(t)
	ss := newStreams(t, d, 2)
	es := newEvents(t, d, 2)
	ok(t, d.Record(es[0], ss[0]))
	ok(t, d.Wait(ss[1], es[0]))
	ok(t, d.Spin(time.Hour, ss[0]))
	ok(t, d.Record(es[0], ss[0])) // recorded again after the Wait
	ok(t, d.Record(es[1], ss[1]))
	ok(t, d.SyncEvent(es[1]))
}

func TestSyncEventOfNeverRecordedEvent(t *testing.T) {
	d := newDevice(t)
	e := must(d.NewEvent())
	ok(t, d.SyncEvent(e))
	wantErr(t, d.SyncEvent(e+1), ErrInvalidHandle)
}

func TestWaitOrdersStreams(t *testing.T) {
	const n = 256
	d := newDevice(t)
	ss := newStreams(t, d, 3)
	es := newEvents(t, d, 3)
	a, b := must(d.Alloc(4*n)), must(d.Alloc(4*n))
	// Stream 0 produces late; stream 1 transforms after it; stream 2 reads
	// after stream 1.
	ok(t, d.Spin(30*time.Millisecond, ss[0]))
	ok(t, d.Fill(a, ir.FP32, n, 11, ss[0]))
	ok(t, d.Record(es[0], ss[0]))
	ok(t, d.Wait(ss[1], es[0]))
	ok(t, d.Divide(a, ir.FP32, n, 4, ss[1]))
	ok(t, d.Record(es[1], ss[1]))
	ok(t, d.Wait(ss[2], es[1]))
	ok(t, d.Copy(b, a, 4*n, ss[2]))
	ok(t, d.Record(es[2], ss[2]))
	start := time.Now()
	ok(t, d.SyncEvent(es[2]))
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("SyncEvent returned after %v, before stream 0's 30 ms spin", waited)
	}
	if got := download(t, d, b, 4*n); !bytes.Equal(got, f32Bytes(pattern(11, n, 0.25)...)) {
		t.Errorf("got %v", f32s(got))
	}
}

func TestElapsed(t *testing.T) {
	d := newDevice(t)
	ss := newStreams(t, d, 2)
	es := newEvents(t, d, 4)
	ok(t, d.Record(es[0], ss[0]))
	ok(t, d.Spin(30*time.Millisecond, ss[0]))
	ok(t, d.Record(es[1], ss[0]))
	ok(t, d.SyncEvent(es[1]))
	if el := must(d.Elapsed(es[0], es[1])); el < 30*time.Millisecond || el > 10*time.Second {
		t.Errorf("Elapsed = %v around a 30 ms spin", el)
	}
	_, err := d.Elapsed(es[0], es[2])
	wantErr(t, err, ErrInvalidHandle, "never recorded")
	ok(t, d.Spin(time.Hour, ss[1]))
	ok(t, d.Record(es[3], ss[1]))
	_, err = d.Elapsed(es[0], es[3])
	wantErr(t, err, ErrNotReady)
}

func TestQuery(t *testing.T) {
	d := New()
	defer d.Close()
	s, _ := d.NewStream(0)
	never, _ := d.NewEvent()
	if done, err := d.Query(never); !done || err != nil {
		t.Errorf("an event never recorded: done %v, %v; want true, as cuEventQuery", done, err)
	}
	gate, _ := d.NewEvent()
	after, _ := d.NewEvent()
	other, _ := d.NewStream(0)
	// The stream waits on a record of gate that has not executed: other
	// is held behind a spin long enough to query in between.
	if err := first(d.Spin(time.Hour, other), d.Record(gate, other), d.Wait(s, gate), d.Record(after, s)); err != nil {
		t.Fatal(err)
	}
	if done, err := d.Query(after); done || err != nil {
		t.Errorf("a record behind an unfinished wait: done %v, %v; want false", done, err)
	}
	go d.Close() // ends the spin; a closed device answers with an error
	for {
		if _, err := d.Query(after); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSyncEventHasNoTiming: an event made without timing orders and
// completes like any other, and Elapsed on it fails, as on CUDA.
func TestSyncEventHasNoTiming(t *testing.T) {
	d := New()
	defer d.Close()
	s, _ := d.NewStream(0)
	timed, _ := d.NewEvent()
	sync, _ := d.NewSyncEvent()
	ok(t, d.Record(timed, s))
	ok(t, d.Record(sync, s))
	ok(t, d.SyncEvent(sync))
	if _, err := d.Elapsed(timed, sync); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("Elapsed to an event without timing: %v, want ErrInvalidHandle", err)
	}
	if st := d.Stats(); st.Events != 2 || st.TimingEvents != 1 {
		t.Errorf("%d events, %d with timing; want 2 and 1", st.Events, st.TimingEvents)
	}
}
