package executor

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// nearest rounds x to the nearest of the sorted finite values vals (with
// their codes), ties to the code with an even last bit: the definition of
// round-to-nearest-even, by brute force.
func nearest(x float64, vals []float64, codes []uint32) uint32 {
	i := sort.SearchFloat64s(vals, x) // vals[i-1] < x <= vals[i]
	if i == len(vals) {
		return codes[i-1]
	}
	if i == 0 || vals[i] == x {
		return codes[i]
	}
	lo, hi := x-vals[i-1], vals[i]-x
	switch {
	case lo < hi:
		return codes[i-1]
	case hi < lo:
		return codes[i]
	case codes[i]&1 == 0:
		return codes[i]
	}
	return codes[i-1]
}

// format describes a small float format by its decoder, for brute-force
// checks of an encoder.
type smallFormat struct {
	name   string
	bits   int
	decode func(uint32) float64
	encode func(float32) uint32
	// overflow is the code a finite value beyond the largest rounds to.
	overflow func(neg bool) uint32
	maxHalf  float64 // largest finite + half an ulp: the rounding threshold
}

func checkFormat(t *testing.T, f smallFormat, samples []float32) {
	t.Helper()
	var pos []float64
	var codes []uint32
	for c := uint32(0); c < 1<<(f.bits-1); c++ {
		v := f.decode(c)
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			pos = append(pos, v)
			codes = append(codes, c)
		}
	}
	signBit := uint32(1) << (f.bits - 1)
	for _, x := range samples {
		got := f.encode(x)
		a := math.Abs(float64(x))
		var want uint32
		switch {
		case math.IsNaN(float64(x)):
			if v := f.decode(got); !math.IsNaN(v) {
				t.Errorf("%s(%v) = %#x, not a NaN", f.name, x, got)
			}
			continue
		case a >= f.maxHalf:
			want = f.overflow(math.Signbit(float64(x)))
			if a == f.maxHalf && !math.IsInf(float64(x), 0) {
				continue // a tie at the boundary: checked by the unit cases
			}
		default:
			want = nearest(a, pos, codes)
			if math.Signbit(float64(x)) {
				want |= signBit
			}
		}
		if got != want {
			t.Errorf("%s(%v): got %#x (%v), want %#x (%v)", f.name, x, got, f.decode(got), want, f.decode(want))
		}
	}
}

// samples returns every exact value, every midpoint between neighbours and
// values just off them, plus random float32s over the range of interest.
func samples(decode func(uint32) float64, bits int, r *rand.Rand) []float32 {
	var out []float32
	var vals []float64
	for c := uint32(0); c < 1<<(bits-1); c++ {
		if v := decode(c); !math.IsNaN(v) && !math.IsInf(v, 0) {
			vals = append(vals, v)
		}
	}
	for i, v := range vals {
		out = append(out, float32(v), -float32(v))
		if i+1 < len(vals) {
			m := float32((v + vals[i+1]) / 2)
			out = append(out, m, math.Nextafter32(m, 0), math.Nextafter32(m, float32(math.Inf(1))), -m)
		}
	}
	for i := 0; i < 20000; i++ {
		out = append(out, math.Float32frombits(r.Uint32()))
	}
	out = append(out, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(1), 0, float32(math.Copysign(0, -1)))
	return out
}

func TestFloatFormatsRoundToNearestEven(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bf := smallFormat{name: "bf16", bits: 16,
		decode: func(c uint32) float64 { return float64(f32FromBF16(uint16(c))) },
		encode: func(x float32) uint32 { return uint32(bf16FromF32(x)) },
		overflow: func(neg bool) uint32 {
			if neg {
				return 0xff80
			}
			return 0x7f80
		},
		maxHalf: float64(f32FromBF16(0x7f7f)) + math.Ldexp(1, 127-8),
	}
	fp := smallFormat{name: "fp16", bits: 16,
		decode: func(c uint32) float64 { return float64(f32FromFP16(uint16(c))) },
		encode: func(x float32) uint32 { return uint32(fp16FromF32(x)) },
		overflow: func(neg bool) uint32 {
			if neg {
				return 0xfc00
			}
			return 0x7c00
		},
		maxHalf: 65520,
	}
	e4 := smallFormat{name: "e4m3fn", bits: 8,
		decode:   func(c uint32) float64 { return fmtE4M3.decode(uint8(c)) },
		encode:   func(x float32) uint32 { return uint32(fmtE4M3.encode(float64(x))) },
		overflow: func(neg bool) uint32 { return uint32(fmtE4M3.nan(map[bool]uint8{true: 0x80}[neg])) },
		maxHalf:  464,
	}
	e5 := smallFormat{name: "e5m2", bits: 8,
		decode: func(c uint32) float64 { return fmtE5M2.decode(uint8(c)) },
		encode: func(x float32) uint32 { return uint32(fmtE5M2.encode(float64(x))) },
		overflow: func(neg bool) uint32 {
			if neg {
				return 0xfc
			}
			return 0x7c
		},
		maxHalf: 61440,
	}
	for _, f := range []smallFormat{bf, fp, e4, e5} {
		t.Run(f.name, func(t *testing.T) {
			s := samples(f.decode, f.bits, r)
			checkFormat(t, f, s)
		})
	}
}

func TestFloatFormatUnitCases(t *testing.T) {
	cases := []struct {
		dt   ir.DType
		in   float64
		want float64
	}{
		{ir.BF16, 1 + 1.0/256, 1},           // tie: to even (mantissa 0)
		{ir.BF16, 1 + 3.0/256, 1 + 4.0/256}, // tie: up to even
		{ir.FP16, 65504, 65504},
		{ir.FP16, 65519.99, 65504},
		{ir.FP16, 65520, math.Inf(1)}, // a tie with infinity rounds up
		{ir.FP16, 1.0 / (1 << 24), 1.0 / (1 << 24)},
		{ir.FP16, 1.0 / (1 << 25), 0},                      // tie between 0 and the smallest: even is 0
		{ir.FP16, 1.5 / (1 << 24), 2.0 / (1 << 24)},        // tie: to even
		{ir.FP16, 1 + 1.0/2048, 1},                         // tie
		{ir.FP16, 1 + 3.0/2048, 1 + 4.0/2048},              // tie up
		{ir.FP8E4M3, 448, 448},                             // the largest
		{ir.FP8E4M3, 464, 448},                             // a tie: to even (448 = 1.110)
		{ir.FP8E4M3, 470, math.NaN()},                      // past it: NaN, e4m3fn has no infinity
		{ir.FP8E5M2, 57344, 57344},                         // the largest
		{ir.FP8E5M2, 61440, math.Inf(1)},                   // tie with infinity
		{ir.FP8E4M3, math.Ldexp(1, -9), math.Ldexp(1, -9)}, // smallest subnormal
		{ir.FP32, 1 + math.Ldexp(1, -24), 1},
	}
	for _, c := range cases {
		got := roundTo(c.dt, c.in)
		if got != c.want && !(math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("round %s(%v) = %v, want %v", c.dt, c.in, got, c.want)
		}
	}
}

func TestFP16DecodeEncodeRoundTrip(t *testing.T) {
	for c := 0; c < 1<<16; c++ {
		h := uint16(c)
		f := f32FromFP16(h)
		if math.IsNaN(float64(f)) {
			if g := f32FromFP16(fp16FromF32(f)); !math.IsNaN(float64(g)) {
				t.Fatalf("fp16 NaN %#x lost", h)
			}
			continue
		}
		if back := fp16FromF32(f); back != h {
			t.Fatalf("fp16 %#x -> %v -> %#x", h, f, back)
		}
		if back := bf16FromF32(f32FromBF16(h)); back != h && !math.IsNaN(float64(f32FromBF16(h))) {
			t.Fatalf("bf16 %#x round trip gives %#x", h, back)
		}
	}
}

func TestLoadStore(t *testing.T) {
	for _, dt := range []ir.DType{ir.FP64, ir.FP32, ir.BF16, ir.FP16, ir.FP8E4M3, ir.FP8E5M2, ir.INT64, ir.INT32, ir.INT8, ir.UINT8, ir.BOOL} {
		b := make([]byte, 4*dt.Size())
		for i, v := range []float64{0.3, -1.25, 2, 7} {
			store(dt, b, int64(i), v)
			if got, want := load(dt, b, int64(i)), roundTo(dt, v); got != want {
				t.Errorf("%s: stored %v, loaded %v, want %v", dt, v, got, want)
			}
		}
		fillPoison(b)
		if !isPoison(dt, b, 2) {
			t.Errorf("%s: poison not recognised", dt)
		}
		if dt.IsFloat() && !math.IsNaN(load(dt, b, 1)) {
			t.Errorf("%s: poison reads as %v, not NaN", dt, load(dt, b, 1))
		}
	}
}

// TestFastReductionsMatchReducer: the host's float32 fast paths compute
// exactly what the reference's generic reducer computes, overflow, ties
// and subnormals included.
func TestFastReductionsMatchReducer(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []ir.DType{ir.FP32, ir.BF16, ir.FP16} {
		for _, op := range []schedule.ReduceOp{schedule.ReduceSum, schedule.ReduceAvg, schedule.ReducePremulSum} {
			for _, n := range []int{1, 3, 8} {
				red, err := newReducer(dt, op, 1.0/3, n)
				if err != nil {
					t.Fatal(err)
				}
				// Several blocks and a ragged end, so the split across cores
				// and blocks is exercised.
				const m = 8*reduceBlock + 37
				inputs := make([][]byte, n)
				for j := range inputs {
					inputs[j] = make([]byte, m*dt.Size())
					for e := int64(0); e < m; e++ {
						v := (r.Float64() - 0.5) * math.Pow(2, float64(r.IntN(40)-20))
						if e%97 == 0 {
							v = 60000 // fp16 sums overflow to infinity
						}
						store(dt, inputs[j], e, v)
					}
				}
				fast := make([]byte, m*dt.Size())
				reduceParallel(red, inputs, 0, m, fast)
				for e := int64(0); e < m; e++ {
					acc := red.first(load(dt, inputs[0], e))
					for j := 1; j < n; j++ {
						acc = red.next(acc, load(dt, inputs[j], e))
					}
					if got := load(dt, fast, e); math.Float64bits(got) != math.Float64bits(acc) && !(math.IsNaN(got) && math.IsNaN(acc)) {
						t.Fatalf("%s %s over %d: element %d: fast %v, reducer %v", dt, op, n, e, got, acc)
					}
				}
			}
		}
	}
}

// TestCastFastPaths: castRange's fast paths equal the generic conversion.
func TestCastFastPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 10000
	for _, c := range []struct{ from, to ir.DType }{{ir.FP32, ir.BF16}, {ir.FP32, ir.FP16}, {ir.BF16, ir.FP32}} {
		src := make([]byte, n*c.from.Size())
		for i := int64(0); i < n; i++ {
			bits := r.Uint32()
			if c.from == ir.BF16 {
				bits &= 0xffff
			}
			v := float64(math.Float32frombits(bits))
			if c.from == ir.BF16 {
				v = float64(f32FromBF16(uint16(bits)))
			}
			store(c.from, src, i, v)
		}
		got := make([]byte, (n+3)*c.to.Size())
		castRange(c.from, src, 1, c.to, got, 3, n-1)
		for i := int64(1); i < n; i++ {
			want := roundTo(c.to, load(c.from, src, i))
			g := load(c.to, got, i+2)
			if math.Float64bits(g) != math.Float64bits(want) && !(math.IsNaN(g) && math.IsNaN(want)) {
				t.Fatalf("%s→%s element %d: %v, want %v", c.from, c.to, i, g, want)
			}
		}
	}
}

// TestPoisonedFindsFirstElement: the word-wise scan finds the first
// all-ones element as the per-element check does, past stray 0xff bytes
// and at any offset.
func TestPoisonedFindsFirstElement(t *testing.T) {
	for _, dt := range []ir.DType{ir.FP32, ir.BF16, ir.FP16, ir.FP64, ir.INT8} {
		sz := dt.Size()
		for _, at := range []int64{-1, 0, 1, 7, 63} {
			const n = 64
			b := make([]byte, (n+3)*sz)
			for i := range b {
				b[i] = byte(i * 37) // stray 0xff bytes, never a whole element
				if b[i] == 0xff && sz > 1 && (i+1)%int(sz) == 0 {
					b[i] = 0xfe
				}
			}
			if sz == 1 {
				for i := range b {
					if b[i] == 0xff {
						b[i] = 0xfe
					}
				}
			}
			const off = 3
			if at >= 0 {
				for j := int64(0); j < sz; j++ {
					b[(off+at)*sz+j] = 0xff
				}
			}
			want := int64(-1)
			for i := int64(0); i < n; i++ {
				if isPoison(dt, b[off*sz:], i) {
					want = i
					break
				}
			}
			if want != at {
				t.Fatalf("%s: the test data has its first poison at %d, want %d", dt, want, at)
			}
			if got := poisoned(dt, b, off, n); got != want {
				t.Errorf("%s, poison at %d: poisoned = %d, want %d", dt, at, got, want)
			}
		}
	}
}
