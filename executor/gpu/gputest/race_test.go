package gputest

import (
	"testing"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

// drainAll drains every stream, returning the first error.
func drainAll(t *testing.T, d *Device, ss []gpu.Stream) error {
	t.Helper()
	var errs []error
	for _, s := range ss {
		errs = append(errs, drain(t, d, s))
	}
	return first(errs...)
}

func TestRaceDetection(t *testing.T) {
	const n = 16 // fp32 elements: 64 bytes
	type env struct {
		d    *Device
		ss   []gpu.Stream
		es   []gpu.Event
		p, q gpu.Ptr // 128 bytes each
	}
	for _, c := range []struct {
		name  string
		run   func(t *testing.T, x env) error
		want  error // nil: no hazard
		words []string
	}{
		{"read after write, with a Wait", func(t *testing.T, x env) error {
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			ok(t, x.d.Record(x.es[0], x.ss[0]))
			ok(t, x.d.Wait(x.ss[1], x.es[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, nil, nil},
		{"read after write, no Wait", func(t *testing.T, x env) error {
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, ErrHazard, []string{"Copy on stream 2", "stream 2 reads bytes [0x1000000000, 0x1000000040) of device allocation 0x1000000000 (128 bytes), which stream 1 wrote",
			"no Record on stream 1 and Wait on stream 2"}},
		{"write after read, no Wait", func(t *testing.T, x env) error {
			ok(t, x.d.Copy(x.q, x.p+16, 16, x.ss[0]))
			ok(t, x.d.Memset(x.p, 0, 128, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, ErrHazard, []string{"stream 2 writes bytes [0x1000000010, 0x1000000020)", "which stream 1 read"}},
		{"write after write, no Wait", func(t *testing.T, x env) error {
			ok(t, x.d.Memset(x.q+100, 0, 8, x.ss[0]))
			ok(t, x.d.Memset(x.q+104, 1, 8, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, ErrHazard, []string{"stream 2 writes bytes [0x1000000468, 0x100000046c)", "which stream 1 wrote"}},
		{"Wait on a Record made before the write", func(t *testing.T, x env) error {
			ok(t, x.d.Record(x.es[0], x.ss[0]))
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			ok(t, x.d.Wait(x.ss[1], x.es[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, ErrHazard, []string{"stream 2 reads", "which stream 1 wrote"}},
		{"Wait on another stream's Record", func(t *testing.T, x env) error {
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			ok(t, x.d.Record(x.es[0], x.ss[2]))
			ok(t, x.d.Wait(x.ss[1], x.es[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, ErrHazard, []string{"stream 2 reads", "which stream 1 wrote"}},
		{"disjoint bytes of one allocation", func(t *testing.T, x env) error {
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			ok(t, x.d.Fill(x.p+4*n, ir.FP32, n, 2, x.ss[1]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[0]))
			ok(t, x.d.Copy(x.q+4*n, x.p+4*n, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, nil, nil},
		{"ordered through a third stream", func(t *testing.T, x env) error {
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			ok(t, x.d.Record(x.es[0], x.ss[0]))
			ok(t, x.d.Wait(x.ss[1], x.es[0]))
			ok(t, x.d.Record(x.es[1], x.ss[1]))
			ok(t, x.d.Wait(x.ss[2], x.es[1]))
			ok(t, x.d.Memset(x.p, 0, 4*n, x.ss[2]))
			return drainAll(t, x.d, x.ss)
		}, nil, nil},
		{"ordered through the host", func(t *testing.T, x env) error {
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			ok(t, x.d.Record(x.es[0], x.ss[0]))
			ok(t, x.d.SyncEvent(x.es[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, nil, nil},
		{"Download with no SyncEvent after the write", func(t *testing.T, x env) error {
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			ok(t, drain(t, x.d, x.ss[1])) // synchronises with stream 2 only
			return x.d.Download(make([]byte, 4), x.p+4)
		}, ErrHazard, []string{"Download(4 bytes, 0x1000000004)", "the host reads bytes [0x1000000004, 0x1000000008)", "which stream 1 wrote",
			"no SyncEvent orders the host after stream 1"}},
		{"Upload on another stream under a read", func(t *testing.T, x env) error {
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[0]))
			ok(t, x.d.Upload(x.p, make([]byte, 4), x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, ErrHazard, []string{"Upload on stream 2", "which stream 1 read"}},
		{"a kernel on another stream reads an Upload not ordered before it", func(t *testing.T, x env) error {
			ok(t, x.d.Upload(x.p, make([]byte, 4*n), x.ss[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, ErrHazard, []string{"Copy on stream 2", "which stream 1 wrote"}},
		{"Upload, an event, then a kernel on another stream", func(t *testing.T, x env) error {
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[0]))
			ok(t, x.d.Upload(x.p, make([]byte, 4*n), x.ss[0]))
			ok(t, x.d.Record(x.es[0], x.ss[0]))
			ok(t, x.d.Wait(x.ss[1], x.es[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, nil, nil},
		{"graph launch writes as its stream", func(t *testing.T, x env) error {
			ok(t, x.d.BeginCapture(x.ss[0]))
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			g := must(x.d.EndCapture(x.ss[0]))
			ok(t, x.d.LaunchGraph(g, x.ss[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, ErrHazard, []string{"stream 2 reads", "which stream 1 wrote"}},
		{"graph launch waited for", func(t *testing.T, x env) error {
			ok(t, x.d.BeginCapture(x.ss[0]))
			ok(t, x.d.Fill(x.p, ir.FP32, n, 1, x.ss[0]))
			g := must(x.d.EndCapture(x.ss[0]))
			ok(t, x.d.LaunchGraph(g, x.ss[0]))
			ok(t, x.d.Record(x.es[0], x.ss[0]))
			ok(t, x.d.Wait(x.ss[1], x.es[0]))
			ok(t, x.d.Copy(x.q, x.p, 4*n, x.ss[1]))
			return drainAll(t, x.d, x.ss)
		}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevice(t, WithRaceDetection())
			x := env{d: d, ss: newStreams(t, d, 3), es: newEvents(t, d, 2), p: must(d.Alloc(128))}
			must(d.Alloc(256))
			x.q = must(d.Alloc(128))
			err := c.run(t, x)
			if c.want == nil {
				ok(t, err)
				return
			}
			wantErr(t, err, c.want, c.words...)
		})
	}
}

func TestShadowSegments(t *testing.T) {
	sh := newShadow(100)
	v1 := vclock{0, 1}
	if hz := sh.access(10, 20, true, epoch{1, 1}, v1); hz != nil {
		t.Fatalf("first write conflicts: %+v", hz)
	}
	if hz := sh.access(15, 30, false, epoch{1, 1}, v1); hz != nil {
		t.Fatalf("own read conflicts: %+v", hz)
	}
	// Thread 2 has seen nothing of thread 1.
	v2 := vclock{0, 0, 1}
	if hz := sh.access(25, 40, true, epoch{2, 1}, v2); hz == nil || hz.other != (epoch{1, 1}) || hz.wrote || hz.lo != 25 || hz.hi != 30 {
		t.Errorf("write over thread 1's read: %+v", hz)
	}
	if hz := sh.access(0, 12, false, epoch{2, 1}, v2); hz == nil || !hz.wrote || hz.lo != 10 || hz.hi != 12 {
		t.Errorf("read of thread 1's write: %+v", hz)
	}
	// Having seen thread 1's first clock, thread 2 may overwrite it all.
	v2 = vclock{0, 1, 2}
	if hz := sh.access(0, 100, true, epoch{2, 2}, v2); hz != nil {
		t.Errorf("ordered write conflicts: %+v", hz)
	}
	if len(sh.segs) != 1 {
		t.Errorf("a write of everything leaves %d segments", len(sh.segs))
	}
}
