package gputest

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

// forkJoin enqueues work over three streams, forked from and joined back
// into ss[0]; out receives the result.
func forkJoin(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, buf []gpu.Ptr, out gpu.Ptr) {
	t.Helper()
	const n = 512
	a, b, c, dd, e := buf[0], buf[1], buf[2], buf[3], buf[4]
	ok(t, first(
		d.Fill(a, ir.FP32, n, 1, ss[0]),
		d.Record(es[0], ss[0]),
		// Branch 1: a to bf16, halved.
		d.Wait(ss[1], es[0]),
		d.Cast(b, ir.BF16, a, ir.FP32, n, ss[1]),
		d.Divide(b, ir.BF16, n, 2, ss[1]),
		d.Record(es[1], ss[1]),
		// Branch 2: a pattern plus a.
		d.Wait(ss[2], es[0]),
		d.Fill(c, ir.FP32, n, 2, ss[2]),
		d.Add(c, ir.FP32, a, ir.FP32, n, ss[2]),
		d.Record(es[2], ss[2]),
		// Join.
		d.Wait(ss[0], es[1]),
		d.Wait(ss[0], es[2]),
		d.Cast(dd, ir.FP32, b, ir.BF16, n, ss[0]),
		d.Reduce(e, []gpu.Ptr{dd, c}, n, ir.FP32, 0.5, ss[0]),
		d.Copy(out, e, 4*n, ss[0]),
	))
}

func TestCaptureReplayMatchesDirect(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithRaceDetection()}} {
		run := func(capture bool) ([]byte, Stats) {
			d := newDevice(t, opts...)
			ss := newStreams(t, d, 3)
			es := newEvents(t, d, 3)
			var buf []gpu.Ptr
			for range 5 {
				buf = append(buf, must(d.Alloc(4*512)))
			}
			out := must(d.AllocHost(4 * 512))
			if !capture {
				forkJoin(t, d, ss, es, buf, out)
				ok(t, drain(t, d, ss[0]))
				return download(t, d, out, 4*512), d.Stats()
			}
			ok(t, d.BeginCapture(ss[0]))
			forkJoin(t, d, ss, es, buf, out)
			g := must(d.EndCapture(ss[0]))
			ok(t, drain(t, d, ss[0]))
			if got := download(t, d, out, 16); !bytes.Equal(got, bytes.Repeat([]byte{0xff}, 16)) {
				t.Fatalf("captured work ran before the launch: % x", got)
			}
			ok(t, d.LaunchGraph(g, ss[0]))
			ok(t, drain(t, d, ss[0]))
			return download(t, d, out, 4*512), d.Stats()
		}
		want, direct := run(false)
		got, replayed := run(true)
		if !bytes.Equal(got, want) {
			t.Errorf("replay: %v…\ndirect: %v…", f32s(got)[:8], f32s(want)[:8])
		}
		if replayed.Launches != direct.Launches || replayed.GraphLaunches != 1 || direct.GraphLaunches != 0 {
			t.Errorf("replay counted %v and %d graph launches, direct %v", replayed.Launches, replayed.GraphLaunches, direct.Launches)
		}
	}
}

func TestGraphLaunchIsOrderedOnItsStream(t *testing.T) {
	d := newDevice(t, WithRaceDetection())
	s := must(d.NewStream(0))
	a, b := must(d.Alloc(256)), must(d.Alloc(256))
	ok(t, d.BeginCapture(s))
	ok(t, d.Copy(b, a, 256, s))
	g := must(d.EndCapture(s))
	for range 2 {
		ok(t, d.Spin(10*time.Millisecond, s))
		ok(t, d.Fill(a, ir.FP32, 64, 9, s)) // before the launch
		ok(t, d.LaunchGraph(g, s))
		ok(t, d.Memset(a, 0, 256, s)) // after it
	}
	ok(t, drain(t, d, s))
	if got := download(t, d, b, 256); !bytes.Equal(got, f32Bytes(pattern(9, 64, 1)...)) {
		t.Errorf("the graph copied %v…", f32s(got)[:4])
	}
	if n := d.Stats().GraphLaunches; n != 2 {
		t.Errorf("%d graph launches, want 2", n)
	}
}

func TestCaptureErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		race  bool
		run   func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error
		want  []error // nil: none
		words []string
	}{
		{"fork joined back", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), d.Wait(ss[1], es[0]), d.Fill(p, ir.FP32, 4, 1, ss[1]),
				d.Record(es[1], ss[1]), d.Wait(ss[0], es[1]), errOf(d.EndCapture(ss[0])))
		}, nil, nil},
		{"fork not joined back", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), d.Wait(ss[1], es[0]), d.Fill(p, ir.FP32, 4, 1, ss[1]),
				errOf(d.EndCapture(ss[0])))
		}, []error{ErrCapture}, []string{"stream 2's captured Fill (node 0) is not joined back into stream 1", "unjoined"}},
		{"work after the join", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), d.Wait(ss[1], es[0]), d.Fill(p, ir.FP32, 4, 1, ss[1]),
				d.Record(es[1], ss[1]), d.Wait(ss[0], es[1]), d.Memset(p, 0, 4, ss[1]), errOf(d.EndCapture(ss[0])))
		}, []error{ErrCapture}, []string{"stream 2's captured Memset (node 1)", "unjoined"}},
		{"a fork with no work", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), d.Wait(ss[1], es[0]), errOf(d.EndCapture(ss[0])))
		}, nil, nil},
		{"EndCapture on a joined stream", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), d.Wait(ss[1], es[0]), errOf(d.EndCapture(ss[1])))
		}, []error{ErrCapture}, []string{"joined the capture begun on stream 1, which must end it"}},
		{"Free during a capture", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			q := must(d.Alloc(8))
			ok(t, d.BeginCapture(ss[0]))
			ok(t, d.Fill(p, ir.FP32, 4, 1, ss[0]))
			wantErr(t, d.Free(q), ErrCapture, "Free(0x", "while stream 1 is capturing")
			return errOf(d.EndCapture(ss[0]))
		}, []error{ErrCapture}, []string{"the capture was invalidated", "cuMemFree synchronises the device"}},
		{"EndCapture without BeginCapture", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return errOf(d.EndCapture(ss[0]))
		}, []error{ErrCapture}, []string{"not capturing"}},
		{"BeginCapture twice", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.BeginCapture(ss[0]))
		}, []error{ErrCapture}, []string{"already capturing"}},
		{"a capturing stream waits on an outside event", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			ok(t, first(d.Record(es[0], ss[1]), d.BeginCapture(ss[0])))
			if err := d.Wait(ss[0], es[0]); !errors.Is(err, ErrCapture) {
				t.Errorf("Wait: %v", err)
			}
			return errOf(d.EndCapture(ss[0]))
		}, []error{ErrCapture}, []string{"invalidated", "recorded outside the capture"}},
		{"SyncEvent on a captured record", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), d.SyncEvent(es[0]))
		}, []error{ErrCapture}, nil},
		{"Wait on a record of an ended capture", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), errOf(d.EndCapture(ss[0])), d.Wait(ss[1], es[0]))
		}, []error{ErrCapture}, []string{"ended"}},
		{"LaunchGraph into a capturing stream", false, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			g, err := d.EndCapture(ss[0])
			if errors.Is(err, ErrCapture) { // not capturing yet: make an empty graph
				ok(t, d.BeginCapture(ss[1]))
				g = must(d.EndCapture(ss[1]))
			}
			return first(d.BeginCapture(ss[0]), d.LaunchGraph(g, ss[0]))
		}, []error{ErrCapture}, []string{"not supported"}},
		{"captured streams race", true, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), d.Wait(ss[1], es[0]),
				d.Fill(p, ir.FP32, 4, 1, ss[1]), d.Memset(p+8, 0, 4, ss[0]),
				d.Record(es[1], ss[1]), d.Wait(ss[0], es[1]), errOf(d.EndCapture(ss[0])))
		}, []error{ErrCapture, ErrHazard}, []string{"captured stream 1 writes bytes [0x1000000008, 0x100000000c)", "which captured stream 2 wrote"}},
		{"captured streams ordered", true, func(t *testing.T, d *Device, ss []gpu.Stream, es []gpu.Event, p gpu.Ptr) error {
			return first(d.BeginCapture(ss[0]), d.Record(es[0], ss[0]), d.Wait(ss[1], es[0]),
				d.Fill(p, ir.FP32, 4, 1, ss[1]), d.Record(es[1], ss[1]), d.Wait(ss[0], es[1]),
				d.Memset(p+8, 0, 4, ss[0]), errOf(d.EndCapture(ss[0])))
		}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opts []Option
			if c.race {
				opts = append(opts, WithRaceDetection())
			}
			d := newDevice(t, opts...)
			err := c.run(t, d, newStreams(t, d, 2), newEvents(t, d, 2), must(d.Alloc(64)))
			if c.want == nil {
				ok(t, err)
				return
			}
			for _, w := range c.want {
				wantErr(t, err, w, c.words...)
			}
		})
	}
}

func TestReplayOrder(t *testing.T) {
	nodes := []*node{{}, {deps: []int{0}}, {}, {deps: []int{1, 2}}, {}}
	if got, want := replayOrder(nodes), []int{4, 2, 0, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("replayOrder = %v, want %v", got, want)
	}
}
