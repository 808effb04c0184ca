//go:build cuda

package cuda

// These tests need a GPU: gorgonia.org/cu exits the test binary in its
// init when there is none. Run them with `go test -tags cuda ./cuda`.
// They hold the kernels to the host's arithmetic, the same references the
// backend's data check uses.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
)

var floatDTypes = []ir.DType{ir.FP64, ir.FP32, ir.BF16, ir.FP16}

func openDevice(t *testing.T) (*Device, gpu.Stream) {
	t.Helper()
	d, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	s, err := d.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

// syncStream waits for everything enqueued on s.
func syncStream(t *testing.T, d *Device, s gpu.Stream) {
	t.Helper()
	e, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Record(e, s); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncEvent(e); err != nil {
		t.Fatal(err)
	}
}

// randomElems is n elements of dt: raw bit patterns (NaNs, infinities,
// subnormals among them) and ordinary values.
func randomElems(r *rand.Rand, dt ir.DType, n int) []byte {
	b := make([]byte, n*int(dt.Size()))
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			r.Read(b[i*int(dt.Size()) : (i+1)*int(dt.Size())])
			continue
		}
		executor.StoreElement(dt, b, int64(i), r.NormFloat64()*math.Pow(2, float64(r.Intn(40)-20)))
	}
	return b
}

// sameElems compares element by element, any NaN matching any NaN: the
// device's arithmetic returns the canonical NaN where the host keeps an
// operand's payload.
func sameElems(t *testing.T, what string, dt ir.DType, got, want []byte) {
	t.Helper()
	sz := dt.Size()
	bad := 0
	for i := int64(0); i < int64(len(want))/sz; i++ {
		g, w := got[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]
		if bytes.Equal(g, w) {
			continue
		}
		gv, wv := executor.LoadElement(dt, got, i), executor.LoadElement(dt, want, i)
		if math.IsNaN(gv) && math.IsNaN(wv) {
			continue
		}
		if bad++; bad <= 5 {
			t.Errorf("%s: element %d is %x (%v), the host computes %x (%v)", what, i, g, gv, w, wv)
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements differ", what, bad)
	}
}

// scratch is a device block with room for n elements of 8 bytes at an
// offset that misaligns every dtype wider than a byte.
func scratch(t *testing.T, d *Device, n int) (aligned, odd gpu.Ptr) {
	t.Helper()
	p, err := d.Alloc(int64(8*n + 16))
	if err != nil {
		t.Fatal(err)
	}
	return p, p + 1
}

func TestKernelsMatchHost(t *testing.T) {
	d, s := openDevice(t)
	r := rand.New(rand.NewSource(1))
	const n = 1 << 16
	for _, misaligned := range []bool{false, true} {
		a0, a1 := scratch(t, d, n)
		b0, b1 := scratch(t, d, n)
		a, b := a0, b0
		if misaligned {
			a, b = a1, b1
		}
		upload := func(p gpu.Ptr, data []byte) {
			if err := d.Upload(p, data, s); err != nil {
				t.Fatal(err)
			}
		}
		download := func(p gpu.Ptr, size int64) []byte {
			syncStream(t, d, s)
			out := make([]byte, size)
			if err := d.Download(out, p); err != nil {
				t.Fatal(err)
			}
			return out
		}
		for _, dt := range floatDTypes {
			for _, st := range floatDTypes {
				src := randomElems(r, st, n)
				upload(b, src)
				if err := d.Cast(a, dt, b, st, n, s); err != nil {
					t.Fatal(err)
				}
				want := make([]byte, n*dt.Size())
				for i := int64(0); i < n; i++ {
					executor.StoreElement(dt, want, i, executor.LoadElement(st, src, i))
				}
				sameElems(t, "cast "+st.String()+" to "+dt.String(), dt, download(a, n*dt.Size()), want)

				dst := randomElems(r, dt, n)
				upload(a, dst)
				if err := d.Add(a, dt, b, st, n, s); err != nil {
					t.Fatal(err)
				}
				for i := int64(0); i < n; i++ {
					x, y := executor.LoadElement(dt, dst, i), executor.LoadElement(st, src, i)
					v := x + y
					if dt != ir.FP64 {
						v = float64(float32(x) + float32(y))
					}
					executor.StoreElement(dt, want, i, v)
				}
				sameElems(t, "add "+st.String()+" to "+dt.String(), dt, download(a, n*dt.Size()), want)
			}

			x := randomElems(r, dt, n)
			upload(a, x)
			const f = 3.0
			if err := d.Divide(a, dt, n, f, s); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, n*dt.Size())
			for i := int64(0); i < n; i++ {
				v := executor.LoadElement(dt, x, i)
				if dt == ir.FP64 {
					v /= f
				} else {
					v = float64(float32(v) / float32(f))
				}
				executor.StoreElement(dt, want, i, v)
			}
			sameElems(t, "divide "+dt.String(), dt, download(a, n*dt.Size()), want)

			if err := d.Fill(a, dt, n, 42, s); err != nil {
				t.Fatal(err)
			}
			for i := int64(0); i < n; i++ {
				executor.StoreElement(dt, want, i, float64(gpu.Pattern(42, i)))
			}
			if got := download(a, n*dt.Size()); !bytes.Equal(got, want) {
				t.Errorf("fill %s (misaligned %v) differs from gpu.Pattern", dt, misaligned)
			}
		}

		// Reduce 5 sources of m elements each, in place into the first:
		// sources that share the target's alignment (the vector loop,
		// with an unaligned head and a tail where m is odd), and sources
		// spaced so that they do not (element by element).
		const k = 5
		for _, m := range []int64{n / 8, n/8 - 3, 13} {
			for _, gap := range []int64{0, 2} {
				for _, dt := range floatDTypes {
					// shifted by 3 elements: the vector loop's head.
					for _, shift := range []int64{0, 3 * dt.Size()} {
						ins := make([][]byte, k)
						srcs := make([]gpu.Ptr, k)
						for j := range ins {
							ins[j] = randomElems(r, dt, int(m))
							srcs[j] = b + gpu.Ptr(shift+int64(j)*(n/8*dt.Size()+gap))
							upload(srcs[j], ins[j])
						}
						const scale = float32(1.0 / 3)
						if err := d.Reduce(srcs[0], srcs, m, dt, scale, s); err != nil {
							t.Fatal(err)
						}
						what := fmt.Sprintf("reduce %s (%d elements at byte %d, sources %d bytes out of step, misaligned %v)", dt, m, shift, gap, misaligned)
						sameElems(t, what, dt, download(srcs[0], m*dt.Size()), gpu.ReduceHost(ins, m, dt, scale))
					}
				}
			}
		}
		for _, p := range []gpu.Ptr{a0, b0} {
			if err := d.Free(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMovesMatchHost holds the grouped moves kernel to the host's
// conversions: runs of every dtype pair at every alignment, short ones and
// ones longer than a piece, run twice (the second launch reads the table
// the first uploaded).
func TestMovesMatchHost(t *testing.T) {
	d, s := openDevice(t)
	r := rand.New(rand.NewSource(3))
	const room = 8 << 20
	src, err := d.Alloc(room)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := d.Alloc(room)
	if err != nil {
		t.Fatal(err)
	}
	srcData := make([]byte, room)
	r.Read(srcData)
	var runs []gpu.Run
	var doff, soff int64
	for _, dt := range floatDTypes {
		for _, st := range floatDTypes {
			for _, n := range []int64{1, 7, 72, 1000, movePieceBytes/2 + 5, 3*movePieceBytes/4 + 11} {
				doff += int64(r.Intn(16))
				soff += int64(r.Intn(16))
				if doff+n*dt.Size() > room || soff+n*st.Size() > room {
					t.Fatalf("the test's runs outgrow its %d-byte buffers", room)
				}
				for i := int64(0); i < n; i += 2 { // ordinary values among raw bits
					executor.StoreElement(st, srcData[soff:], i, r.NormFloat64())
				}
				runs = append(runs, gpu.Run{DstOff: doff, SrcOff: soff, DstDType: dt, SrcDType: st, N: n})
				doff += n * dt.Size()
				soff += n * st.Size()
			}
		}
	}
	if err := d.Upload(src, srcData, s); err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 2; pass++ {
		if err := d.Memset(dst, 0, room, s); err != nil {
			t.Fatal(err)
		}
		if err := d.Moves(dst, src, runs, s); err != nil {
			t.Fatal(err)
		}
		syncStream(t, d, s)
		got := make([]byte, room)
		if err := d.Download(got, dst); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, room)
		for _, run := range runs {
			for i := int64(0); i < run.N; i++ {
				executor.StoreElement(run.DstDType, want[run.DstOff:], i, executor.LoadElement(run.SrcDType, srcData[run.SrcOff:], i))
			}
		}
		for i, run := range runs {
			end := run.DstOff + run.N*run.DstDType.Size()
			what := fmt.Sprintf("pass %d, run %d: %d %s at byte %d to %s at byte %d", pass, i, run.N, run.SrcDType, run.SrcOff, run.DstDType, run.DstOff)
			sameElems(t, what, run.DstDType, got[run.DstOff:end], want[run.DstOff:end])
		}
		if !bytes.Equal(got[doff:], want[doff:]) {
			t.Errorf("pass %d: moves wrote past its runs", pass)
		}
	}
}

func TestMemoryAndCopies(t *testing.T) {
	d, s := openDevice(t)
	const n = 1<<20 + 3
	dev, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	host, err := d.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	if st := d.Stats(); st.LiveBytes != n || st.LiveHostBytes != n || st.Allocs != 2 {
		t.Errorf("stats after two allocations: %+v", st)
	}
	data := make([]byte, n)
	rand.New(rand.NewSource(2)).Read(data)
	if err := d.Upload(host, data, s); err != nil {
		t.Fatal(err)
	}
	if err := d.Copy(dev, host, n, s); err != nil {
		t.Fatal(err)
	}
	if err := d.Memset(host, 0xab, n, s); err != nil {
		t.Fatal(err)
	}
	if err := d.PacedCopy(host+1, dev, n-1, 50e9, s); err != nil {
		t.Fatal(err)
	}
	syncStream(t, d, s)
	got := make([]byte, n)
	if err := d.Download(got, host); err != nil {
		t.Fatal(err)
	}
	if got[0] != 0xab || !bytes.Equal(got[1:], data[:n-1]) {
		t.Errorf("memset then paced copy through the device did not round-trip")
	}
	for _, p := range []gpu.Ptr{dev, host} {
		if err := d.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Free(dev); err == nil {
		t.Errorf("a second free succeeded")
	}
	if st := d.Stats(); st.LiveBytes != 0 || st.LiveHostBytes != 0 || st.PeakBytes != n || st.Frees != 2 {
		t.Errorf("stats after freeing: %+v", st)
	}
}

// timed runs f on s between two events and returns the device time.
func timed(t *testing.T, d *Device, s gpu.Stream, f func() error) time.Duration {
	t.Helper()
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	if err := d.Record(e0, s); err != nil {
		t.Fatal(err)
	}
	if err := f(); err != nil {
		t.Fatal(err)
	}
	if err := d.Record(e1, s); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncEvent(e1); err != nil {
		t.Fatal(err)
	}
	el, err := d.Elapsed(e0, e1)
	if err != nil {
		t.Fatal(err)
	}
	return el
}

func TestStandIns(t *testing.T) {
	d, s := openDevice(t)
	if el := timed(t, d, s, func() error { return d.Spin(5*time.Millisecond, s) }); el < 5*time.Millisecond || el > 7*time.Millisecond {
		t.Errorf("Spin(5ms) took %v", el)
	}
	const size = 64 << 20
	rate := 20e9 // 3.4 ms
	src, _ := d.Alloc(size)
	dst, _ := d.Alloc(size)
	el := timed(t, d, s, func() error { return d.PacedCopy(dst, src, size, rate, s) })
	if want := time.Duration(float64(size) / rate * 1e9); el < want || el > want*3/2 {
		t.Errorf("PacedCopy of %d bytes at %g B/s took %v, want %v to %v", size, rate, el, want, want*3/2)
	}
	if el := timed(t, d, s, func() error { return d.Burn(1e12, s) }); el <= 0 {
		t.Errorf("Burn(1e12) took %v", el)
	} else {
		t.Logf("Burn(1e12 flops) took %v: %.1f TFLOP/s of fp32 FMA", el, 1e12/el.Seconds()/1e12)
	}
}

func TestCapture(t *testing.T) {
	d, s := openDevice(t)
	const n = 1000
	p, _ := d.Alloc(4 * n)
	if err := d.BeginCapture(s); err != nil {
		t.Fatal(err)
	}
	if err := d.Fill(p, ir.FP32, n, 7, s); err != nil {
		t.Fatal(err)
	}
	g, err := d.EndCapture(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Memset(p, 0, 4*n, s); err != nil {
		t.Fatal(err)
	}
	if err := d.LaunchGraph(g, s); err != nil {
		t.Fatal(err)
	}
	syncStream(t, d, s)
	got := make([]byte, 4*n)
	if err := d.Download(got, p); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < n; i++ {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); v != gpu.Pattern(7, i) {
			t.Fatalf("element %d after the replay is %v, want %v", i, v, gpu.Pattern(7, i))
		}
	}
}
