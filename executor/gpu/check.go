package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// The data check of a checked step. Stand-in compute leaves the
// parameters as they were, so:
//
//   - every forward and backward reads unsharded parameters that must equal
//     the reference's first step byte for byte: the copy-in casts, the
//     all-gather and the copy-out, checked where their data is used;
//   - every virtual collective's result must equal the host's
//     recomputation from the members' inputs, read before it runs, with
//     the reduction kernel's arithmetic (Device.Reduce): fp32
//     accumulation in rank order, one rounding.
//
// Checking synchronises the streams around each check, so a checked step's
// timings are not the plan's.

var errMismatch = errors.New("mismatch")

type checkStats struct {
	gathered, collectives, elements atomic.Int64
}

// Checked reports what the data check covered: gathered parameter reads,
// collectives and elements compared.
func (b *Backend) Checked() (gathered, collectives, elements int64) {
	return b.check.gathered.Load(), b.check.collectives.Load(), b.check.elements.Load()
}

// sync blocks until st has executed everything enqueued so far.
func (b *Backend) sync(r *rank, st Stream) error {
	if err := b.dev.Record(r.checkEv, st); err != nil {
		return err
	}
	return b.dev.SyncEvent(r.checkEv)
}

// checkGathered compares the unsharded parameters a compute op reads with
// the reference's.
func (b *Backend) checkGathered(r *rank, st Stream, k *executor.Kernel, a executor.Args) error {
	want := k.ExpectedGathered(0)
	src, _ := a.Mem[executor.ArgSrc].(*mem)
	if want == nil || src == nil {
		return nil
	}
	if src.bytes != int64(len(want)) {
		return fmt.Errorf("%w: reads %d bytes of unsharded parameters, the group has %d", errProtocol, src.bytes, len(want))
	}
	if err := b.sync(r, st); err != nil {
		return err
	}
	got := make([]byte, src.bytes)
	if err := b.dev.Download(got, src.ptr); err != nil {
		return err
	}
	b.check.gathered.Add(1)
	b.check.elements.Add(int64(len(got)))
	if bytes.Equal(got, want) {
		return nil
	}
	gl := k.Group
	for pi := range gl.Params {
		p := &gl.Params[pi]
		base := gl.W * p.GatherOffset
		n := gl.W * p.ShardNumel
		for e := int64(0); e < n; e++ {
			g := executor.LoadElement(p.Gather, got[base:], e)
			w := executor.LoadElement(p.Gather, want[base:], e)
			if math.Float64bits(g) != math.Float64bits(w) {
				return fmt.Errorf("%w: reads %s (rank %d's shard, element %d, %s) = %v where the reference gathers %v",
					errMismatch, p.Name, e/p.ShardNumel, e%p.ShardNumel, p.Gather, g, w)
			}
		}
	}
	return fmt.Errorf("%w: the unsharded parameters differ from the reference", errMismatch)
}

// snapshot reads a virtual collective's inputs once its members' streams
// have reached it.
func (b *Backend) snapshot(inst *vcoll) ([][]byte, error) {
	out := make([][]byte, len(inst.members))
	for i, m := range inst.members {
		arg := executor.ArgDst
		if m.k.Kind == schedule.OpReduceScatter {
			arg = executor.ArgSrc
		}
		src := operand(m, arg)
		if err := b.sync(m.r, m.st); err != nil {
			return nil, err
		}
		out[i] = make([]byte, src.bytes)
		if src.bytes > 0 {
			if err := b.dev.Download(out[i], src.ptr); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// checkVirtual compares a virtual collective's results with the host's.
func (b *Backend) checkVirtual(inst *vcoll, in [][]byte) error {
	m0 := inst.members[0]
	n := int64(len(inst.members))
	var want func(i int) []byte
	switch m0.k.Kind {
	case schedule.OpAllGather:
		c := int64(len(in[0])) / n
		whole := make([]byte, 0, len(in[0]))
		for j := range in {
			whole = append(whole, in[j][int64(j)*c:int64(j+1)*c]...)
		}
		want = func(int) []byte { return whole }
	case schedule.OpReduceScatter, schedule.OpAllReduce:
		dt := m0.k.DType
		scale, err := reduceScale(m0.k, int(n))
		if err != nil {
			return err
		}
		elems := int64(len(in[0])) / dt.Size()
		full := ReduceHost(in, elems, dt, scale)
		if m0.k.Kind == schedule.OpAllReduce {
			want = func(int) []byte { return full }
		} else {
			chunk := elems / n * dt.Size()
			want = func(i int) []byte { return full[int64(i)*chunk : int64(i+1)*chunk] }
		}
	default:
		return nil
	}
	for i, m := range inst.members {
		dst := operand(m, executor.ArgDst)
		if err := b.sync(m.r, m.st); err != nil {
			return err
		}
		got := make([]byte, dst.bytes)
		if dst.bytes > 0 {
			if err := b.dev.Download(got, dst.ptr); err != nil {
				return err
			}
		}
		w := want(i)
		b.check.elements.Add(int64(len(got)))
		if !bytes.Equal(got, w) {
			return fmt.Errorf("%w: %s on rank %d: %s", errMismatch, m.k.Kind, m.r.rank, firstDifference(got, w, m0.k.DType))
		}
	}
	b.check.collectives.Add(1)
	return nil
}

// ReduceHost is Device.Reduce on the host: out[e] = round_dt(Σ_j
// round32(in[j][e]·scale)), summed in float32 in the order of in.
func ReduceHost(in [][]byte, elems int64, dt ir.DType, scale float32) []byte {
	out := make([]byte, elems*dt.Size())
	for e := int64(0); e < elems; e++ {
		if dt == ir.FP64 {
			var acc float64
			for j := range in {
				// The conversion keeps the product rounded, as the kernel
				// does (Go may fuse x*y+z where it is not written out).
				acc += float64(executor.LoadElement(dt, in[j], e) * float64(scale))
			}
			executor.StoreElement(dt, out, e, acc)
			continue
		}
		var acc float32
		for j := range in {
			x := float32(executor.LoadElement(dt, in[j], e))
			p := float32(x * scale)
			acc = float32(acc + p)
		}
		executor.StoreElement(dt, out, e, float64(acc))
	}
	return out
}

func firstDifference(got, want []byte, dt ir.DType) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes where %d are expected", len(got), len(want))
	}
	sz := max(dt.Size(), 1)
	for i := range got {
		if got[i] != want[i] {
			e := int64(i) / sz
			if dt.IsFloat() && int64(len(got))%sz == 0 {
				return fmt.Sprintf("element %d is %v where the host computes %v", e, executor.LoadElement(dt, got, e), executor.LoadElement(dt, want, e))
			}
			return fmt.Sprintf("byte %d is %#x where the host computes %#x", i, got[i], want[i])
		}
	}
	return "equal"
}
