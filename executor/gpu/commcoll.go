package gpu

import (
	"fmt"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/schedule"
)

// commCollective runs a collective through this process's communicator
// (NCCL): one rank per process, so the other members are other processes
// and the data check covers what this rank can see: the gathered
// parameters where compute reads them. The watchdog (watchdog.go)
// follows each one.
func (b *Backend) commCollective(c Comm, r *rank, st Stream, s schedule.Stream, k *executor.Kernel, a executor.Args) error {
	return b.watch.watch(r, st, s, k, a.Step, commKey{k.PG, k.PGSize}, func() error { return b.enqueueComm(c, st, k, a) })
}

func (b *Backend) enqueueComm(c Comm, st Stream, k *executor.Kernel, a executor.Args) error {
	if c.Size() != k.PGSize {
		return fmt.Errorf("%w: a collective over %s(%d) on a communicator of %d ranks", errProtocol, k.PG, k.PGSize, c.Size())
	}
	dst, _ := a.Mem[executor.ArgDst].(*mem)
	if dst == nil {
		return fmt.Errorf("%w: no target", errProtocol)
	}
	n := int64(c.Size())
	switch k.Kind {
	case schedule.OpAllGather:
		if dst.bytes%n != 0 {
			return fmt.Errorf("%w: all-gather of %d bytes over %d ranks", errProtocol, dst.bytes, n)
		}
		chunk := dst.bytes / n
		return c.AllGather(dst.ptr+Ptr(int64(c.Rank())*chunk), dst.ptr, chunk, st)
	case schedule.OpReduceScatter:
		src, _ := a.Mem[executor.ArgSrc].(*mem)
		if src == nil || src.bytes != dst.bytes*n {
			return fmt.Errorf("%w: reduce-scatter into %d bytes over %d ranks needs %d bytes of input", errProtocol, dst.bytes, n, dst.bytes*n)
		}
		return c.ReduceScatter(src.ptr, dst.ptr, dst.bytes/k.DType.Size(), k.DType, k.Reduce, k.Factor, st)
	case schedule.OpAllReduce:
		return c.AllReduce(dst.ptr, dst.bytes/k.DType.Size(), k.DType, k.Reduce, k.Factor, st)
	}
	return fmt.Errorf("%s is not a collective", k.Kind)
}
