package executor

import (
	"encoding/binary"
	"math"

	"github.com/fsdpc/fsdpc/ir"
)

// Numerics shared by the host backend's kernels and the reference: element
// encodings with IEEE round-to-nearest-even, written from the formats'
// definitions; the deterministic initial parameters, gradients and
// activation patterns; the optimizers.
//
// Arithmetic follows what GPU kernels do: values are widened, one
// operation is computed in the "op math" type (float32 for every dtype but
// fp64) and the result is rounded to the storage dtype. Computing a single
// +, −, ×, ÷ or √ of float32 operands in float64 and rounding to float32
// gives the correctly rounded float32 result, so the float64 code below is
// exactly float32 arithmetic where it rounds through float32.

// --- bf16 ------------------------------------------------------------------

// bf16FromF32 rounds a float32 to bfloat16 (1 sign, 8 exponent, 7 mantissa
// bits): drop the low 16 bits, rounding to nearest, ties to even. NaNs stay
// NaN (quietened); overflow rounds to infinity as IEEE requires.
func bf16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func f32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// --- fp16 ------------------------------------------------------------------

// fp16FromF32 rounds a float32 to IEEE binary16 (1 sign, 5 exponent, 10
// mantissa bits, bias 15), to nearest, ties to even, with subnormals and
// overflow to infinity.
func fp16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127
	if e > 15 {
		return sign | 0x7c00
	}
	if e >= -14 {
		h := uint32(e+15)<<10 | man>>13
		rest := man & 0x1fff
		if rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
			h++ // a carry into the exponent is right, up to infinity
		}
		return sign | uint16(h)
	}
	if exp == 0 {
		return sign // float32 subnormals are far below fp16's smallest
	}
	// A subnormal result: m × 2^-24 with m = full × 2^(e+1).
	full := man | 0x800000
	s := uint(-(e + 1))
	if s > 31 {
		return sign
	}
	m := full >> s
	rest := full & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rest > half || rest == half && m&1 == 1 {
		m++
	}
	return sign | uint16(m)
}

func f32FromFP16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// --- fp8 -------------------------------------------------------------------

// fp8 formats: e4m3fn (bias 7, no infinities, S.1111.111 is NaN, largest
// 448) and e5m2 (bias 15, IEEE-like with infinities).
type fp8Format struct {
	ebits, mbits, bias int
	finite             bool // e4m3fn: no infinities, overflow is NaN
}

var (
	fmtE4M3 = fp8Format{4, 3, 7, true}
	fmtE5M2 = fp8Format{5, 2, 15, false}
)

func (f fp8Format) maxFinite() float64 {
	if f.finite {
		// all-ones exponent is usable except the all-ones mantissa (NaN)
		return math.Ldexp(2-math.Ldexp(2, -f.mbits), (1<<f.ebits)-1-f.bias)
	}
	return math.Ldexp(2-math.Ldexp(1, -f.mbits), (1<<f.ebits)-2-f.bias)
}

func (f fp8Format) nan(sign uint8) uint8 {
	if f.finite {
		return sign | 0x7f
	}
	return sign | 0x7f // e5m2: exponent all ones, mantissa 11
}

// encode rounds an exactly-representable float32 value to nearest, ties to
// even.
func (f fp8Format) encode(x float64) uint8 {
	var sign uint8
	if math.Signbit(x) {
		sign = 0x80
	}
	if math.IsNaN(x) {
		return f.nan(sign)
	}
	a := math.Abs(x)
	inf := sign | uint8(((1<<f.ebits)-1)<<f.mbits)
	if math.IsInf(a, 0) {
		if f.finite {
			return f.nan(sign)
		}
		return inf
	}
	if a == 0 {
		return sign
	}
	minExp := 1 - f.bias
	_, e2 := math.Frexp(a) // a = frac × 2^e2, frac in [0.5, 1)
	e := e2 - 1
	if e < minExp {
		e = minExp
	}
	q := math.Ldexp(1, e-f.mbits) // the quantum at this exponent
	m := math.RoundToEven(a / q)
	if m >= float64(int(2)<<f.mbits) { // carry: 2^(mbits+1)
		e++
		m /= 2
	}
	if v := m * math.Ldexp(1, e-f.mbits); v > f.maxFinite() {
		if f.finite {
			return f.nan(sign)
		}
		return inf
	}
	if m < float64(int(1)<<f.mbits) { // subnormal
		return sign | uint8(m)
	}
	return sign | uint8((e+f.bias)<<f.mbits) | uint8(int(m)-(1<<f.mbits))
}

func (f fp8Format) decode(b uint8) float64 {
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	exp := int(b>>f.mbits) & (1<<f.ebits - 1)
	man := int(b) & (1<<f.mbits - 1)
	if exp == 1<<f.ebits-1 {
		if f.finite && man == 1<<f.mbits-1 {
			return math.NaN()
		}
		if !f.finite {
			if man != 0 {
				return math.NaN()
			}
			return sign * math.Inf(1)
		}
	}
	if exp == 0 {
		return sign * math.Ldexp(float64(man), 1-f.bias-f.mbits)
	}
	return sign * math.Ldexp(float64(man|1<<f.mbits), exp-f.bias-f.mbits)
}

// --- element access ----------------------------------------------------------

// supported reports whether the host backend can hold values of a dtype.
func supported(dt ir.DType) bool { return dt.Size() > 0 }

// roundTo returns v rounded to dt, as storing and loading it would.
func roundTo(dt ir.DType, v float64) float64 {
	switch dt {
	case ir.FP32:
		return float64(float32(v))
	case ir.BF16:
		b := math.Float32bits(float32(v))
		if b&0x7fffffff > 0x7f800000 {
			return v // NaN
		}
		return float64(math.Float32frombits((b + 0x7fff + (b>>16)&1) &^ 0xffff))
	case ir.FP64:
		return v
	case ir.FP16:
		return float64(f32FromFP16(fp16FromF32(float32(v))))
	case ir.FP8E4M3:
		return fmtE4M3.decode(fmtE4M3.encode(float64(float32(v))))
	case ir.FP8E5M2:
		return fmtE5M2.decode(fmtE5M2.encode(float64(float32(v))))
	}
	var b [8]byte
	store(dt, b[:], 0, v)
	return load(dt, b[:], 0)
}

// opRound rounds the result of one arithmetic operation on dt values: to
// float32 (op math) and then to dt.
func opRound(dt ir.DType, v float64) float64 { return roundTo(dt, v) }

// load reads element i of a little-endian dt array.
func load(dt ir.DType, b []byte, i int64) float64 {
	switch dt {
	case ir.FP32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case ir.BF16:
		return float64(f32FromBF16(binary.LittleEndian.Uint16(b[2*i:])))
	case ir.FP16:
		return float64(f32FromFP16(binary.LittleEndian.Uint16(b[2*i:])))
	case ir.FP64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	case ir.FP8E4M3:
		return fmtE4M3.decode(b[i])
	case ir.FP8E5M2:
		return fmtE5M2.decode(b[i])
	case ir.INT64:
		return float64(int64(binary.LittleEndian.Uint64(b[8*i:])))
	case ir.INT32:
		return float64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	case ir.INT8:
		return float64(int8(b[i]))
	case ir.UINT8, ir.BOOL:
		return float64(b[i])
	}
	panic("load: unsupported dtype " + dt.String())
}

// store writes v, rounded to nearest even, as element i of a dt array.
// Integers round to nearest and saturate.
func store(dt ir.DType, b []byte, i int64, v float64) {
	switch dt {
	case ir.FP32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case ir.BF16:
		binary.LittleEndian.PutUint16(b[2*i:], bf16FromF32(float32(v)))
	case ir.FP16:
		binary.LittleEndian.PutUint16(b[2*i:], fp16FromF32(float32(v)))
	case ir.FP64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	case ir.FP8E4M3:
		b[i] = fmtE4M3.encode(float64(float32(v)))
	case ir.FP8E5M2:
		b[i] = fmtE5M2.encode(float64(float32(v)))
	case ir.INT64:
		binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(clampInt(v, math.MinInt64, math.MaxInt64))))
	case ir.INT32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(clampInt(v, math.MinInt32, math.MaxInt32))))
	case ir.INT8:
		b[i] = uint8(int8(clampInt(v, math.MinInt8, math.MaxInt8)))
	case ir.UINT8:
		b[i] = uint8(clampInt(v, 0, math.MaxUint8))
	case ir.BOOL:
		if v != 0 {
			b[i] = 1
		} else {
			b[i] = 0
		}
	default:
		panic("store: unsupported dtype " + dt.String())
	}
}

func clampInt(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return math.Max(lo, math.Min(hi, math.RoundToEven(v)))
}

// isPoison reports whether element i of a dt array holds the poison
// pattern (all bits set: a NaN in every float format, at every alignment).
func isPoison(dt ir.DType, b []byte, i int64) bool {
	n := dt.Size()
	for _, x := range b[i*n : (i+1)*n] {
		if x != 0xff {
			return false
		}
	}
	return true
}

// poisonByte fills freed and fresh memory: 0xff bytes are a NaN as fp32,
// bf16, fp16, fp64 and fp8 at any alignment, so a read through any view of
// a dead block shows up.
const poisonByte = 0xff

func fillPoison(b []byte) {
	b = b[fillOnesSIMD(b):]
	if len(b) == 0 {
		return
	}
	b[0] = poisonByte
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// --- deterministic values --------------------------------------------------

// mix is splitmix64's finaliser: a bijection that spreads every input bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// nameHash is FNV-1a of a parameter name.
func nameHash(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return mix(h)
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// initValue is the initial value of element i (row-major, unpadded) of the
// parameter whose name hashes to nameH: uniform in [-0.5, 0.5).
func initValue(nameH uint64, i int64) float64 {
	return unit(mix(nameH^mix(uint64(i)+0x9e3779b97f4a7c15))) - 0.5
}

// gradSeed identifies one backward op's contribution: the rank that
// computes it, the micro-batch, the step and the op's ordinal among its
// group's backward ops in the micro-batch.
type gradSeed struct {
	rank, micro, step, ordinal int
}

// gradCoeffs are the per-contribution constants: the gradient of element i
// is round_c(u·a + b(i)) where u is the unsharded parameter value the rank
// read, so a wrong rank, micro-batch, step or a stale or wrong parameter
// changes it.
type gradCoeffs struct {
	a    float64
	seed uint64
}

func (s gradSeed) coeffs(nameH uint64) gradCoeffs {
	k := mix(uint64(s.rank)*0x9e3779b97f4a7c15 ^ mix(uint64(s.micro)<<32|uint64(s.step)) ^ uint64(s.ordinal)<<48 + 1)
	return gradCoeffs{a: 0.5 + unit(k), seed: mix(k ^ nameH)}
}

// grad computes one gradient element in op math, before rounding to the
// compute dtype.
func (c gradCoeffs) grad(u float64, i int64) float64 {
	h := (uint64(i) + c.seed) * 0x9e3779b97f4a7c15
	h ^= h >> 29
	b := (float64(h>>40)/(1<<24) - 0.5) * 0.25
	return float64(float32(u*c.a + b))
}

// actPatternK is an odd multiplier: consecutive words' products differ by
// it, so the pattern has no short period.
const actPatternK = 0xd6e8feb86659fd93

// actPattern is word w of an activation buffer written by a forward op.
func actPattern(seed uint64, w int64) uint32 {
	h := (uint64(w) + seed) * actPatternK
	return uint32(h>>32) ^ uint32(h)
}

func actSeed(rank, micro, step, module int) uint64 {
	return mix(uint64(rank)<<40 ^ uint64(micro)<<24 ^ uint64(step)<<12 ^ uint64(module) ^ 0x5bd1e995)
}

// --- optimizers ------------------------------------------------------------

// Optimizer hyper-parameters: PyTorch's defaults, except SGD's learning
// rate, which torch.optim.SGD requires the user to give.
const (
	adamLR, adamBeta1, adamBeta2, adamEps, adamWD = 1e-3, 0.9, 0.999, 1e-8, 0.01
	sgdLR, sgdMomentum                            = 1e-2, 0.9
	lionLR, lionBeta1, lionBeta2, lionWD          = 1e-4, 0.9, 0.99, 0.0
)

// optimizer is one update rule over elements: the parameter (in the
// original dtype), its gradient and its fp32 states.
type optimizer struct {
	name   string
	states int // fp32 states per element
	// update returns the new parameter and states, with step the 1-based
	// step count.
	update func(p, g float64, st []float64, step int) float64
}

func newOptimizer(name string) (*optimizer, bool) {
	f32 := func(v float64) float64 { return float64(float32(v)) }
	switch name {
	case "sgd", "adafactor":
		// Adafactor's factored moments are O(rows+cols) and not in the
		// plan; it runs as plain SGD (documented in docs/executor.md).
		return &optimizer{name: name, update: func(p, g float64, _ []float64, _ int) float64 {
			return f32(p - f32(sgdLR*g))
		}}, true
	case "sgd_momentum":
		return &optimizer{name: name, states: 1, update: func(p, g float64, st []float64, _ int) float64 {
			st[0] = f32(f32(sgdMomentum*st[0]) + g)
			return f32(p - f32(sgdLR*st[0]))
		}}, true
	case "adam", "adamw":
		wd := adamWD
		if name == "adam" {
			wd = 0 // torch.optim.Adam's default weight_decay
		}
		return &optimizer{name: name, states: 2, update: func(p, g float64, st []float64, step int) float64 {
			p = f32(p * f32(1-adamLR*wd))
			st[0] = f32(f32(adamBeta1*st[0]) + f32((1-adamBeta1)*g))
			st[1] = f32(f32(adamBeta2*st[1]) + f32(f32((1-adamBeta2)*g)*g))
			bc1 := 1 - math.Pow(adamBeta1, float64(step))
			bc2 := 1 - math.Pow(adamBeta2, float64(step))
			den := f32(f32(math.Sqrt(st[1])/math.Sqrt(bc2)) + adamEps)
			return f32(p - f32(f32(adamLR/bc1)*st[0]/den))
		}}, true
	case "lion":
		return &optimizer{name: name, states: 1, update: func(p, g float64, st []float64, _ int) float64 {
			c := f32(f32(lionBeta1*st[0]) + f32((1-lionBeta1)*g))
			p = f32(p * f32(1-lionLR*lionWD))
			var s float64
			switch {
			case c > 0:
				s = 1
			case c < 0:
				s = -1
			}
			st[0] = f32(f32(lionBeta2*st[0]) + f32((1-lionBeta2)*g))
			return f32(p - lionLR*s)
		}}, true
	}
	return nil, false
}

// applyUpdate runs the optimizer on one element whose parameter is stored
// in dt, and rounds the parameter back to dt.
func (o *optimizer) apply(dt ir.DType, p, g float64, st []float64, step int) float64 {
	return roundTo(dt, o.update(p, g, st, step))
}
