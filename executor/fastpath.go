package executor

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"unsafe"

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
// order, into out, as reducer does, and says whether any input element it
// read was the poison pattern. One loop per dtype keeps the rounding
// inlined.
func reduce32(r reducer, inputs [][]byte, off int64, n int, out []byte) (poison bool) {
	acc := make([]float32, min(n, reduceBlock))
	x := make([]float32, len(acc))
	for a := 0; a < n; a += reduceBlock {
		m := min(reduceBlock, n-a)
		if reduce32Block(r, inputs, off+int64(a), out[a*int(r.dt.Size()):], acc[:m], x[:m]) {
			poison = true
		}
	}
	return poison
}

// reduceBlock is how many elements reduce32 folds at a time: its two
// float32 scratch rows stay in the L1 cache while every input streams
// past them once.
const reduceBlock = 2048

// reduceParallel is reduce32 split across the cores: elements are
// independent and each one is still folded in rank order, so the result
// is bit-identical whatever the split.
func reduceParallel(r reducer, inputs [][]byte, off int64, n int, out []byte) (poison bool) {
	workers, per := splitReduce(n)
	if workers == 1 {
		return reduce32(r, inputs, off, n, out)
	}
	sz := int(r.dt.Size())
	found := make([]bool, workers)
	var wg sync.WaitGroup
	for w, a := 0, 0; a < n; w, a = w+1, a+per {
		m := min(per, n-a)
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[w] = reduce32(r, inputs, off+int64(a), m, out[a*sz:])
		}()
	}
	wg.Wait()
	for _, p := range found {
		poison = poison || p
	}
	return poison
}

// splitReduce divides n elements among the cores for reduceParallel and
// allReduceParallel: at most one worker per 4 of reduceBlock, each given
// per elements, a whole number of blocks (the last worker what is left).
func splitReduce(n int) (workers, per int) {
	workers = max(1, min(runtime.GOMAXPROCS(0), n/(4*reduceBlock)))
	per = (n + workers - 1) / workers
	per = (per + reduceBlock - 1) / reduceBlock * reduceBlock
	return workers, per
}

// allReduceParallel folds n elements of every input into each of outs
// (the same bytes as the inputs), split across the cores like
// reduceParallel: each core folds a cache-sized block of its range and
// writes it to every output before it reads the next, so the inputs are
// read once and the outputs written once, as a memcpy would.
//
// A core that reads poison in a block stops there, before writing it: no
// input held poison in the blocks it wrote, so every input's first poison
// lies in the ranges left unwritten, which it returns (in order) for the
// scan that names it; nil if no input held poison.
func allReduceParallel(r reducer, inputs [][]byte, n int, outs [][]byte) (unwritten [][2]int64) {
	workers, per := splitReduce(n)
	stops := make([][2]int64, workers)
	var wg sync.WaitGroup
	for w, a := 0, 0; a < n; w, a = w+1, a+per {
		m := min(per, n-a)
		stops[w] = [2]int64{int64(a + m), int64(a + m)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if stop := allReduceRange(r, inputs, a, m, outs); stop < a+m {
				stops[w][0] = int64(stop)
			}
		}()
	}
	wg.Wait()
	for _, s := range stops {
		if s[0] < s[1] {
			unwritten = append(unwritten, s)
		}
	}
	return unwritten
}

// allReduceRange is one core's share of allReduceParallel, elements a to
// a+m; it returns where it stopped (a+m unless it read poison).
func allReduceRange(r reducer, inputs [][]byte, a, m int, outs [][]byte) int {
	sz := int(r.dt.Size())
	k := min(m, reduceBlock)
	acc, x := make([]float32, k), make([]float32, k)
	sums := make([]byte, k*sz)
	for b := a; b < a+m; b += reduceBlock {
		k := min(reduceBlock, a+m-b)
		if reduce32Block(r, inputs, int64(b), sums, acc[:k], x[:k]) {
			return b
		}
		for _, o := range outs {
			copy(o[b*sz:(b+k)*sz], sums[:k*sz])
		}
	}
	return a + m
}

// Fold modes: how one input row enters the accumulators.
const (
	foldAdd         = iota // acc = round(acc + x)
	foldAddPremul          // acc = round(acc + round(x*s))
	foldFirst              // acc = x
	foldFirstPremul        // acc = round(x*s)
)

func foldMode(j int, premul bool) int {
	switch {
	case j == 0 && premul:
		return foldFirstPremul
	case j == 0:
		return foldFirst
	case premul:
		return foldAddPremul
	}
	return foldAdd
}

// reduce32Block folds len(acc) elements at element offset off; acc and x
// are scratch of that length, and says whether an input element it read
// was the poison pattern. The assembly folds (fold_amd64.s) take the
// largest whole number of their groups (simdElems) where the CPU has
// them and flag poison as they read; the Go loops fold the rest, which a
// scan checks for poison.
func reduce32Block(r reducer, inputs [][]byte, off int64, out []byte, acc, x []float32) (poison bool) {
	sz := r.dt.Size()
	if done := simdElems(r.dt, len(acc)); useFoldSIMD && done > 0 {
		for j, in := range inputs {
			if foldSIMD(r.dt, acc[:done], in[off*sz:], float32(r.s), foldMode(j, r.premul)) {
				poison = true
			}
		}
		storeSIMD(r.dt, acc[:done], out)
		if done == len(acc) {
			return poison
		}
		off += int64(done)
		out = out[int64(done)*sz:]
		acc, x = acc[done:], x[done:]
	}
	for _, in := range inputs {
		if poisoned(r.dt, in, off, int64(len(acc))) >= 0 {
			poison = true
		}
	}
	reduce32BlockGo(r, inputs, off, out, acc, x)
	return poison
}

// reduce32BlockGo is reduce32Block in Go alone.
func reduce32BlockGo(r reducer, inputs [][]byte, off int64, out []byte, acc, x []float32) {
	dt := r.dt
	sz := dt.Size()
	s := float32(r.s)
	if dt == ir.FP32 && nativeLittleEndian {
		reduceFP32Native(inputs, off, out, acc, r.premul, s)
		return
	}
	if dt == ir.BF16 && nativeLittleEndian {
		reduceBF16Native(inputs, off, out, acc, r.premul, s)
		return
	}
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

// nativeLittleEndian says the machine stores a float32 as the plan's
// little-endian bytes, so fp32 rows can be read in place.
var nativeLittleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// f32s views b as float32s in place (little-endian machines only).
func f32s(b []byte, n int) []float32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)[:n:n]
}

// reduceFP32Native is reduce32Block for fp32 without decoding: the rows
// are read in place, the same float32 operations in the same order.
func reduceFP32Native(inputs [][]byte, off int64, out []byte, acc []float32, premul bool, s float32) {
	n := len(acc)
	for j, in := range inputs {
		x := f32s(in[off*4:(off+int64(n))*4], n)
		switch {
		case j == 0 && premul:
			for e := range acc {
				acc[e] = float32(x[e] * s)
			}
		case j == 0:
			copy(acc, x)
		case premul:
			for e := range acc {
				acc[e] = float32(acc[e] + float32(x[e]*s))
			}
		default:
			for e := range acc {
				acc[e] = float32(acc[e] + x[e])
			}
		}
	}
	copy(f32s(out[:4*n], n), acc)
}

// u16s views b as uint16s in place (little-endian machines only).
func u16s(b []byte, n int) []uint16 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)[:n:n]
}

// bf16f widens a bf16 to the float32 it is.
func bf16f(v uint16) float32 { return math.Float32frombits(uint32(v) << 16) }

// reduceBF16Native is reduce32Block for bf16 in one pass per input: each
// element is widened, scaled, added and rounded where it is read, instead
// of decoding a row first, with the same float32 operations and roundings
// in the same order (TestFastReductionsMatchReducer).
func reduceBF16Native(inputs [][]byte, off int64, out []byte, acc []float32, premul bool, s float32) {
	n := len(acc)
	for j, in := range inputs {
		x := u16s(in[off*2:(off+int64(n))*2], n)
		switch {
		case j == 0 && premul:
			for e, v := range x {
				acc[e] = rbf16(float32(bf16f(v) * s))
			}
		case j == 0:
			for e, v := range x {
				acc[e] = bf16f(v)
			}
		case premul:
			for e, v := range x {
				acc[e] = rbf16(float32(acc[e] + rbf16(float32(bf16f(v)*s))))
			}
		default:
			for e, v := range x {
				acc[e] = rbf16(float32(acc[e] + bf16f(v)))
			}
		}
	}
	o := u16s(out[:2*n], n)
	for e, a := range acc {
		o[e] = uint16(math.Float32bits(a) >> 16) // already rounded
	}
}
