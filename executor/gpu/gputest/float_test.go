package gputest

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"sort"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
)

func TestBF16FromF32Known(t *testing.T) {
	for _, c := range []struct {
		name string
		in   uint32
		want uint16
	}{
		{"one", 0x3f800000, 0x3f80},
		{"tie to even, down", 0x3f808000, 0x3f80},
		{"tie to even, up", 0x3f818000, 0x3f82},
		{"above the tie", 0x3f808001, 0x3f81},
		{"below the tie", 0x3f807fff, 0x3f80},
		{"negative zero", 0x80000000, 0x8000},
		{"largest finite overflows", 0x7f7fffff, 0x7f80},
		{"below the overflow tie", 0x7f7f7fff, 0x7f7f},
		{"overflow tie goes to infinity", 0x7f7f8000, 0x7f80},
		{"negative overflow", 0xff7fffff, 0xff80},
		{"infinity", 0x7f800000, 0x7f80},
		{"negative infinity", 0xff800000, 0xff80},
		{"smallest subnormal", 0x00000001, 0x0000},
		{"subnormal exact", 0x00010000, 0x0001},
		{"subnormal tie, even", 0x00008000, 0x0000},
		{"subnormal tie, odd", 0x00018000, 0x0002},
		{"quiet NaN", 0x7fc00000, 0x7fc0},
		{"signalling NaN is quietened", 0x7f800001, 0x7fc0},
		{"negative NaN keeps payload", 0xffa00000, 0xffe0},
	} {
		if got := bf16FromF32(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("%s: bf16FromF32(%#08x) = %#04x, want %#04x", c.name, c.in, got, c.want)
		}
	}
}

func TestFP16FromF32Known(t *testing.T) {
	for _, c := range []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"tie to even, down", 1 + 0x1p-11, 0x3c00},
		{"tie to even, up", 1 + 3*0x1p-11, 0x3c02},
		{"largest finite", 65504, 0x7bff},
		{"just below the overflow tie", math.Float32frombits(0x477fefff), 0x7bff},
		{"overflow tie goes to infinity", 65520, 0x7c00},
		{"overflow", 1e10, 0x7c00},
		{"negative overflow", -1e10, 0xfc00},
		{"infinity", float32(math.Inf(1)), 0x7c00},
		{"smallest normal", 0x1p-14, 0x0400},
		{"largest subnormal", 1023 * 0x1p-24, 0x03ff},
		{"subnormal tie rounds up into the normals", 1023.5 * 0x1p-24, 0x0400},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half the smallest subnormal ties to zero", 0x1p-25, 0x0000},
		{"just above it", math.Float32frombits(0x33000001), 0x0001},
		{"three quarters of the smallest", 0.75 * 0x1p-24, 0x0001},
		{"subnormal tie to even, up", 1.5 * 0x1p-24, 0x0002},
		{"subnormal tie to even, down", 2.5 * 0x1p-24, 0x0002},
		{"fp32 subnormal", math.Float32frombits(1), 0x0000},
		{"negative tiny", -0x1p-30, 0x8000},
		{"quiet NaN", math.Float32frombits(0x7fc00000), 0x7e00},
		{"NaN keeps its top payload bits", math.Float32frombits(0xffc02000), 0xfe01},
	} {
		if got := fp16FromF32(c.in); got != c.want {
			t.Errorf("%s: fp16FromF32(%v) = %#04x, want %#04x", c.name, c.in, got, c.want)
		}
	}
}

// format is a 16-bit float format, decoded from its definition.
type format struct {
	name          string
	ebits, mbits  int
	encode        func(float32) uint16
	decode        func(uint16) float32
	infCode       uint16
	overflowValue float64 // 2^(emax+1): where infinity sits for rounding
}

var formats = []format{
	{"bf16", 8, 7, bf16FromF32, f32FromBF16, 0x7f80, 0x1p128},
	{"fp16", 5, 10, fp16FromF32, f32FromFP16, 0x7c00, 65536},
}

// value decodes code h from the format's definition.
func (f format) value(h uint16) float64 {
	sign := 1.0
	if h>>15 != 0 {
		sign = -1
	}
	e := int(h>>f.mbits) & (1<<f.ebits - 1)
	m := float64(int(h) & (1<<f.mbits - 1))
	bias := 1<<(f.ebits-1) - 1
	switch {
	case e == 1<<f.ebits-1 && m == 0:
		return sign * math.Inf(1)
	case e == 1<<f.ebits-1:
		return math.NaN()
	case e == 0:
		return sign * math.Ldexp(m, 1-bias-f.mbits)
	}
	return sign * math.Ldexp(1+m/float64(int(1)<<f.mbits), e-bias)
}

func TestWidenIsExact(t *testing.T) {
	for _, f := range formats {
		for c := 0; c < 1<<16; c++ {
			h := uint16(c)
			got, want := float64(f.decode(h)), f.value(h)
			if math.IsNaN(want) {
				if !math.IsNaN(got) {
					t.Fatalf("%s %#04x decodes to %v, want NaN", f.name, h, got)
				}
				continue
			}
			if got != want || math.Signbit(got) != math.Signbit(want) {
				t.Fatalf("%s %#04x decodes to %v, want %v", f.name, h, got, want)
			}
			if back := f.encode(float32(got)); back != h {
				t.Fatalf("%s %#04x does not round-trip: %#04x", f.name, h, back)
			}
		}
	}
}

// nearest is the brute-force rounding of a non-negative x: the nearest of
// the format's finite values and, at 2^(emax+1), infinity, ties to the
// even code, by exact comparison.
type nearest struct {
	vals  []float64
	codes []uint16
}

func newNearest(f format) nearest {
	var n nearest
	for c := 0; c < 1<<15; c++ {
		if v := f.value(uint16(c)); !math.IsInf(v, 0) && !math.IsNaN(v) {
			n.vals, n.codes = append(n.vals, v), append(n.codes, uint16(c))
		}
	}
	n.vals, n.codes = append(n.vals, f.overflowValue), append(n.codes, f.infCode)
	return n
}

func (n nearest) round(x float64) uint16 {
	i := sort.SearchFloat64s(n.vals, x) // vals[i-1] < x <= vals[i]
	switch {
	case i == len(n.vals):
		return n.codes[i-1] // beyond: infinity
	case n.vals[i] == x || i == 0:
		return n.codes[i]
	}
	exact := func(v float64) *big.Float { return new(big.Float).SetPrec(600).SetFloat64(v) }
	lo := new(big.Float).SetPrec(600).Sub(exact(x), exact(n.vals[i-1]))
	hi := new(big.Float).SetPrec(600).Sub(exact(n.vals[i]), exact(x))
	switch c := lo.Cmp(hi); {
	case c < 0:
		return n.codes[i-1]
	case c > 0:
		return n.codes[i]
	case n.codes[i]&1 == 0:
		return n.codes[i]
	}
	return n.codes[i-1]
}

// samples are float32s for the brute-force check: a stride through all
// bit patterns, and every midpoint between adjacent values of the format
// with its float32 neighbours.
func samples(n nearest) []float32 {
	var out []float32
	for b := uint64(0); b < 1<<32; b += 65537 {
		out = append(out, math.Float32frombits(uint32(b)))
	}
	for i := 1; i < len(n.vals); i++ {
		m := float32((n.vals[i-1] + n.vals[i]) / 2) // exact: two more bits than the format
		out = append(out, m, math.Nextafter32(m, 0), math.Nextafter32(m, float32(math.Inf(1))))
	}
	return out
}

func TestRoundingBruteForce(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			n := newNearest(f)
			bad := 0
			for _, x := range samples(n) {
				got := f.encode(x)
				if math.IsNaN(float64(x)) {
					if !math.IsNaN(f.value(got)) || got>>15 != uint16(math.Float32bits(x)>>31) {
						t.Errorf("%s(%#08x) = %#04x, not a NaN of the same sign", f.name, math.Float32bits(x), got)
					}
					continue
				}
				want := n.round(math.Abs(float64(x)))
				if math.Signbit(float64(x)) {
					want |= 0x8000
				}
				if got != want {
					if bad++; bad <= 10 {
						t.Errorf("%s(%v = %#08x) = %#04x, want %#04x", f.name, x, math.Float32bits(x), got, want)
					}
				}
			}
		})
	}
}

func widen(in []float32, f func(float32) float32) []float32 {
	out := make([]float32, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}

// TestCastKernel checks the device's Cast against the conversions.
func TestCastKernel(t *testing.T) {
	in := []float32{1, -2, 1 + 0x1p-8, 1 + 3*0x1p-8, 1 + 0x1p-11, 65520, 1e10, 0x1p-25, 1.5 * 0x1p-24,
		math.Float32frombits(1), float32(math.NaN()), float32(math.Inf(-1)), 3.14159}
	n := int64(len(in))
	enc := func(dt ir.DType, f func(i int) float64) []byte {
		x := make([]float64, n)
		for i := range x {
			x[i] = f(i)
		}
		b := make([]byte, n*dt.Size())
		encode64(dt, x, b)
		return b
	}
	fp32 := f32Bytes(in...)
	bf16 := make([]byte, 2*n)
	fp16 := make([]byte, 2*n)
	for i, x := range in {
		binary.LittleEndian.PutUint16(bf16[2*i:], bf16FromF32(x))
		binary.LittleEndian.PutUint16(fp16[2*i:], fp16FromF32(x))
	}
	// 1 + 2^-8 + 2^-30 rounds to bf16 1 + 2^-7 directly, but to 1 through
	// fp32, as the host backend rounds it.
	fp64 := make([]byte, 8)
	binary.LittleEndian.PutUint64(fp64, math.Float64bits(1+0x1p-8+0x1p-30))

	for _, c := range []struct {
		name   string
		st, dt ir.DType
		src    []byte
		want   []byte
	}{
		{"fp32 to bf16", ir.FP32, ir.BF16, fp32, bf16},
		{"fp32 to fp16", ir.FP32, ir.FP16, fp32, fp16},
		{"bf16 to fp32", ir.BF16, ir.FP32, bf16, f32Bytes(widen(in, func(x float32) float32 { return f32FromBF16(bf16FromF32(x)) })...)},
		{"fp16 to fp32", ir.FP16, ir.FP32, fp16, f32Bytes(widen(in, func(x float32) float32 { return f32FromFP16(fp16FromF32(x)) })...)},
		{"fp32 to fp64", ir.FP32, ir.FP64, fp32, enc(ir.FP64, func(i int) float64 { return float64(in[i]) })},
		{"bf16 to fp16", ir.BF16, ir.FP16, bf16, enc(ir.FP16, func(i int) float64 { return float64(f32FromBF16(bf16FromF32(in[i]))) })},
		{"fp64 to bf16 through fp32", ir.FP64, ir.BF16, fp64, []byte{0x80, 0x3f}},
		{"fp64 to fp32", ir.FP64, ir.FP32, fp64, f32Bytes(1 + 0x1p-8)},
		{"int32 to int32 copies", ir.INT32, ir.INT32, []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{"fp8 to fp8 copies", ir.FP8E4M3, ir.FP8E4M3, []byte{0x7f, 0x01}, []byte{0x7f, 0x01}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDevice(t)
			s := must(d.NewStream(0))
			src := must(d.Alloc(int64(len(c.src))))
			dst := must(d.Alloc(int64(len(c.want))))
			ok(t, d.Upload(src, c.src, s))
			ok(t, d.Cast(dst, c.dt, src, c.st, int64(len(c.src))/c.st.Size(), s))
			ok(t, drain(t, d, s))
			if got := download(t, d, dst, len(c.want)); !bytes.Equal(got, c.want) {
				t.Errorf("got % x\nwant % x", got, c.want)
			}
		})
	}

	d := newDevice(t)
	s := must(d.NewStream(0))
	p := must(d.Alloc(64))
	for _, c := range []struct{ st, dt ir.DType }{{ir.INT32, ir.FP32}, {ir.FP32, ir.FP8E4M3}, {ir.INT8, ir.UINT8}, {ir.DTypeInvalid, ir.DTypeInvalid}} {
		wantErr(t, d.Cast(p, c.dt, p+32, c.st, 4, s), ErrInvalidValue, c.st.String())
	}
}

// The scalar conversions the tests above pin, through the device's
// encodings (the host backend's).
func bf16FromF32(f float32) uint16 {
	var b [2]byte
	encode32(ir.BF16, []float32{f}, b[:])
	return binary.LittleEndian.Uint16(b[:])
}

func f32FromBF16(h uint16) float32 {
	var out [1]float32
	decode32(ir.BF16, binary.LittleEndian.AppendUint16(nil, h), out[:])
	return out[0]
}

func fp16FromF32(f float32) uint16 {
	var b [2]byte
	encode32(ir.FP16, []float32{f}, b[:])
	return binary.LittleEndian.Uint16(b[:])
}

func f32FromFP16(h uint16) float32 {
	var out [1]float32
	decode32(ir.FP16, binary.LittleEndian.AppendUint16(nil, h), out[:])
	return out[0]
}
