package planner

import (
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/ir"
)

// Fit answers "will it fit?" before a job is launched: for each
// activation-checkpointing mode, the largest micro-batch that fits the
// memory budget at the model's sequence length, and the longest sequence
// that fits at its micro-batch, each with the plan's predicted throughput.
// Every candidate is planned in full by Plan (the budget check is the
// planner's own: the simulated caching allocator's peak reserved memory
// against [cluster] memory_budget), with the model file's policy.
type FitOptions struct {
	// Modes are the checkpointing modes to try; nil: all four.
	Modes []ir.Checkpointing
	// MaxMicroBatch and MaxSeqLen bound the search; 0: 4,096 sequences
	// and 4,194,304 tokens.
	MaxMicroBatch, MaxSeqLen int64
	// SeqStep is the granularity of sequence lengths tried (0: 128).
	SeqStep int64
}

// FitResult is one mode's answer.
type FitResult struct {
	Mode ir.Checkpointing
	// MicroBatch is the largest micro-batch that fits at the model's
	// sequence length (0: not even 1 fits), with its plan's figures.
	MicroBatch int64
	AtBatch    FitPoint
	// SeqLen is the longest sequence (a multiple of SeqStep, or the
	// model's own) that fits at the model's micro-batch (0: none).
	SeqLen int64
	AtSeq  FitPoint
	// Capped says a search stopped at its bound, not at the budget.
	BatchCapped, SeqCapped bool
}

// FitPoint is a fitting plan's prediction.
type FitPoint struct {
	TokensPerGPU float64 // tokens/s per GPU
	StepTime     float64 // s
	PeakReserved int64
}

// FitReport is Fit's answer for every mode.
type FitReport struct {
	Model      string
	Budget     int64
	MicroBatch int64 // the model file's
	SeqLen     int64
	Results    []FitResult
	Planned    int // plans made
}

// Fit searches each mode's micro-batch and sequence length.
func Fit(m *ir.Model, opts FitOptions) (*FitReport, error) {
	if opts.MaxMicroBatch == 0 {
		opts.MaxMicroBatch = 4096
	}
	if opts.MaxSeqLen == 0 {
		opts.MaxSeqLen = 4 << 20
	}
	if opts.SeqStep == 0 {
		opts.SeqStep = 128
	}
	modes := opts.Modes
	if modes == nil {
		modes = []ir.Checkpointing{ir.CheckpointNone, ir.CheckpointSelective, ir.CheckpointSelectiveLayer, ir.CheckpointFull}
	}
	r := &FitReport{Model: m.Name, Budget: m.Cluster.MemoryBudget, MicroBatch: m.Train.MicroBatch, SeqLen: m.Train.SeqLen}
	for _, mode := range modes {
		res := FitResult{Mode: mode}
		try := func(batch, seq int64) (FitPoint, bool, error) {
			r.Planned++
			mm, err := m.Relower(func(x *ir.Model) {
				x.Train.Checkpointing, x.Train.CheckpointingSet = mode, true
				x.Train.MicroBatch, x.Train.SeqLen = batch, seq
			})
			if err != nil {
				// A setting the model cannot take (a sequence past its
				// positions) is as far as the search goes.
				return FitPoint{}, false, nil
			}
			p, err := Plan(mm, Options{scoreOnly: true, skipVerify: true})
			if err != nil {
				if isBudgetError(err) {
					return FitPoint{}, false, nil
				}
				return FitPoint{}, false, fmt.Errorf("%s, micro-batch %d, sequence %d: %w", mode, batch, seq, err)
			}
			tokens := float64(batch*seq*mm.Train.GradAccum) / p.Prediction.StepTime
			return FitPoint{TokensPerGPU: tokens, StepTime: p.Prediction.StepTime, PeakReserved: p.Prediction.PeakReserved}, true, nil
		}
		var err error
		res.MicroBatch, res.AtBatch, res.BatchCapped, err = largest(1, opts.MaxMicroBatch, 1, func(b int64) (FitPoint, bool, error) { return try(b, m.Train.SeqLen) })
		if err != nil {
			return nil, err
		}
		res.SeqLen, res.AtSeq, res.SeqCapped, err = largest(opts.SeqStep, opts.MaxSeqLen, opts.SeqStep, func(s int64) (FitPoint, bool, error) { return try(m.Train.MicroBatch, s) })
		if err != nil {
			return nil, err
		}
		r.Results = append(r.Results, res)
	}
	return r, nil
}

// largest finds the largest multiple of step in [lo, hi] for which fits
// holds, doubling from lo and then bisecting: memory grows with batch
// and sequence, so fitting is monotone. It returns 0 when lo does not fit.
func largest(lo, hi, step int64, fits func(int64) (FitPoint, bool, error)) (int64, FitPoint, bool, error) {
	best, at, ok, err := lo, FitPoint{}, false, error(nil)
	if at, ok, err = fits(lo); err != nil || !ok {
		return 0, FitPoint{}, false, err
	}
	bad := int64(0) // the smallest value known not to fit; 0: none yet
	for v := lo * 2; v <= hi; v *= 2 {
		pt, ok, err := fits(v)
		if err != nil {
			return 0, FitPoint{}, false, err
		}
		if !ok {
			bad = v
			break
		}
		best, at = v, pt
	}
	if bad == 0 {
		if best*2 > hi && best < hi {
			bad = hi + step
		} else {
			return best, at, true, nil
		}
	}
	for bad-best > step {
		mid := (best + bad) / 2 / step * step
		if mid <= best {
			break
		}
		pt, ok, err := fits(mid)
		if err != nil {
			return 0, FitPoint{}, false, err
		}
		if ok {
			best, at = mid, pt
		} else {
			bad = mid
		}
	}
	return best, at, bad > hi, nil
}

// WriteFit prints the report as a table.
func WriteFit(w io.Writer, r *FitReport) {
	fmt.Fprintf(w, "%s: memory budget %s per GPU; the file trains micro-batch %d at sequence %d\n\n", r.Model, ir.FormatBytes(r.Budget), r.MicroBatch, r.SeqLen)
	fmt.Fprintf(w, "%-16s %28s %14s %12s   %28s %14s %12s\n", "checkpointing", fmt.Sprintf("largest micro-batch (seq %d)", r.SeqLen), "tokens/s/GPU", "reserved",
		fmt.Sprintf("longest sequence (batch %d)", r.MicroBatch), "tokens/s/GPU", "reserved")
	cell := func(v int64, capped bool, pt FitPoint) (string, string, string) {
		if v == 0 {
			return "does not fit", "", ""
		}
		s := fmt.Sprintf("%d", v)
		if capped {
			s = "≥ " + s
		}
		return s, fmt.Sprintf("%.0f", pt.TokensPerGPU), ir.FormatBytes(pt.PeakReserved)
	}
	for _, res := range r.Results {
		b, bt, bm := cell(res.MicroBatch, res.BatchCapped, res.AtBatch)
		s, st, sm := cell(res.SeqLen, res.SeqCapped, res.AtSeq)
		fmt.Fprintf(w, "%-16s %28s %14s %12s   %28s %14s %12s\n", res.Mode, b, bt, bm, s, st, sm)
	}
	fmt.Fprintf(w, "\n%d plans made; a plan fits when the simulated caching allocator's peak reserved memory is within the budget.\n", r.Planned)
}
