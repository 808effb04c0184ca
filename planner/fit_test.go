package planner

import (
	"testing"

	"github.com/fsdpc/fsdpc/ir"
)

// TestFitIsTheEdge: the micro-batch and sequence Fit reports fit the
// budget and the next value tried does not, each checked by planning it
// directly (Plan's own budget check).
func TestFitIsTheEdge(t *testing.T) {
	// At 4,096 tokens: at the zoo model's 8,192 an eager block without
	// checkpointing keeps 26 hidden-wide bf16 tensors per token (its
	// RMSNorms' fp32 copies among them, bench/torchmem/blockmem.py), and
	// micro-batch 1 no longer fits an 80 GB H100.
	m, err := loadZoo(t, "llama3-8b").Relower(func(x *ir.Model) { x.Train.SeqLen = 4096 })
	if err != nil {
		t.Fatal(err)
	}
	modes := []ir.Checkpointing{ir.CheckpointNone, ir.CheckpointFull}
	r, err := Fit(m, FitOptions{Modes: modes, SeqStep: 1024})
	if err != nil {
		t.Fatal(err)
	}
	fits := func(mode ir.Checkpointing, batch, seq int64) bool {
		mm, err := m.Relower(func(x *ir.Model) {
			x.Train.Checkpointing, x.Train.CheckpointingSet = mode, true
			x.Train.MicroBatch, x.Train.SeqLen = batch, seq
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Plan(mm, Options{})
		if err != nil && !isBudgetError(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	for _, res := range r.Results {
		if res.MicroBatch < 1 || res.SeqLen < 1024 || res.BatchCapped || res.SeqCapped {
			t.Fatalf("%s: micro-batch %d, sequence %d: the 8B model fits both on 8 H100s", res.Mode, res.MicroBatch, res.SeqLen)
		}
		if !fits(res.Mode, res.MicroBatch, m.Train.SeqLen) || fits(res.Mode, res.MicroBatch+1, m.Train.SeqLen) {
			t.Errorf("%s: micro-batch %d is not the largest that fits", res.Mode, res.MicroBatch)
		}
		if !fits(res.Mode, m.Train.MicroBatch, res.SeqLen) || fits(res.Mode, m.Train.MicroBatch, res.SeqLen+1024) {
			t.Errorf("%s: sequence %d is not the longest that fits (in steps of 1024)", res.Mode, res.SeqLen)
		}
		if res.AtBatch.TokensPerGPU <= 0 || res.AtBatch.PeakReserved > m.Cluster.MemoryBudget {
			t.Errorf("%s: %+v", res.Mode, res.AtBatch)
		}
	}
	// Full checkpointing saves activations: it fits more.
	if none, full := r.Results[0], r.Results[1]; full.MicroBatch <= none.MicroBatch || full.SeqLen <= none.SeqLen {
		t.Errorf("full checkpointing fits micro-batch %d / sequence %d, none %d / %d", full.MicroBatch, full.SeqLen, none.MicroBatch, none.SeqLen)
	}
}

func TestLargest(t *testing.T) {
	for _, tc := range []struct{ lo, hi, step, edge, want int64 }{
		{1, 4096, 1, 37, 37},
		{1, 4096, 1, 0, 0},
		{1, 4096, 1, 1, 1},
		{1, 100, 1, 5000, 100},
		{128, 1 << 20, 128, 10000, 9984},
		{128, 1 << 20, 128, 100, 0},
	} {
		got, _, capped, err := largest(tc.lo, tc.hi, tc.step, func(v int64) (FitPoint, bool, error) { return FitPoint{}, v <= tc.edge, nil })
		if err != nil || got != tc.want || capped != (tc.edge >= tc.hi) {
			t.Errorf("largest(%d, %d, %d) with edge %d = %d capped %v, want %d", tc.lo, tc.hi, tc.step, tc.edge, got, capped, tc.want)
		}
	}
}
