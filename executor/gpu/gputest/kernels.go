package gputest

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

// kernel is one launch: the memory it touches, and what it does.
type kernel struct {
	kind Kind
	acc  []access
	// body computes on the accessed bytes, b[i] being acc[i]'s, under the
	// device's memory lock; nil for none.
	body func(b [][]byte)
	// exec, for kernels that wait on other devices (a fabric's
	// collectives), runs instead of body without any lock held; it takes
	// d.memMu itself around touching b, and its error is the device's
	// asynchronous error.
	exec     func(d *Device, b [][]byte) error
	copied   int64         // bytes it copies, for the counters
	uploaded int64         // bytes it uploads from the host, for the counters
	sleep    time.Duration // then it sleeps this long
	flops    float64       // or burns this many flops
}

// access is bytes [p, p+n) read or written.
type access struct {
	p     gpu.Ptr
	n     int64
	write bool
}

// runKernel executes k on the bytes of its accesses. d.mu is not held.
func (d *Device) runKernel(k *kernel, bufs [][]byte) {
	if k.body != nil {
		d.memMu.Lock()
		k.body(bufs)
		d.memMu.Unlock()
	}
	if k.exec != nil {
		if err := k.exec(d, bufs); err != nil {
			d.mu.Lock()
			d.fail(err)
			d.mu.Unlock()
			return
		}
	}
	d.mu.Lock()
	d.stats.Launches[k.kind]++
	d.stats.BytesCopied += k.copied
	d.stats.BytesUploaded += k.uploaded
	d.mu.Unlock()
	d.sleep(k.sleep)
	if k.flops > 0 {
		d.burn(k.flops)
	}
}

// maxBurn bounds one Burn, so tests stay fast.
const maxBurn = 50 * time.Millisecond

// burn does fused multiply-adds for flops / rate, at most maxBurn.
func (d *Device) burn(flops float64) {
	t := time.Duration(min(flops/d.cfg.burnRate*float64(time.Second), float64(maxBurn)))
	end := time.Now().Add(t)
	x := 1.0
	for i := 1; ; i++ {
		x = math.FMA(x, 0.999999, 1e-6)
		if i%4096 == 0 && (d.stopped() || time.Now().After(end)) {
			break
		}
	}
	d.sink.Store(math.Float64bits(x))
}

// checkArgs checks an element count and the dtypes of an arithmetic
// kernel.
func checkArgs(call string, n int64, dts ...ir.DType) error {
	if n < 0 || n > math.MaxInt64/8 {
		return fmt.Errorf("gputest: %s: %d elements: %w", call, n, ErrInvalidValue)
	}
	for _, dt := range dts {
		if !kernelDType(dt) {
			return fmt.Errorf("gputest: %s: dtype %s: %w: fp64, fp32, bf16 or fp16 only", call, dt, ErrInvalidValue)
		}
	}
	return nil
}

// Copy copies bytes from src to dst in stream order.
func (d *Device) Copy(dst, src gpu.Ptr, bytes int64, s gpu.Stream) error {
	if bytes < 0 {
		return fmt.Errorf("gputest: Copy(%d bytes): %w", bytes, ErrInvalidValue)
	}
	return d.launch(s, &kernel{kind: KindCopy, acc: []access{{src, bytes, false}, {dst, bytes, true}}, copied: bytes,
		body: func(b [][]byte) { copy(b[1], b[0]) }})
}

// Memset sets bytes at dst to value in stream order.
func (d *Device) Memset(dst gpu.Ptr, value byte, bytes int64, s gpu.Stream) error {
	if bytes < 0 {
		return fmt.Errorf("gputest: Memset(%d bytes): %w", bytes, ErrInvalidValue)
	}
	return d.launch(s, &kernel{kind: KindMemset, acc: []access{{dst, bytes, true}},
		body: func(b [][]byte) { fill(b[0], value) }})
}

// Moves runs every run as one kernel: copies where the dtypes agree,
// casts (as Cast) where they differ. Like cuda's, the kernel reads a
// table of the runs in device memory, kept per content (movetable.go).
func (d *Device) Moves(dst, src gpu.Ptr, runs []gpu.Run, s gpu.Stream) error {
	var acc []access
	var copied int64
	for i, r := range runs {
		call := fmt.Sprintf("Moves(run %d: %s to %s)", i, r.SrcDType, r.DstDType)
		var dts []ir.DType
		if r.DstDType != r.SrcDType || r.DstDType.Size() == 0 {
			dts = []ir.DType{r.SrcDType, r.DstDType}
		}
		if err := checkArgs(call, r.N, dts...); err != nil {
			return err
		}
		acc = append(acc, access{src + gpu.Ptr(r.SrcOff), r.N * r.SrcDType.Size(), false}, access{dst + gpu.Ptr(r.DstOff), r.N * r.DstDType.Size(), true})
		if r.DstDType == r.SrcDType {
			copied += r.N * r.DstDType.Size()
		}
	}
	if len(runs) == 0 {
		return nil
	}
	table, n, err := d.moveTable(runs)
	if err != nil {
		return err
	}
	acc = append(acc, access{table, n, false}) // the kernel reads its table on s
	runs = slices.Clone(runs)
	return d.launch(s, &kernel{kind: KindMoves, acc: acc, copied: copied, body: func(b [][]byte) {
		for i, r := range runs {
			convert(b[2*i+1], r.DstDType, b[2*i], r.SrcDType, r.N)
		}
	}})
}

// convert writes n elements of st in src as dt into dst.
func convert(dst []byte, dt ir.DType, src []byte, st ir.DType, n int64) {
	switch {
	case dt == st:
		copy(dst, src)
	case dt == ir.FP64 || st == ir.FP64:
		x := make([]float64, n)
		decode64(st, src, x)
		encode64(dt, x, dst)
	default:
		x := make([]float32, n)
		decode32(st, src, x)
		encode32(dt, x, dst)
	}
}

// Cast converts n elements of st at src to dt at dst, rounding to nearest
// even; the same dtype, whatever it is, is a copy.
func (d *Device) Cast(dst gpu.Ptr, dt ir.DType, src gpu.Ptr, st ir.DType, n int64, s gpu.Stream) error {
	call := fmt.Sprintf("Cast(%s to %s)", st, dt)
	dts := []ir.DType{st, dt}
	if dt == st && dt.Size() > 0 {
		dts = nil // a copy, whatever the dtype
	}
	if err := checkArgs(call, n, dts...); err != nil {
		return err
	}
	return d.launch(s, &kernel{kind: KindCast, acc: []access{{src, n * st.Size(), false}, {dst, n * dt.Size(), true}},
		body: func(b [][]byte) { convert(b[1], dt, b[0], st, n) }})
}

// Reduce writes dst[i] = round_dt(Σ_j round32(srcs[j][i] · scale)),
// summing in float32 in the order of srcs.
func (d *Device) Reduce(dst gpu.Ptr, srcs []gpu.Ptr, n int64, dt ir.DType, scale float32, s gpu.Stream) error {
	call := fmt.Sprintf("Reduce(%d sources of %s)", len(srcs), dt)
	if dt == ir.FP64 {
		return fmt.Errorf("gputest: %s: %w: fp32, bf16 or fp16 only", call, ErrInvalidValue)
	}
	if err := checkArgs(call, n, dt); err != nil {
		return err
	}
	bytes := n * dt.Size()
	if len(srcs) == 0 {
		return fmt.Errorf("gputest: %s: %w: no sources", call, ErrInvalidValue)
	}
	acc := make([]access, 0, len(srcs)+1)
	for _, p := range srcs {
		acc = append(acc, access{p, bytes, false})
	}
	acc = append(acc, access{dst, bytes, true})
	return d.launch(s, &kernel{kind: KindReduce, acc: acc, body: func(b [][]byte) {
		sum, x := make([]float32, n), make([]float32, n)
		for j, in := range b[:len(srcs)] {
			decode32(dt, in, x)
			for i, v := range x {
				t := float32(v * scale) // rounded: no fused multiply-add
				if j == 0 {
					sum[i] = t
				} else {
					sum[i] = float32(sum[i] + t)
				}
			}
		}
		encode32(dt, sum, b[len(srcs)])
	}})
}

// Divide divides n elements in place: x = round_dt(x / f), the quotient
// of float32 operands (fp64 in fp64).
func (d *Device) Divide(p gpu.Ptr, dt ir.DType, n int64, f float64, s gpu.Stream) error {
	if err := checkArgs(fmt.Sprintf("Divide(%s)", dt), n, dt); err != nil {
		return err
	}
	f32 := float32(f)
	return d.launch(s, &kernel{kind: KindDivide, acc: []access{{p, n * dt.Size(), true}}, body: func(b [][]byte) {
		if dt == ir.FP64 {
			x := make([]float64, n)
			decode64(dt, b[0], x)
			for i := range x {
				x[i] /= f
			}
			encode64(dt, x, b[0])
			return
		}
		x := make([]float32, n)
		decode32(dt, b[0], x)
		for i := range x {
			x[i] = float32(x[i] / f32)
		}
		encode32(dt, x, b[0])
	}})
}

// Add adds src to dst elementwise in float32 (in fp64 when either is
// fp64, as the host backend does) and rounds to dst's dtype.
func (d *Device) Add(dst gpu.Ptr, dt ir.DType, src gpu.Ptr, st ir.DType, n int64, s gpu.Stream) error {
	call := fmt.Sprintf("Add(%s to %s)", st, dt)
	if err := checkArgs(call, n, dt, st); err != nil {
		return err
	}
	return d.launch(s, &kernel{kind: KindAdd, acc: []access{{src, n * st.Size(), false}, {dst, n * dt.Size(), true}},
		body: func(b [][]byte) {
			if dt == ir.FP64 || st == ir.FP64 {
				x, y := make([]float64, n), make([]float64, n)
				decode64(dt, b[1], x)
				decode64(st, b[0], y)
				for i := range x {
					x[i] += y[i]
				}
				encode64(dt, x, b[1])
				return
			}
			x, y := make([]float32, n), make([]float32, n)
			decode32(dt, b[1], x)
			decode32(st, b[0], y)
			for i := range x {
				x[i] = float32(x[i] + y[i])
			}
			encode32(dt, x, b[1])
		}})
}

// Fill writes gpu.Pattern(seed, i) into n elements of dt.
func (d *Device) Fill(p gpu.Ptr, dt ir.DType, n int64, seed uint64, s gpu.Stream) error {
	if err := checkArgs(fmt.Sprintf("Fill(%s)", dt), n, dt); err != nil {
		return err
	}
	return d.launch(s, &kernel{kind: KindFill, acc: []access{{p, n * dt.Size(), true}}, body: func(b [][]byte) {
		x := make([]float32, n)
		for i := range x {
			x[i] = gpu.Pattern(seed, int64(i))
		}
		encode32(dt, x, b[0])
	}})
}

// Spin occupies the stream for t.
func (d *Device) Spin(t time.Duration, s gpu.Stream) error {
	if t < 0 {
		return fmt.Errorf("gputest: Spin(%v): %w", t, ErrInvalidValue)
	}
	return d.launch(s, &kernel{kind: KindSpin, sleep: t})
}

// Burn does real float work for flops / the burn rate (WithBurnRate).
func (d *Device) Burn(flops float64, s gpu.Stream) error {
	if !(flops >= 0) || math.IsInf(flops, 1) {
		return fmt.Errorf("gputest: Burn(%v flops): %w", flops, ErrInvalidValue)
	}
	return d.launch(s, &kernel{kind: KindBurn, flops: flops})
}

// PacedCopy copies, then occupies the stream until bytes / bytesPerSecond
// have passed.
func (d *Device) PacedCopy(dst, src gpu.Ptr, bytes int64, bytesPerSecond float64, s gpu.Stream) error {
	if bytes < 0 || !(bytesPerSecond > 0) {
		return fmt.Errorf("gputest: PacedCopy(%d bytes at %v B/s): %w", bytes, bytesPerSecond, ErrInvalidValue)
	}
	t := time.Duration(min(float64(bytes)/bytesPerSecond*float64(time.Second), math.MaxInt64/2))
	return d.launch(s, &kernel{kind: KindPacedCopy, acc: []access{{src, bytes, false}, {dst, bytes, true}}, copied: bytes, sleep: t,
		body: func(b [][]byte) { copy(b[1], b[0]) }})
}
