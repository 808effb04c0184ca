package gputest

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

// newDevice makes a device closed when the test ends.
func newDevice(t *testing.T, opts ...Option) *Device {
	t.Helper()
	d := New(opts...)
	t.Cleanup(func() { d.Close() })
	return d
}

// must returns v, panicking on an error: for set-up calls that cannot
// fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newStreams(t *testing.T, d *Device, n int) []gpu.Stream {
	t.Helper()
	var out []gpu.Stream
	for range n {
		out = append(out, must(d.NewStream(0)))
	}
	return out
}

func newEvents(t *testing.T, d *Device, n int) []gpu.Event {
	t.Helper()
	var out []gpu.Event
	for range n {
		out = append(out, must(d.NewEvent()))
	}
	return out
}

// drain blocks until s has run everything enqueued so far and returns the
// device's sticky error.
func drain(t *testing.T, d *Device, s gpu.Stream) error {
	t.Helper()
	e := must(d.NewEvent())
	ok(t, d.Record(e, s))
	return d.SyncEvent(e)
}

func download(t *testing.T, d *Device, p gpu.Ptr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	ok(t, d.Download(b, p))
	return b
}

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// wantErr checks that err wraps target and mentions every word.
func wantErr(t *testing.T, err, target error, words ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want one wrapping %v", err, target)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestCloseLeaksNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	d := New()
	ss := newStreams(t, d, 4)
	es := newEvents(t, d, 2)
	p := must(d.Alloc(1024))
	// Work that would run for an hour, streams blocked on it, and a host
	// goroutine blocked in SyncEvent: Close must stop all of them.
	ok(t, d.Spin(time.Hour, ss[0]))
	ok(t, d.Record(es[0], ss[0]))
	for _, s := range ss[1:] {
		ok(t, d.Wait(s, es[0]))
		ok(t, d.Fill(p, ir.FP32, 256, 1, s))
	}
	ok(t, d.Burn(1e30, ss[1]))
	ok(t, d.Record(es[1], ss[3]))
	synced := make(chan error)
	go func() { synced <- d.SyncEvent(es[1]) }()
	time.Sleep(10 * time.Millisecond)

	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantErr(t, <-synced, ErrClosed)
	// Close has joined the streams; give the SyncEvent goroutine, which
	// has sent its result, a moment to exit.
	for end := time.Now().Add(time.Second); runtime.NumGoroutine() > before && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err := d.NewStream(0)
	wantErr(t, err, ErrClosed)
	if st := d.Stats(); st.LiveBytes != 0 {
		t.Errorf("LiveBytes %d after Close", st.LiveBytes)
	}
}

func TestStickyError(t *testing.T) {
	d := newDevice(t)
	s := must(d.NewStream(0))
	p := must(d.Alloc(64))
	q := must(d.Alloc(64))
	ok(t, d.Memset(p+60, 1, 8, s)) // 4 bytes past the end
	ok(t, d.Memset(q, 1, 64, s))   // must not run: the context is broken
	err := drain(t, d, s)
	wantErr(t, err, ErrInvalidAddress, "Memset on stream 1", "4 bytes past the end", "0x1000000000")
	wantErr(t, d.Download(make([]byte, 64), q), ErrInvalidAddress)
	if got := d.Stats().Launches[KindMemset]; got != 0 {
		t.Errorf("%d Memsets ran after the error", got)
	}
	if errs := d.Errors(); len(errs) != 1 {
		t.Errorf("Errors() = %v, want the one", errs)
	}
	wantErr(t, d.Close(), ErrInvalidAddress)
}

func TestNameAndPriorities(t *testing.T) {
	d := newDevice(t, WithName("fake H100"), WithPriorityRange(0, -5))
	if d.Name() != "fake H100" {
		t.Errorf("Name() = %q", d.Name())
	}
	least, greatest := d.PriorityRange()
	if least != 0 || greatest != -5 {
		t.Errorf("PriorityRange() = %d, %d", least, greatest)
	}
	for _, c := range []struct{ ask, want int }{{0, 0}, {-3, -3}, {-9, -5}, {4, 0}} {
		s := must(d.NewStream(c.ask))
		if got := must(d.Priority(s)); got != c.want {
			t.Errorf("NewStream(%d) has priority %d, want %d", c.ask, got, c.want)
		}
	}
}
