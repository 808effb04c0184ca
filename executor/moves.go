package executor

import (
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Move is one contiguous run of a data-movement kernel: N elements from
// operand Src at byte offset SrcOff, of SrcDType, to operand Dst at DstOff,
// cast to DstDType (the same dtype: a copy). Operands are Args positions
// (ArgDst, ArgSrc).
type Move struct {
	Dst, Src           int
	DstOff, SrcOff     int64
	DstDType, SrcDType ir.DType
	N                  int64
}

// Moves lists the runs a copy kernel moves for the rank at index shard of
// its shard group, in the layouts of docs/executor.md, and whether the
// target must be zeroed first (the padding of a reduce-scatter input).
// A GPU backend runs them as copies and casts; the host backend's kernels
// move the same bytes (TestMovesMatchHostKernels). ok is false for kinds
// that are not copies.
func (k *Kernel) Moves(shard int) (moves []Move, zero, ok bool) {
	gl := k.Group
	add := func(dstOff int64, ddt ir.DType, srcOff int64, sdt ir.DType, n int64) {
		if n > 0 {
			moves = append(moves, Move{Dst: ArgDst, Src: ArgSrc, DstOff: dstOff, SrcOff: srcOff, DstDType: ddt, SrcDType: sdt, N: n})
		}
	}
	raw := func(dstOff, srcOff, bytes int64) { add(dstOff, ir.UINT8, srcOff, ir.UINT8, bytes) }
	switch k.Kind {
	case schedule.OpCopyIn:
		W := gl.W
		if k.PostForward {
			N := int64(gl.Policy.ReshardTo)
			n := W * gl.RowBytes / N
			raw(int64(shard)%N*n, 0, n)
			return moves, false, true
		}
		row := int64(shard) * gl.RowBytes
		for pi := range gl.Params {
			p := &gl.Params[pi]
			add(row+p.GatherOffset, p.Gather, p.ShardedOffset, p.DType, p.ShardNumel)
		}
		return moves, false, true
	case schedule.OpCopyOut:
		W := gl.W
		rows, per := W, int64(1)
		if k.PostForward {
			rows = int64(gl.Policy.ReshardTo)
			per = W / rows
		}
		rowBytes := W * gl.RowBytes / rows
		for j := int64(0); j < rows; j++ {
			for pi := range gl.Params {
				p := &gl.Params[pi]
				sz := p.Gather.Size()
				n := per * p.ShardNumel
				raw(W*p.GatherOffset+j*n*sz, j*rowBytes+per*p.GatherOffset, n*sz)
			}
		}
		return moves, false, true
	case schedule.OpReshard:
		W := gl.W
		N := int64(gl.Policy.ReshardTo)
		j := int64(shard) % N
		per := W / N
		for pi := range gl.Params {
			p := &gl.Params[pi]
			n := per * p.ShardNumel * p.Gather.Size()
			raw(per*p.GatherOffset, W*p.GatherOffset+j*n, n)
		}
		return moves, false, true
	case schedule.OpReduceCopyIn:
		sdt, rd := k.SrcDType, k.DType
		Sg := gl.GradShardNumel
		for r := int64(0); r < gl.W; r++ {
			for pi := range gl.Params {
				p := &gl.Params[pi]
				if !p.trainable() {
					continue
				}
				p.forShard(r, func(so, lo, n int64) {
					add((r*Sg+p.GradOffset+so)*rd.Size(), rd, (p.GradFlat+lo)*sdt.Size(), sdt, n)
				})
			}
		}
		return moves, true, true
	}
	return nil, false, false
}
