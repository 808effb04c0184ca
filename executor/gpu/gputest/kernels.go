package gputest

import (
	"fmt"
	"math"
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
	body   func(b [][]byte)
	copied int64         // bytes it copies, for the counters
	sleep  time.Duration // then it sleeps this long
	flops  float64       // or burns this many flops
}

// access is bytes [p, p+n) read or written.
type access struct {
	p     gpu.Ptr
	n     int64
	write bool
}

// runKernel executes k on its bound accesses. d.mu is not held.
func (d *Device) runKernel(k *kernel, spans []span) {
	if k.body != nil {
		b := make([][]byte, len(spans))
		for i, s := range spans {
			b[i] = s.b
		}
		d.memMu.Lock()
		k.body(b)
		d.memMu.Unlock()
	}
	d.mu.Lock()
	d.stats.Launches[k.kind]++
	d.stats.BytesCopied += k.copied
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
	for i := 0; ; i++ {
		x = math.FMA(x, 0.999999, 1e-6)
		if i%4096 == 0 {
			if time.Now().After(end) {
				break
			}
			select {
			case <-d.done:
				d.sink.Store(math.Float64bits(x))
				return
			default:
			}
		}
	}
	d.sink.Store(math.Float64bits(x))
}

// bytesOf is the size of n elements of dt, checked.
func bytesOf(call string, n int64, dts ...ir.DType) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("gputest: %s: %d elements: %w", call, n, ErrInvalidValue)
	}
	for _, dt := range dts {
		if !kernelDType(dt) {
			return 0, fmt.Errorf("gputest: %s: dtype %s: %w: fp64, fp32, bf16 or fp16 only", call, dt, ErrInvalidValue)
		}
		if n > math.MaxInt64/8 {
			return 0, fmt.Errorf("gputest: %s: %d elements: %w", call, n, ErrInvalidValue)
		}
	}
	return n * dts[0].Size(), nil
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
		body: func(b [][]byte) {
			for i := range b[0] {
				b[0][i] = value
			}
		}})
}

// Cast converts n elements of st at src to dt at dst, rounding to nearest
// even; the same dtype, whatever it is, is a copy.
func (d *Device) Cast(dst gpu.Ptr, dt ir.DType, src gpu.Ptr, st ir.DType, n int64, s gpu.Stream) error {
	call := fmt.Sprintf("Cast(%s to %s)", st, dt)
	var sb, db int64
	var err error
	if dt == st && dt.Size() > 0 {
		if n < 0 || n > math.MaxInt64/8 {
			return fmt.Errorf("gputest: %s: %d elements: %w", call, n, ErrInvalidValue)
		}
		sb, db = n*dt.Size(), n*dt.Size()
	} else if sb, err = bytesOf(call, n, st, dt); err != nil {
		return err
	} else {
		db = n * dt.Size()
	}
	return d.launch(s, &kernel{kind: KindCast, acc: []access{{src, sb, false}, {dst, db, true}},
		body: func(b [][]byte) {
			if dt == st {
				copy(b[1], b[0])
				return
			}
			for i := range n {
				store64(dt, b[1], i, load64(st, b[0], i))
			}
		}})
}

// Reduce writes dst[i] = round_dt(Σ_j round32(srcs[j][i] · scale)),
// summing in float32 in the order of srcs.
func (d *Device) Reduce(dst gpu.Ptr, srcs []gpu.Ptr, n int64, dt ir.DType, scale float32, s gpu.Stream) error {
	call := fmt.Sprintf("Reduce(%d sources of %s)", len(srcs), dt)
	if dt == ir.FP64 {
		return fmt.Errorf("gputest: %s: %w: fp32, bf16 or fp16 only", call, ErrInvalidValue)
	}
	bytes, err := bytesOf(call, n, dt)
	if err != nil {
		return err
	}
	if len(srcs) == 0 {
		return fmt.Errorf("gputest: %s: %w: no sources", call, ErrInvalidValue)
	}
	acc := make([]access, 0, len(srcs)+1)
	for _, p := range srcs {
		acc = append(acc, access{p, bytes, false})
	}
	acc = append(acc, access{dst, bytes, true})
	return d.launch(s, &kernel{kind: KindReduce, acc: acc, body: func(b [][]byte) {
		sum := make([]float32, n)
		for j, in := range b[:len(srcs)] {
			for i := range sum {
				t := float32(load32(dt, in, int64(i)) * scale)
				if j == 0 {
					sum[i] = t
				} else {
					sum[i] = float32(sum[i] + t)
				}
			}
		}
		for i, v := range sum {
			store32(dt, b[len(srcs)], int64(i), v)
		}
	}})
}

// Divide divides n elements in place: x = round_dt(x / f), the quotient
// of float32 operands (fp64 in fp64).
func (d *Device) Divide(p gpu.Ptr, dt ir.DType, n int64, f float64, s gpu.Stream) error {
	bytes, err := bytesOf(fmt.Sprintf("Divide(%s)", dt), n, dt)
	if err != nil {
		return err
	}
	f32 := float32(f)
	return d.launch(s, &kernel{kind: KindDivide, acc: []access{{p, bytes, true}}, body: func(b [][]byte) {
		for i := range n {
			if dt == ir.FP64 {
				store64(dt, b[0], i, load64(dt, b[0], i)/f)
			} else {
				store32(dt, b[0], i, float32(load32(dt, b[0], i)/f32))
			}
		}
	}})
}

// Add adds src to dst elementwise in float32 (fp64 when dst is fp64) and
// rounds to dst's dtype.
func (d *Device) Add(dst gpu.Ptr, dt ir.DType, src gpu.Ptr, st ir.DType, n int64, s gpu.Stream) error {
	call := fmt.Sprintf("Add(%s to %s)", st, dt)
	db, err := bytesOf(call, n, dt, st)
	if err != nil {
		return err
	}
	return d.launch(s, &kernel{kind: KindAdd, acc: []access{{src, n * st.Size(), false}, {dst, db, true}},
		body: func(b [][]byte) {
			for i := range n {
				if dt == ir.FP64 {
					store64(dt, b[1], i, load64(dt, b[1], i)+load64(st, b[0], i))
				} else {
					store32(dt, b[1], i, float32(load32(dt, b[1], i)+load32(st, b[0], i)))
				}
			}
		}})
}

// Fill writes gpu.Pattern(seed, i) into n elements of dt.
func (d *Device) Fill(p gpu.Ptr, dt ir.DType, n int64, seed uint64, s gpu.Stream) error {
	bytes, err := bytesOf(fmt.Sprintf("Fill(%s)", dt), n, dt)
	if err != nil {
		return err
	}
	return d.launch(s, &kernel{kind: KindFill, acc: []access{{p, bytes, true}}, body: func(b [][]byte) {
		for i := range n {
			store32(dt, b[0], i, gpu.Pattern(seed, i))
		}
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
