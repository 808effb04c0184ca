package gputest

import (
	"bytes"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

func TestAllocLayout(t *testing.T) {
	d := newDevice(t)
	a := must(d.Alloc(100))
	b := must(d.Alloc(1))
	h := must(d.AllocHost(10))
	c := must(d.Alloc(1000))
	if a != deviceBase || h != hostBase {
		t.Errorf("first allocations at %#x and %#x, want %#x and %#x", a, h, deviceBase, hostBase)
	}
	for _, p := range []gpu.Ptr{a, b, c, h} {
		if p%alignment != 0 {
			t.Errorf("%#x is not %d-byte aligned", p, alignment)
		}
	}
	if b < a+100+guard || c < b+1+guard {
		t.Errorf("allocations %#x, %#x, %#x leave no guard gap", a, b, c)
	}
	if got := download(t, d, c, 1000); !bytes.Equal(got, bytes.Repeat([]byte{0xff}, 1000)) {
		t.Errorf("fresh memory is not poisoned: % x…", got[:16])
	}
	if free, total := must2(d.MemInfo()); free != 16<<30-1101 || total != 16<<30 {
		t.Errorf("MemInfo() = %d, %d", free, total)
	}
}

func must2[T, U any](a T, b U, err error) (T, U) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func TestNoAddressReuse(t *testing.T) {
	d := newDevice(t)
	last := gpu.Ptr(0)
	for range 10 {
		p := must(d.Alloc(512))
		if p <= last {
			t.Fatalf("Alloc after Free returned %#x, not above %#x", p, last)
		}
		ok(t, d.Free(p))
		last = p
	}
}

func TestInvalidAccesses(t *testing.T) {
	for _, c := range []struct {
		name string
		// run returns the error to check: a synchronous one, or the next
		// SyncEvent's.
		run   func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error
		want  error // nil: no error
		words []string
	}{
		{"use after free", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			ok(t, d.Free(p))
			ok(t, d.Fill(p+8, ir.FP32, 4, 1, s))
			return drain(t, d, s)
		}, ErrInvalidAddress, []string{"Fill on stream 1", "[0x1000000008, +16)", "allocation 0x1000000000 (64 bytes), which was freed"}},
		{"offsets inside an allocation", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			ok(t, d.Fill(p+32, ir.FP32, 8, 1, s))
			ok(t, d.Copy(q+63, p+63, 1, s))
			return drain(t, d, s)
		}, nil, nil},
		{"kernel past the end", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			ok(t, d.Copy(q, p+32, 64, s))
			return drain(t, d, s)
		}, ErrInvalidAddress, []string{"Copy on stream 1", "run 32 bytes past the end of device allocation 0x1000000000"}},
		{"into the guard gap", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			ok(t, d.Memset(p+74, 0, 4, s))
			return drain(t, d, s)
		}, ErrInvalidAddress, []string{"0x100000004a is 10 bytes past the end of device allocation 0x1000000000"}},
		{"no allocation at all", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			ok(t, d.Memset(0x1234, 0, 4, s))
			return drain(t, d, s)
		}, ErrInvalidAddress, []string{"0x1234 is in no allocation"}},
		{"Download past the end fails at once", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			return d.Download(make([]byte, 65), p)
		}, ErrInvalidAddress, []string{"Download(65 bytes, 0x1000000000)", "1 bytes past the end"}},
		{"Upload after free", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			ok(t, d.Free(q))
			ok(t, d.Upload(q, []byte{1}, s))
			return drain(t, d, s)
		}, ErrInvalidAddress, []string{"which was freed"}},
		{"Free of an inner address", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			return d.Free(p + 8)
		}, ErrInvalidAddress, []string{"not the start of an allocation"}},
		{"double Free", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			ok(t, d.Free(p))
			return d.Free(p)
		}, ErrInvalidAddress, []string{"already freed"}},
		{"graph replayed after a free", func(t *testing.T, d *Device, s gpu.Stream, p, q gpu.Ptr) error {
			ok(t, d.BeginCapture(s))
			ok(t, d.Copy(q, p, 64, s))
			g := must(d.EndCapture(s))
			ok(t, d.Free(q))
			ok(t, d.LaunchGraph(g, s))
			return drain(t, d, s)
		}, ErrInvalidAddress, []string{"Copy (node 0 of graph 1, launched on stream 1)", "which was freed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevice(t)
			s := must(d.NewStream(0))
			p, q := must(d.Alloc(64)), must(d.Alloc(64))
			err := c.run(t, d, s, p, q)
			if c.want == nil {
				ok(t, err)
				return
			}
			wantErr(t, err, c.want, c.words...)
		})
	}
}

func TestSynchronousErrorsAreNotSticky(t *testing.T) {
	d := newDevice(t)
	s := must(d.NewStream(0))
	p := must(d.Alloc(64))
	wantErr(t, d.Download(make([]byte, 65), p), ErrInvalidAddress)
	wantErr(t, d.Free(p+1), ErrInvalidAddress)
	ok(t, drain(t, d, s))
	ok(t, d.Close())
}

func TestOutOfMemory(t *testing.T) {
	d := newDevice(t, WithCapacity(4096))
	p := must(d.Alloc(3000))
	_, err := d.Alloc(2000)
	wantErr(t, err, ErrOutOfMemory, "Alloc(2000)", "3000 of 4096 bytes in use")
	must(d.AllocHost(10000)) // pinned host memory is not the device's
	ok(t, d.Free(p))
	must(d.Alloc(2000))
	if free, total := must2(d.MemInfo()); free != 2096 || total != 4096 {
		t.Errorf("MemInfo() = %d, %d, want 2096, 4096", free, total)
	}
	if st := d.Stats(); st.PeakBytes != 3000 || st.LiveBytes != 2000 || st.LiveHostBytes != 10000 {
		t.Errorf("Stats() = %+v", st)
	}
}

func TestFreeWaitsForQueuedWork(t *testing.T) {
	d := newDevice(t)
	s := must(d.NewStream(0))
	p := must(d.Alloc(64))
	ok(t, d.Spin(30*time.Millisecond, s))
	ok(t, d.Fill(p, ir.FP32, 16, 1, s))
	ok(t, d.Free(p))
	if n := d.Stats().Launches[KindFill]; n != 1 {
		t.Errorf("Free returned before the queued Fill ran (%d Fills)", n)
	}
	ok(t, drain(t, d, s))
}

func TestHostCopiesOfQueuedMemory(t *testing.T) {
	for _, c := range []struct {
		name  string
		run   func(d *Device, p gpu.Ptr) error
		want  error
		words []string
	}{
		{"Download of queued work", func(d *Device, p gpu.Ptr) error { return d.Download(make([]byte, 128), p) },
			ErrHazard, []string{"stream 1 has queued work on bytes [0x1000000000, 0x1000000040)"}},
		{"other bytes of the allocation", func(d *Device, p gpu.Ptr) error {
			return d.Download(make([]byte, 64), p+64)
		}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevice(t)
			s := must(d.NewStream(0))
			p := must(d.Alloc(128))
			ok(t, d.Spin(time.Hour, s))
			ok(t, d.Fill(p, ir.FP32, 16, 1, s)) // bytes [0, 64), queued behind the spin
			err := c.run(d, p)
			if c.want == nil {
				ok(t, err)
				return
			}
			wantErr(t, err, c.want, c.words...)
		})
	}
}
