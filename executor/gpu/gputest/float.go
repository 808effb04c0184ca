package gputest

import (
	"encoding/binary"
	"math"

	"github.com/fsdpc/fsdpc/ir"
)

// Element encodings of the kernels' dtypes (little-endian), with IEEE
// round to nearest, ties to even: the same functions as the host
// backend's (executor/numerics.go), written again here.

// bf16FromF32 rounds a float32 to bfloat16: the top 16 bits, rounded on
// the low 16. NaN stays NaN (quietened); overflow rounds to infinity.
func bf16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	return uint16((b + 0x7fff + b>>16&1) >> 16)
}

func f32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// fp16FromF32 rounds a float32 to IEEE binary16 (5 exponent bits, bias
// 15, 10 mantissa bits), with subnormals; overflow goes to infinity.
func fp16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN: keep the top payload bits, quietened
		return sign | 0x7e00 | uint16(abs>>13&0x3ff)
	case abs >= 0x477ff000: // 65520, the largest finite plus half an ulp
		return sign | 0x7c00
	case abs >= 0x38800000: // 2^-14 and above: normal
		v := abs - 112<<23 // rebias the exponent from 127 to 15
		h, rest := v>>13, v&0x1fff
		if rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
			h++ // a carry into the exponent is right
		}
		return sign | uint16(h)
	case abs < 0x33000000: // below 2^-25: rounds to zero
		return sign
	}
	// Subnormal: the value in units of 2^-24 is full >> (126 - exponent).
	full := abs&0x7fffff | 0x800000
	shift := 126 - abs>>23
	m, rest, half := full>>shift, full&(1<<shift-1), uint32(1)<<(shift-1)
	if rest > half || rest == half && m&1 == 1 {
		m++ // up to 0x400, the smallest normal, is right
	}
	return sign | uint16(m)
}

func f32FromFP16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp, man := uint32(h>>10&0x1f), uint32(h&0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case 0:
		v := float32(man) / (1 << 24) // exact
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// kernelDType reports whether the arithmetic kernels handle dt.
func kernelDType(dt ir.DType) bool {
	return dt == ir.FP64 || dt == ir.FP32 || dt == ir.BF16 || dt == ir.FP16
}

// decode32 widens len(out) elements of dt to float32 (fp64 rounds to
// nearest even).
func decode32(dt ir.DType, b []byte, out []float32) {
	switch dt {
	case ir.FP64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	case ir.FP32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case ir.BF16:
		for i := range out {
			out[i] = f32FromBF16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case ir.FP16:
		for i := range out {
			out[i] = f32FromFP16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	default:
		panic("gputest: decode32 of " + dt.String())
	}
}

// encode32 rounds the values to dt and stores them.
func encode32(dt ir.DType, in []float32, b []byte) {
	switch dt {
	case ir.FP64:
		for i, v := range in {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(v)))
		}
	case ir.FP32:
		for i, v := range in {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	case ir.BF16:
		for i, v := range in {
			binary.LittleEndian.PutUint16(b[2*i:], bf16FromF32(v))
		}
	case ir.FP16:
		for i, v := range in {
			binary.LittleEndian.PutUint16(b[2*i:], fp16FromF32(v))
		}
	default:
		panic("gputest: encode32 of " + dt.String())
	}
}

// decode64 widens len(out) elements of dt to float64, exactly.
func decode64(dt ir.DType, b []byte, out []float64) {
	if dt == ir.FP64 {
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return
	}
	x := make([]float32, len(out))
	decode32(dt, b, x)
	for i, v := range x {
		out[i] = float64(v)
	}
}

// encode64 rounds the values to dt and stores them; to bf16 and fp16
// through float32, as the host backend does.
func encode64(dt ir.DType, in []float64, b []byte) {
	if dt == ir.FP64 {
		for i, v := range in {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
		}
		return
	}
	x := make([]float32, len(in))
	for i, v := range in {
		x[i] = float32(v)
	}
	encode32(dt, x, b)
}
