package gputest

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

// enc encodes values (exact in dt) as a dt array.
func enc(dt ir.DType, v ...float32) []byte {
	b := make([]byte, int64(len(v))*dt.Size())
	encode32(dt, v, b)
	return b
}

// dec decodes a dt array.
func dec(dt ir.DType, b []byte) []float32 {
	v := make([]float32, int64(len(b))/dt.Size())
	decode32(dt, b, v)
	return v
}

// sameBits compares float32s bit for bit (NaNs and zeros' signs).
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestReduce(t *testing.T) {
	neg0 := float32(math.Copysign(0, -1))
	for _, c := range []struct {
		name     string
		dt       ir.DType
		srcs     [][]float32
		scale    float32
		inPlace  bool // dst is srcs[0]
		want     []float32
		wantNote string
	}{
		{"float32 sums in source order", ir.FP32, [][]float32{{1e8, 1e8}, {1, -1e8}, {-1e8, 1}}, 1, false,
			[]float32{0, 1}, "(1e8+1)-1e8 = 0 but (1e8-1e8)+1 = 1"},
		{"float32 accumulation, not float64", ir.FP32, [][]float32{{1e8}, {1}, {1}, {1}, {1}, {1}}, 1, false,
			[]float32{1e8}, "a float64 sum would round to 1e8+8"},
		{"bf16 inputs summed in float32, rounded once", ir.BF16, [][]float32{{1}, {0x1p-8}, {0x1p-8}}, 1, false,
			[]float32{1 + 0x1p-7}, "rounding every addition to bf16 would give 1"},
		{"scale applied to each input", ir.FP32, [][]float32{{3, 1, -2}, {5, 1, 2}}, 0.5, false,
			[]float32{4, 1, 0}, ""},
		{"each scaled input rounded to float32", ir.FP32, [][]float32{{1}, {1 + 0x1p-23}}, 1.25, false,
			[]float32{2.5}, "fusing the second product into the sum would give 2.5+2^-22"},
		{"fp16 overflows to infinity", ir.FP16, [][]float32{{60000}, {60000}}, 1, false,
			[]float32{float32(math.Inf(1))}, ""},
		{"average of two", ir.FP16, [][]float32{{1, 3}, {2, 4}}, 0.5, false, []float32{1.5, 3.5}, ""},
		{"dst is a source", ir.FP32, [][]float32{{1, 2}, {10, 20}}, 1, true, []float32{11, 22}, ""},
		{"one source keeps a negative zero", ir.FP32, [][]float32{{neg0}}, 1, false, []float32{neg0}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevice(t)
			s := must(d.NewStream(0))
			n := int64(len(c.srcs[0]))
			var srcs []gpu.Ptr
			for _, v := range c.srcs {
				p := must(d.Alloc(n * c.dt.Size()))
				ok(t, d.Upload(p, enc(c.dt, v...), s))
				srcs = append(srcs, p)
			}
			dst := srcs[0]
			if !c.inPlace {
				dst = must(d.Alloc(n * c.dt.Size()))
			}
			ok(t, d.Reduce(dst, srcs, n, c.dt, c.scale, s))
			ok(t, drain(t, d, s))
			if got := dec(c.dt, download(t, d, dst, int(n*c.dt.Size()))); !sameBits(got, c.want) {
				t.Errorf("got %v, want %v %s", got, c.want, c.wantNote)
			}
		})
	}
}

func TestFillMatchesPattern(t *testing.T) {
	const n = 1000
	for _, dt := range []ir.DType{ir.FP64, ir.FP32, ir.BF16, ir.FP16} {
		t.Run(dt.String(), func(t *testing.T) {
			d := newDevice(t)
			s := must(d.NewStream(0))
			p := must(d.Alloc(n * dt.Size()))
			ok(t, d.Fill(p, dt, n, 42, s))
			ok(t, drain(t, d, s))
			got := make([]float64, n)
			decode64(dt, download(t, d, p, int(n*dt.Size())), got)
			for i, v := range got {
				if want := float64(gpu.Pattern(42, int64(i))); v != want {
					t.Fatalf("element %d = %v, want %v", i, v, want)
				}
			}
		})
	}
}

func TestDivideAndAdd(t *testing.T) {
	for _, c := range []struct {
		name string
		dt   ir.DType
		x    []float32 // dst before, in dt
		run  func(d *Device, p, scratch gpu.Ptr, s gpu.Stream) error
		want []byte
	}{
		{"divide in float32 by f rounded to float32", ir.FP32, []float32{1, 3},
			func(d *Device, p, _ gpu.Ptr, s gpu.Stream) error { return d.Divide(p, ir.FP32, 2, 0.001, s) },
			f32Bytes(999.99994, float32(3)/float32(0.001))},
		{"divide bf16, rounding the float32 quotient", ir.BF16, []float32{1},
			func(d *Device, p, _ gpu.Ptr, s gpu.Stream) error { return d.Divide(p, ir.BF16, 1, 3, s) },
			[]byte{0xab, 0x3e}},
		{"divide fp64 in fp64", ir.FP64, []float32{1},
			func(d *Device, p, _ gpu.Ptr, s gpu.Stream) error { return d.Divide(p, ir.FP64, 1, 3, s) },
			fp64Bytes(1.0 / 3)},
		{"add fp32 into bf16 in float32", ir.BF16, []float32{1},
			func(d *Device, p, q gpu.Ptr, s gpu.Stream) error {
				return first(d.Upload(q, f32Bytes(0x1p-8+0x1p-20), s), d.Add(p, ir.BF16, q, ir.FP32, 1, s))
			},
			[]byte{0x81, 0x3f}},
		{"add fp64 into fp32, rounding once", ir.FP32, []float32{1},
			func(d *Device, p, q gpu.Ptr, s gpu.Stream) error {
				return first(d.Upload(q, fp64Bytes(0x1p-24+0x1p-50), s), d.Add(p, ir.FP32, q, ir.FP64, 1, s))
			},
			f32Bytes(1 + 0x1p-23)},
		{"add fp32 into fp64 in fp64", ir.FP64, []float32{1},
			func(d *Device, p, q gpu.Ptr, s gpu.Stream) error {
				return first(d.Upload(q, f32Bytes(0x1p-30), s), d.Add(p, ir.FP64, q, ir.FP32, 1, s))
			},
			fp64Bytes(1 + 0x1p-30)},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevice(t)
			s := must(d.NewStream(0))
			p := must(d.Alloc(int64(len(c.want))))
			q := must(d.Alloc(64))
			ok(t, d.Upload(p, enc(c.dt, c.x...), s))
			ok(t, c.run(d, p, q, s))
			ok(t, drain(t, d, s))
			if got := download(t, d, p, len(c.want)); string(got) != string(c.want) {
				t.Errorf("got % x, want % x", got, c.want)
			}
		})
	}
}

func fp64Bytes(v float64) []byte {
	b := make([]byte, 8)
	encode64(ir.FP64, []float64{v}, b)
	return b
}

func TestCounters(t *testing.T) {
	d := newDevice(t)
	ss := newStreams(t, d, 2)
	a, b := must(d.Alloc(400)), must(d.AllocHost(400))
	ok(t, d.Upload(a, make([]byte, 400), ss[0]))
	ok(t, d.Copy(b, a, 100, ss[0]))
	ok(t, d.PacedCopy(a, b, 50, 1e9, ss[0]))
	ok(t, d.Fill(a, ir.FP32, 10, 1, ss[0]))
	ok(t, d.Cast(b, ir.BF16, a, ir.FP32, 10, ss[1]))
	ok(t, d.Cast(b, ir.BF16, a, ir.FP32, 10, ss[1]))
	ok(t, d.Spin(0, ss[1]))
	ok(t, d.Burn(1e3, ss[1]))
	ok(t, drain(t, d, ss[0]))
	ok(t, drain(t, d, ss[1]))
	download(t, d, b, 30)
	ok(t, d.Free(a))

	got := d.Stats()
	want := Stats{BytesCopied: 150, BytesUploaded: 400, BytesDownloaded: 30,
		LiveBytes: 0, PeakBytes: 400, LiveHostBytes: 400, PeakHostBytes: 400, Allocs: 2, Frees: 1, Events: 2, TimingEvents: 2}
	want.Launches[KindCopy] = 1
	want.Launches[KindPacedCopy] = 1
	want.Launches[KindFill] = 1
	want.Launches[KindCast] = 2
	want.Launches[KindSpin] = 1
	want.Launches[KindBurn] = 1
	want.Launches[KindUpload] = 1
	if got != want {
		t.Errorf("Stats() = %+v\nwant %+v", got, want)
	}
}

func TestInvalidArguments(t *testing.T) {
	d := newDevice(t)
	s := must(d.NewStream(0))
	e := must(d.NewEvent())
	p := must(d.Alloc(1024))
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"Alloc(0)", errOf(d.Alloc(0)), ErrInvalidValue},
		{"AllocHost(-1)", errOf(d.AllocHost(-1)), ErrInvalidValue},
		{"Copy of -1 bytes", d.Copy(p, p, -1, s), ErrInvalidValue},
		{"Memset of -1 bytes", d.Memset(p, 0, -1, s), ErrInvalidValue},
		{"Fill of int8", d.Fill(p, ir.INT8, 4, 0, s), ErrInvalidValue},
		{"Fill of -1 elements", d.Fill(p, ir.FP32, -1, 0, s), ErrInvalidValue},
		{"Divide of fp8", d.Divide(p, ir.FP8E5M2, 4, 2, s), ErrInvalidValue},
		{"Add from int32", d.Add(p, ir.FP32, p, ir.INT32, 4, s), ErrInvalidValue},
		{"Reduce of fp64", d.Reduce(p, []gpu.Ptr{p}, 4, ir.FP64, 1, s), ErrInvalidValue},
		{"Reduce of nothing", d.Reduce(p, nil, 4, ir.FP32, 1, s), ErrInvalidValue},
		{"Spin(-1)", d.Spin(-1, s), ErrInvalidValue},
		{"Burn(NaN)", d.Burn(math.NaN(), s), ErrInvalidValue},
		{"PacedCopy at 0 B/s", d.PacedCopy(p, p, 4, 0, s), ErrInvalidValue},
		{"stream 0", d.Copy(p, p, 4, 0), ErrInvalidHandle},
		{"stream 99", d.Spin(0, 99), ErrInvalidHandle},
		{"event 99", d.Record(99, s), ErrInvalidHandle},
		{"Wait on event 0", d.Wait(s, 0), ErrInvalidHandle},
		{"Record on stream 7", d.Record(e, 7), ErrInvalidHandle},
		{"LaunchGraph(3)", d.LaunchGraph(3, s), ErrInvalidHandle},
	} {
		if c.err == nil {
			t.Errorf("%s: no error, want %v", c.name, c.want)
		} else if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	ok(t, drain(t, d, s))
}

func errOf[T any](_ T, err error) error { return err }

func TestTimedKernels(t *testing.T) {
	for _, c := range []struct {
		name     string
		run      func(d *Device, p gpu.Ptr, s gpu.Stream) error
		min, max time.Duration
	}{
		{"PacedCopy paces", func(d *Device, p gpu.Ptr, s gpu.Stream) error { return d.PacedCopy(p, p+1000, 1000, 1e5, s) }, 10 * time.Millisecond, 5 * time.Second},
		{"Burn at the burn rate", func(d *Device, _ gpu.Ptr, s gpu.Stream) error { return d.Burn(1e13, s) }, 10 * time.Millisecond, 5 * time.Second},
		{"Burn is capped", func(d *Device, _ gpu.Ptr, s gpu.Stream) error { return d.Burn(1e30, s) }, maxBurn, 5 * time.Second},
		{"Spin", func(d *Device, _ gpu.Ptr, s gpu.Stream) error { return d.Spin(15*time.Millisecond, s) }, 15 * time.Millisecond, 5 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevice(t, WithBurnRate(1e15))
			s := must(d.NewStream(0))
			es := newEvents(t, d, 2)
			p := must(d.Alloc(2000))
			ok(t, d.Record(es[0], s))
			ok(t, c.run(d, p, s))
			ok(t, d.Record(es[1], s))
			ok(t, d.SyncEvent(es[1]))
			if el := must(d.Elapsed(es[0], es[1])); el < c.min || el > c.max {
				t.Errorf("took %v, want [%v, %v]", el, c.min, c.max)
			}
		})
	}
}

// TestMoves: one call, one kernel, copies and casts at byte offsets.
func TestMoves(t *testing.T) {
	d := newDevice(t)
	s := must(d.NewStream(0))
	src, dst := must(d.Alloc(64)), must(d.Alloc(64))
	ok(t, d.Upload(src, append(f32Bytes(1.5, -2), 7, 8, 9), s))
	ok(t, d.Moves(dst, src, []gpu.Run{
		{DstOff: 1, SrcOff: 0, DstDType: ir.BF16, SrcDType: ir.FP32, N: 2},
		{DstOff: 10, SrcOff: 8, DstDType: ir.INT8, SrcDType: ir.INT8, N: 3},
	}, s))
	ok(t, drain(t, d, s))
	got := download(t, d, dst, 13)
	if want := append([]byte{0xc0, 0x3f, 0x00, 0xc0}, 7, 8, 9); !bytes.Equal(got[1:5], want[:4]) || !bytes.Equal(got[10:13], want[4:]) {
		t.Errorf("got % x", got)
	}
	if st := d.Stats(); st.Launches[KindMoves] != 1 || st.BytesCopied != 3 {
		t.Errorf("launches %v, copied %d: want one Moves copying 3 bytes", st.Launches, st.BytesCopied)
	}
}
