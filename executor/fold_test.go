package executor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// foldEdges are bit patterns each dtype's fold must get right: zeros of
// both signs, the smallest and largest subnormals, the smallest normal,
// the largest finite, infinities, quiet and signalling NaNs with payloads
// of both signs, and values whose sums round on a tie.
var foldEdges = map[ir.DType][]uint32{
	ir.BF16: {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x7f80, 0xff80,
		0x7fc0, 0xffc0, 0x7fc5, 0x7f81, 0xff81, 0x3f80, 0x3b80, 0x3f81, 0x3c00, 0xbf80, 0x4000},
	ir.FP16: {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00,
		0x7e00, 0xfe00, 0x7e05, 0x7c01, 0xfc01, 0x3c00, 0x1400, 0x3c01, 0x1000, 0xbc00, 0x7800},
	ir.FP32: {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000, 0x7f7fffff,
		0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7fc00005, 0x7f800001,
		0xff800001, 0x3f800000, 0x33800000, 0x3f800001, 0x34000000, 0xbf800000, 0x7f000000},
}

// foldInput fills a row of m elements: a mix of edge patterns, random bits
// (every exponent, NaNs included), values of nearby magnitudes whose sums
// often tie, and, where poison is set, one all-ones element.
func foldInput(r *rand.Rand, dt ir.DType, m int, poison bool) []byte {
	b := make([]byte, m*int(dt.Size()))
	edges := foldEdges[dt]
	for e := range m {
		var bits uint32
		switch r.IntN(4) {
		case 0:
			bits = edges[r.IntN(len(edges))]
		case 1:
			bits = r.Uint32()
		default:
			// Exponents within 2 of 1.0, random mantissas: sums land on
			// ties to even often.
			v := (1 + r.Float64()) * math.Ldexp(1, r.IntN(5)-2)
			if r.IntN(2) == 0 {
				v = -v
			}
			store(dt, b, int64(e), v)
			continue
		}
		switch dt {
		case ir.FP32:
			binary.LittleEndian.PutUint32(b[4*e:], bits)
		default:
			if bits&0xffff == 0xffff {
				bits = 0xfffe // no poison unless asked for
			}
			binary.LittleEndian.PutUint16(b[2*e:], uint16(bits))
		}
	}
	if dt == ir.FP32 {
		for e := range m {
			if binary.LittleEndian.Uint32(b[4*e:]) == math.MaxUint32 {
				binary.LittleEndian.PutUint32(b[4*e:], 0xfffffffe)
			}
		}
	}
	if poison {
		i := r.IntN(m) * int(dt.Size())
		for k := range dt.Size() {
			b[i+int(k)] = poisonByte
		}
	}
	return b
}

// TestFoldAVX2MatchesGo: the assembly folds (fold_amd64.s) compute, bit
// for bit, what the Go loops compute, on random and edge inputs in every
// fold mode, and flag poison exactly where a scan finds it. Go does not
// say whose payload a NaN plus a NaN carries (x86 returns its first
// operand's and the compiler orders operands as it likes), so an element
// where one addition had two NaN operands must only be NaN in both.
func TestFoldAVX2MatchesGo(t *testing.T) {
	if !haveFoldSIMD {
		t.Skip("this CPU lacks AVX2 or F16C: the Go loops are the only path")
	}
	defer func() { useFoldSIMD = haveFoldSIMD }()
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []ir.DType{ir.BF16, ir.FP16, ir.FP32} {
		for _, red := range []reducer{
			{dt: dt},
			{dt: dt, premul: true, s: roundTo(dt, 1.0/3)},
			{dt: dt, premul: true, s: roundTo(dt, 1.0/8)},
			{dt: dt, premul: true, s: roundTo(dt, 3e4)},  // overflows bf16/fp16 sums
			{dt: dt, premul: true, s: roundTo(dt, 1e-6)}, // subnormal products
			{dt: dt, premul: true, s: 0x1p-20},           // exact products, and subnormal ones
		} {
			for _, n := range []int{1, 2, 3, 8} {
				for _, m := range []int{8, 13, 3*reduceBlock + 21} {
					poison := m == 13 && n == 3
					inputs := make([][]byte, n)
					for j := range inputs {
						inputs[j] = foldInput(r, dt, m, poison && j == 1)
					}
					want := make([]byte, m*int(dt.Size()))
					got := make([]byte, len(want))
					useFoldSIMD = false
					wantP := reduce32(red, inputs, 0, m, want)
					useFoldSIMD = true
					gotP := reduce32(red, inputs, 0, m, got)
					if gotP != poison || wantP != poison {
						t.Fatalf("%s premul %v s %v, %d inputs of %d: poison flagged %v (Go loops %v), want %v", dt, red.premul, red.s, n, m, gotP, wantP, poison)
					}
					exact := 0
					for e := range int64(m) {
						g, w := rawBits(dt, got, e), rawBits(dt, want, e)
						if g == w {
							if !twoNaNs(red, inputs, e) {
								exact++
							}
							continue
						}
						if twoNaNs(red, inputs, e) && math.IsNaN(load(dt, got, e)) && math.IsNaN(load(dt, want, e)) {
							continue
						}
						xs := make([]uint32, n)
						for j := range inputs {
							xs[j] = rawBits(dt, inputs[j], e)
						}
						t.Fatalf("%s premul %v s %v, %d inputs of %d, element %d: inputs %#x: assembly %#x, Go %#x", dt, red.premul, red.s, n, m, e, xs, g, w)
					}
					if exact < m/2 {
						t.Fatalf("%s premul %v, %d inputs of %d: only %d elements compared bit for bit", dt, red.premul, n, m, exact)
					}
				}
			}
		}
	}
}

func rawBits(dt ir.DType, b []byte, e int64) uint32 {
	if dt == ir.FP32 {
		return binary.LittleEndian.Uint32(b[4*e:])
	}
	return uint32(binary.LittleEndian.Uint16(b[2*e:]))
}

// twoNaNs says whether folding element e adds a NaN to a NaN.
func twoNaNs(red reducer, inputs [][]byte, e int64) bool {
	acc := red.first(load(red.dt, inputs[0], e))
	for _, in := range inputs[1:] {
		x := load(red.dt, in, e)
		if math.IsNaN(acc) && math.IsNaN(x) {
			return true
		}
		acc = red.next(acc, x)
	}
	return false
}

// hostCollective runs one reduce-scatter or all-reduce of dt over the
// ranks' inputs on a fresh host and returns its error.
func hostCollective(t *testing.T, kind schedule.OpKind, dt ir.DType, inputs [][]byte) error {
	t.Helper()
	n := len(inputs)
	h := NewHost()
	if err := h.Open(Topology{Replicate: 1, Shard: n, Steps: 1, Events: 1, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	k := &Kernel{Op: 0, Kind: kind, DType: dt, SrcDType: dt, Reduce: schedule.ReduceSum, PG: schedule.PGShard, PGSize: n}
	var wg sync.WaitGroup
	for r, in := range inputs {
		size := int64(len(in))
		if kind == schedule.OpReduceScatter {
			size /= int64(n)
		}
		dst, err := h.Alloc(r, schedule.PoolCompute, size)
		if err != nil {
			t.Fatal(err)
		}
		args := Args{Mem: [MaxArgs]Mem{dst}, Buf: [MaxArgs]int32{-1, -1, -1, -1, -1}}
		if kind == schedule.OpReduceScatter {
			src, err := h.Alloc(r, schedule.PoolCompute, int64(len(in)))
			if err != nil {
				t.Fatal(err)
			}
			h.Upload(r, src, in)
			args.Mem[1] = src
		} else {
			h.Upload(r, dst, in)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.Launch(r, schedule.StreamAllGather, k, args)
			h.Record(r, schedule.StreamAllGather, Event{0, 1}, 0)
			h.Synchronize(r, Event{0, 1}, 0)
		}()
	}
	wg.Wait()
	return h.err()
}

// TestCollectivePoisonNamed: a reduction whose input holds poison fails,
// naming the first rank (in group order) that holds it and that rank's
// first poisoned element, whether the fold flags it as it reads (bf16,
// fp16, fp32, in the assembly or in Go) or a scan finds it first (fp64).
func TestCollectivePoisonNamed(t *testing.T) {
	defer func() { useFoldSIMD = haveFoldSIMD }()
	// Many blocks per rank's chunk and a tail: split across the cores.
	const ranks, elems = 4, 4 * (20*reduceBlock + 8 + 3)
	for _, simd := range []bool{false, true} {
		useFoldSIMD = simd && haveFoldSIMD
		for _, dt := range []ir.DType{ir.BF16, ir.FP16, ir.FP32, ir.FP64} {
			for _, kind := range []schedule.OpKind{schedule.OpReduceScatter, schedule.OpAllReduce} {
				for _, at := range []int64{5, elems - 1, 3 * elems / 4} {
					inputs := make([][]byte, ranks)
					for r := range inputs {
						inputs[r] = make([]byte, elems*dt.Size())
						for e := range int64(elems) {
							store(dt, inputs[r], e, float64(e%7)-3)
						}
					}
					// Rank 2 is poisoned at at and in the middle, rank 3 at
					// its start; only the last element is in a tail the Go
					// loops fold.
					poisons := []struct{ rank, e int64 }{{2, at}, {2, elems/2 + 1}, {3, 1}}
					first := min(at, elems/2+1)
					for _, p := range poisons {
						for k := range dt.Size() {
							inputs[p.rank][p.e*dt.Size()+k] = poisonByte
						}
					}
					err := hostCollective(t, kind, dt, inputs)
					var fe *FailureError
					if !errors.As(err, &fe) || len(fe.Failures) != 1 || fe.Failures[0].Kind != PoisonedRead || fe.Failures[0].Rank != 2 ||
						!strings.Contains(fe.Failures[0].What, fmt.Sprintf("reads poisoned memory: element %d of", first)) {
						t.Errorf("simd %v: %s %s poisoned at rank 2 element %d: %v", useFoldSIMD, kind, dt, first, err)
					}
					// The same inputs without poison reduce.
					for _, p := range poisons {
						store(dt, inputs[p.rank], p.e, 1)
					}
					if err := hostCollective(t, kind, dt, inputs); err != nil {
						t.Errorf("simd %v: %s %s without poison: %v", useFoldSIMD, kind, dt, err)
					}
				}
			}
		}
	}
}

// TestAllReducePoisonAfterWrites: an all-reduce writes each block as soon
// as it is folded, so a sum can be on the outputs before a later block's
// poison is read. A signalling NaN input whose quieted sum is the poison
// pattern (all ones) in an early block must not be named: the report is
// the true poison, read where nothing was written.
func TestAllReducePoisonAfterWrites(t *testing.T) {
	defer func() { useFoldSIMD = haveFoldSIMD }()
	const ranks, elems = 4, 48*reduceBlock + 100
	quietsToPoison := map[ir.DType]uint32{ir.FP32: 0xffbfffff, ir.BF16: 0xffbf, ir.FP16: 0xfdff}
	for _, simd := range []bool{false, true} {
		useFoldSIMD = simd && haveFoldSIMD
		for dt, nan := range quietsToPoison {
			inputs := make([][]byte, ranks)
			for r := range inputs {
				inputs[r] = make([]byte, elems*dt.Size())
				for e := range int64(elems) {
					store(dt, inputs[r], e, float64(e%5))
				}
			}
			if dt == ir.FP32 {
				binary.LittleEndian.PutUint32(inputs[0][4*2:], nan)
			} else {
				binary.LittleEndian.PutUint16(inputs[0][2*2:], uint16(nan))
			}
			const at = 35*reduceBlock + 1 // in the second core's half
			for k := range dt.Size() {
				inputs[3][at*dt.Size()+k] = poisonByte
			}
			err := hostCollective(t, schedule.OpAllReduce, dt, inputs)
			var fe *FailureError
			if !errors.As(err, &fe) || fe.Failures[0].Kind != PoisonedRead || fe.Failures[0].Rank != 3 ||
				!strings.Contains(fe.Failures[0].What, fmt.Sprintf("element %d of", at)) {
				t.Errorf("simd %v: %s all-reduce poisoned at rank 3 element %d: %v", useFoldSIMD, dt, at, err)
			}
		}
	}
}

// BenchmarkFold is reduce32 over 8 inputs small enough to stay in the L2
// cache (per input byte): the fold's arithmetic without memory stalls,
// next to the collective benchmarks, which stream from memory.
func BenchmarkFold(b *testing.B) {
	const ranks, m = 8, 8 * reduceBlock
	for _, c := range []struct {
		name string
		red  reducer
	}{
		{"fp32-avg", reducer{dt: ir.FP32, premul: true, s: 1.0 / 8}},
		{"bf16-avg", reducer{dt: ir.BF16, premul: true, s: 1.0 / 8}},
		{"fp16-sum", reducer{dt: ir.FP16}},
	} {
		b.Run(c.name, func(b *testing.B) {
			dt := c.red.dt
			inputs := make([][]byte, ranks)
			for j := range inputs {
				inputs[j] = make([]byte, m*dt.Size())
				for e := range int64(m) {
					store(dt, inputs[j], e, float64(e%97)/97)
				}
			}
			out := make([]byte, m*dt.Size())
			b.SetBytes(int64(ranks * m * dt.Size()))
			for b.Loop() {
				reduce32(c.red, inputs, 0, m, out)
			}
		})
	}
}
