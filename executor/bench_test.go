package executor

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Benchmarks of the host backend. Throughputs are reported as MB/s by the
// testing package (b.SetBytes): each collective benchmark sets the bytes
// its output holds over all ranks, and BenchmarkCopy copies as many bytes
// with copy(), the machine's memcpy, for the side-by-side comparison.
//
//	go test ./executor -run '^$' -bench . -benchtime 20x -count 5

const (
	benchRanks = 8
	benchBytes = 8 << 20 // per rank
)

// collectiveBench runs one collective per iteration on every rank and
// waits for it.
func collectiveBench(b *testing.B, kind schedule.OpKind, dt ir.DType, op schedule.ReduceOp) {
	h := NewHost()
	if err := h.Open(Topology{Replicate: 1, Shard: benchRanks, Steps: 1, Events: 1, Timeout: time.Minute}); err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	k := &Kernel{Op: 0, Kind: kind, DType: dt, SrcDType: dt, Reduce: op, PG: schedule.PGShard, PGSize: benchRanks}
	args := make([]Args, benchRanks)
	for r := range args {
		out := int64(benchBytes)
		if kind == schedule.OpReduceScatter {
			out /= benchRanks
		}
		dst, _ := h.Alloc(r, schedule.PoolCompute, out)
		src, _ := h.Alloc(r, schedule.PoolCompute, benchBytes)
		data := make([]byte, benchBytes)
		for i := int64(0); i < benchBytes/dt.Size(); i++ {
			store(dt, data, i, float64(i%97)/97)
		}
		if kind != schedule.OpReduceScatter {
			h.Upload(r, dst, data)
		} else {
			h.Upload(r, src, data)
		}
		args[r] = Args{Mem: [MaxArgs]Mem{dst, src}, Buf: [MaxArgs]int32{-1, -1, -1, -1, -1}}
	}
	b.SetBytes(benchRanks * benchBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for r := 0; r < benchRanks; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.Launch(r, schedule.StreamAllGather, k, args[r])
				h.Record(r, schedule.StreamAllGather, Event{0, i + 1}, 0)
				h.Synchronize(r, Event{0, i + 1}, 0)
			}()
		}
		wg.Wait()
		if h.Failed() {
			b.Fatal(h.err())
		}
		// The next iteration's input must be new, or the freshness check
		// would call it a repeated collective (it is off here, but keep
		// the benchmark honest about what it measures).
		for r := range args {
			blk := args[r].Mem[0].(*block)
			blk.writeSeq++
			if kind == schedule.OpReduceScatter {
				args[r].Mem[1].(*block).writeSeq++
			}
		}
	}
}

func BenchmarkAllGather(b *testing.B) {
	b.Run("bf16", func(b *testing.B) { collectiveBench(b, schedule.OpAllGather, ir.BF16, schedule.ReduceNone) })
}

func BenchmarkReduceScatter(b *testing.B) {
	b.Run("fp32-avg", func(b *testing.B) { collectiveBench(b, schedule.OpReduceScatter, ir.FP32, schedule.ReduceAvg) })
	b.Run("bf16-avg", func(b *testing.B) { collectiveBench(b, schedule.OpReduceScatter, ir.BF16, schedule.ReduceAvg) })
	b.Run("fp16-sum", func(b *testing.B) { collectiveBench(b, schedule.OpReduceScatter, ir.FP16, schedule.ReduceSum) })
}

func BenchmarkAllReduce(b *testing.B) {
	b.Run("fp32-sum", func(b *testing.B) { collectiveBench(b, schedule.OpAllReduce, ir.FP32, schedule.ReduceSum) })
	b.Run("bf16-avg", func(b *testing.B) { collectiveBench(b, schedule.OpAllReduce, ir.BF16, schedule.ReduceAvg) })
	b.Run("fp16-sum", func(b *testing.B) { collectiveBench(b, schedule.OpAllReduce, ir.FP16, schedule.ReduceSum) })
}

// BenchmarkCopy is the baseline: copy() of the bytes a collective
// benchmark sets, in per-rank chunks.
func BenchmarkCopy(b *testing.B) {
	src := make([][]byte, benchRanks)
	dst := make([][]byte, benchRanks)
	for r := range src {
		src[r], dst[r] = make([]byte, benchBytes), make([]byte, benchBytes)
		fillPoison(src[r])
	}
	b.SetBytes(benchRanks * benchBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range src {
			copy(dst[r], src[r])
		}
	}
}

// BenchmarkCast is the copy-in's and cast-grad's conversion, per source
// byte, next to copy() of the same source bytes.
func BenchmarkCast(b *testing.B) {
	const n = 4 << 20 // elements
	for _, c := range []struct{ from, to ir.DType }{{ir.FP32, ir.BF16}, {ir.FP32, ir.FP16}, {ir.BF16, ir.FP32}, {ir.FP32, ir.FP32}} {
		b.Run(fmt.Sprintf("%s-%s", c.from, c.to), func(b *testing.B) {
			src := make([]byte, n*c.from.Size())
			for i := int64(0); i < n; i++ {
				store(c.from, src, i, float64(i%1000)/7)
			}
			dst := make([]byte, n*c.to.Size())
			b.SetBytes(int64(len(src)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				castRange(c.from, src, 0, c.to, dst, 0, n)
			}
		})
	}
}

// BenchmarkStep405B runs the zoo's llama3.1-405b plan as compiled: 512
// ranks, HSDP 2 × 256, 129 groups, two micro-batches, at scale 1/16384
// (each layer's matrices shrink to one row per rank), and reports the
// median step time besides the whole run.
func BenchmarkStep405B(b *testing.B) {
	if testing.Short() {
		b.Skip("the 405B step takes tens of seconds")
	}
	p := zooPlan(b, "llama3.1-405b")
	var steps []time.Duration
	var ref time.Duration
	for i := 0; i < b.N; i++ {
		rep, err := Run(p, NewHost(), Options{Scale: 16384, Steps: 1, Timeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		steps = append(steps, rep.StepWall...)
		ref += rep.Times.Reference
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	b.ReportMetric(steps[len(steps)/2].Seconds(), "s/step")
	b.ReportMetric(ref.Seconds()/float64(b.N), "s/reference")
}

// BenchmarkStepGPT2 is the zoo's gpt2-124m plan (8 ranks, 13 groups, two
// micro-batches) at scale 1/32.
func BenchmarkStepGPT2(b *testing.B) {
	p := zooPlan(b, "gpt2-124m")
	var steps []time.Duration
	for i := 0; i < b.N; i++ {
		rep, err := Run(p, NewHost(), Options{Scale: 32, Steps: 1})
		if err != nil {
			b.Fatal(err)
		}
		steps = append(steps, rep.StepWall...)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	b.ReportMetric(steps[len(steps)/2].Seconds()*1e3, "ms/step")
}
