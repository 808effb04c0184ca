package gpu

import (
	"fmt"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Launch enqueues one operation of the program on a rank's stream,
// bracketed by the timing events of the measured step.
func (b *Backend) Launch(rk int, s schedule.Stream, k *executor.Kernel, a executor.Args) {
	if b.Failed() {
		return
	}
	r := b.ranks[rk]
	if !b.enter(r, a.Step) {
		return
	}
	if s == schedule.StreamHost {
		// The CPU's own work (the offloaded optimizer): the stand-in
		// takes the modelled time on this rank's CPU.
		time.Sleep(b.modelled(k))
		return
	}
	st := r.stream(s)
	b.meas.begin(r, s, k.Op, a.Step)
	if err := b.launch(r, st, s, k, a); err != nil {
		b.Abort(executor.Failure{Kind: failureKind(err), Rank: rk, Stream: s, Step: a.Step, Op: k.Op, What: b.describe(k.Op) + ": " + err.Error()})
		return
	}
	b.meas.end(r, s, k.Op, a.Step)
}

func (b *Backend) launch(r *rank, st Stream, s schedule.Stream, k *executor.Kernel, a executor.Args) error {
	operandOf := func(arg int) (*mem, error) {
		m, _ := a.Mem[arg].(*mem)
		if m == nil {
			return nil, fmt.Errorf("%w: no %s operand", errProtocol, [...]string{"target", "source", "first used", "second used", "gradient"}[arg])
		}
		return m, nil
	}
	checked := a.Step < b.opt.CheckSteps
	switch k.Kind {
	case schedule.OpCopyIn, schedule.OpCopyOut, schedule.OpReshard, schedule.OpReduceCopyIn:
		return b.moves(r, st, k, a)
	case schedule.OpH2D, schedule.OpD2H:
		dst, err := operandOf(executor.ArgDst)
		if err != nil {
			return err
		}
		src, err := operandOf(executor.ArgSrc)
		if err != nil {
			return err
		}
		if dst.bytes != src.bytes {
			return fmt.Errorf("%w: copies %d bytes into %d", errProtocol, src.bytes, dst.bytes)
		}
		return b.dev.Copy(dst.ptr, src.ptr, dst.bytes, st)
	case schedule.OpForward, schedule.OpBackward:
		if checked {
			if err := b.checkGathered(r, st, k, a); err != nil {
				return err
			}
		}
		if err := b.standIn(st, k); err != nil {
			return err
		}
		// What the segment writes: activations, gradients, scratch. The
		// pattern makes every rank's gradients differ, so a reduction
		// that mixes up ranks or chunks shows.
		seed := uint64(r.rank)<<48 ^ uint64(k.Micro)<<40 ^ uint64(a.Step)<<32 ^ uint64(k.Module)
		if dst, _ := a.Mem[executor.ArgDst].(*mem); dst != nil {
			return b.fill(dst, k.DType, seed, st)
		}
		return nil
	case schedule.OpOptimizer:
		// The stand-in: the parameters stay as they are (doc.go).
		return b.standIn(st, k)
	case schedule.OpDivide:
		dst, err := operandOf(executor.ArgDst)
		if err != nil {
			return err
		}
		return b.dev.Divide(dst.ptr, k.DType, dst.bytes/k.DType.Size(), k.Factor, st)
	case schedule.OpCastGrad, schedule.OpAccumulate:
		dst, err := operandOf(executor.ArgDst)
		if err != nil {
			return err
		}
		src, err := operandOf(executor.ArgSrc)
		if err != nil {
			return err
		}
		n := dst.bytes / k.DType.Size()
		if src.bytes/k.SrcDType.Size() != n {
			return fmt.Errorf("%w: source and target do not hold the same elements", errProtocol)
		}
		if k.Kind == schedule.OpAccumulate && k.Accumulate {
			return b.dev.Add(dst.ptr, k.DType, src.ptr, k.SrcDType, n, st)
		}
		return b.dev.Cast(dst.ptr, k.DType, src.ptr, k.SrcDType, n, st)
	case schedule.OpAllGather, schedule.OpReduceScatter, schedule.OpAllReduce:
		return b.collective(r, st, s, k, a, checked)
	}
	return fmt.Errorf("no device kernel for %s", k.Kind)
}

// moves runs a copy kernel's runs: device copies where the dtypes agree,
// casts where they differ.
func (b *Backend) moves(r *rank, st Stream, k *executor.Kernel, a executor.Args) error {
	moves, zero, ok := k.Moves(r.shard)
	if !ok {
		return fmt.Errorf("no moves for %s", k.Kind)
	}
	dst, _ := a.Mem[executor.ArgDst].(*mem)
	src, _ := a.Mem[executor.ArgSrc].(*mem)
	if dst == nil || src == nil {
		return fmt.Errorf("%w: lacks a source or target", errProtocol)
	}
	if zero {
		if err := b.dev.Memset(dst.ptr, 0, dst.bytes, st); err != nil {
			return err
		}
	}
	runs := make([]Run, 0, len(moves))
	for _, m := range moves {
		if m.DstOff+m.N*m.DstDType.Size() > dst.bytes || m.SrcOff+m.N*m.SrcDType.Size() > src.bytes {
			return fmt.Errorf("%w: a run of %d %s elements at byte %d does not fit the %d-byte source or the %d-byte target", errProtocol, m.N, m.SrcDType, m.SrcOff, src.bytes, dst.bytes)
		}
		runs = append(runs, Run{DstOff: m.DstOff, SrcOff: m.SrcOff, DstDType: m.DstDType, SrcDType: m.SrcDType, N: m.N})
	}
	if len(runs) == 0 {
		return nil
	}
	// One device call for the op's runs (one per tensor, often hundreds
	// of bytes each), not one per run.
	return b.dev.Moves(dst.ptr, src.ptr, runs, st)
}

// standIn occupies the stream for the op's modelled duration, or burns
// its FLOPs.
func (b *Backend) standIn(st Stream, k *executor.Kernel) error {
	if b.opt.StandIn == BurnStandIn {
		if o := &b.plan.Ops[k.Op]; o.FLOPs > 0 {
			return b.dev.Burn(o.FLOPs, st)
		}
	}
	if d := b.modelled(k); d > 0 {
		return b.dev.Spin(d, st)
	}
	return nil
}

// modelled is an op's duration on the cost model.
func (b *Backend) modelled(k *executor.Kernel) time.Duration {
	return time.Duration(b.mdl.OpDuration(b.plan, &b.plan.Ops[k.Op]) * 1e9)
}

// fill writes the pattern into a block of dtype dt, or, for a dtype the
// fill kernel does not write (or a block that is not whole elements of
// it), a byte derived from the seed.
func (b *Backend) fill(m *mem, dt ir.DType, seed uint64, st Stream) error {
	switch dt {
	case ir.FP64, ir.FP32, ir.BF16, ir.FP16:
		if m.bytes%dt.Size() == 0 {
			return b.dev.Fill(m.ptr, dt, m.bytes/dt.Size(), seed, st)
		}
	}
	return b.dev.Memset(m.ptr, byte(splitmix64(seed)&0x3f), m.bytes, st)
}
