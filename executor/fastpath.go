package executor

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/fsdpc/fsdpc/ir"
)

// Fast paths of the host backend's reductions for the dtypes FSDP reduces
// in. They compute exactly what reducer does (the reference keeps using
// reducer, so every test cross-checks them): a float32 operation in Go is
// correctly rounded, as the float64-then-round arithmetic of reducer is
// for float32 operands, and explicit conversions keep products from being
// fused into additions.

var fp16Table = sync.OnceValue(func() []float32 {
	t := make([]float32, 1<<16)
	for i := range t {
		t[i] = f32FromFP16(uint16(i))
	}
	return t
})

// decode32 widens n elements of dt to float32.
func decode32(dt ir.DType, b []byte, out []float32) {
	switch dt {
	case ir.FP32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case ir.BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	case ir.FP16:
		t := fp16Table()
		for i := range out {
			out[i] = t[binary.LittleEndian.Uint16(b[2*i:])]
		}
	}
}

func encode32(dt ir.DType, in []float32, b []byte) {
	switch dt {
	case ir.FP32:
		for i, x := range in {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
	case ir.BF16:
		for i, x := range in {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(x)>>16)) // already rounded
		}
	case ir.FP16:
		for i, x := range in {
			binary.LittleEndian.PutUint16(b[2*i:], fp16FromF32(x))
		}
	}
}

// rbf16 and rfp16 round a float32 to bf16 and fp16, staying in float32.
func rbf16(f float32) float32 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return f
	}
	return math.Float32frombits((b + 0x7fff + (b>>16)&1) &^ 0xffff)
}

func rfp16(t []float32, f float32) float32 { return t[fp16FromF32(f)] }

func fastReducible(dt ir.DType) bool { return dt == ir.FP32 || dt == ir.BF16 || dt == ir.FP16 }

// reduce32 folds n elements at element offset off of every input, in
// order, into out, as reducer does. One loop per dtype keeps the rounding
// inlined.
func reduce32(r reducer, inputs [][]byte, off int64, n int, out []byte) {
	dt := r.dt
	sz := dt.Size()
	s := float32(r.s)
	acc := make([]float32, n)
	x := make([]float32, n)
	t := fp16Table()
	for j, in := range inputs {
		decode32(dt, in[off*sz:], x)
		if r.premul {
			switch dt {
			case ir.FP32:
				for e := range x {
					x[e] = float32(x[e] * s)
				}
			case ir.BF16:
				for e := range x {
					x[e] = rbf16(float32(x[e] * s))
				}
			case ir.FP16:
				for e := range x {
					x[e] = rfp16(t, float32(x[e]*s))
				}
			}
		}
		if j == 0 {
			copy(acc, x)
			continue
		}
		switch dt {
		case ir.FP32:
			for e := range acc {
				acc[e] = float32(acc[e] + x[e])
			}
		case ir.BF16:
			for e := range acc {
				acc[e] = rbf16(float32(acc[e] + x[e]))
			}
		case ir.FP16:
			for e := range acc {
				acc[e] = rfp16(t, float32(acc[e]+x[e]))
			}
		}
	}
	encode32(dt, acc, out)
}
