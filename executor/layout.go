package executor

import (
	"fmt"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// GroupLayout is how the executor reads one group's buffers: the plan's
// layout (docs/semantics.md R11–R13) with the byte offsets it implies.
//
//	sharded params   ShardedBytes; parameter p at ShardedOffset bytes in
//	                 its own dtype, rank k's ChunkRows rows of it on
//	                 ShardDim, zero padded
//	all-gather row   RowBytes; p at GatherOffset bytes, its S_p elements
//	                 cast to its gather dtype; the buffer is W rows,
//	                 rank-major (with int reshard N, a backward gather is
//	                 N rows of W/N ranks each)
//	unsharded        p at W·GatherOffset bytes: its W shards rank-major,
//	                 which for ShardDim 0 is the padded tensor itself
//	post-fwd slice   p at (W/N)·GatherOffset: ranks [j·W/N, (j+1)·W/N) of
//	                 the unsharded region, j = the rank's index among N
//	unsharded grads  the trainable parameters' unpadded tensors in order,
//	                 row-major, GradNumel elements of Compute
//	accum grads      the same in Reduce
//	reduce-scatter   W rows of S′ elements of Reduce (input), one row
//	                 (output); p at GradOffset, the rank's rows, zero padded
//	sharded grads    one row in Orig
//	optimizer state  S′ fp32 elements per state
type GroupLayout struct {
	Index  int
	Name   string
	W      int64 // shard group size
	Params []ParamLayout
	// S, S′, a rank's all-gather row in bytes and its sharded parameters
	// in bytes (each in its own dtype).
	ShardNumel, GradShardNumel, RowBytes, ShardedBytes int64
	// GradNumel is N′, the unpadded trainable elements.
	GradNumel                    int64
	Orig, Param, Reduce, Compute ir.DType
	Policy                       schedule.GroupPolicy
}

// ParamLayout is one parameter of a group.
type ParamLayout struct {
	Name               string
	hash               uint64
	Shape              []int64
	Numel              int64
	ShardDim           int
	Chunk              int64 // rows per rank on ShardDim
	ShardNumel, Offset int64
	ShardedOffset      int64 // bytes into a rank's sharded parameters
	GatherOffset       int64 // bytes into a rank's all-gather row
	GradOffset         int64 // into the reduce-scatter row, -1 when frozen
	GradFlat           int64 // into the unsharded gradients, -1 when frozen
	DType, Gather      ir.DType
	outer, inner       int64 // elements before and after the shard dim
}

func (p *ParamLayout) trainable() bool { return p.GradOffset >= 0 }

// forShard calls fn for each contiguous run of rank k's shard of p that
// holds data: n elements at shardOff in the shard and at logicalOff in the
// unpadded row-major tensor. Padding is what no run covers.
func (p *ParamLayout) forShard(k int64, fn func(shardOff, logicalOff, n int64)) {
	d := p.Shape[p.ShardDim]
	valid := min(max(d-k*p.Chunk, 0), p.Chunk)
	if valid == 0 {
		return
	}
	for o := int64(0); o < p.outer; o++ {
		fn(o*p.Chunk*p.inner, (o*d+k*p.Chunk)*p.inner, valid*p.inner)
	}
}

// buildLayouts checks the plan's groups as the executor needs them (the
// structural checks it relies on; Run does not require schedule.Check) and
// derives their byte layouts.
func buildLayouts(p *schedule.Plan) ([]*GroupLayout, error) {
	c := &p.Cluster
	if c.Replicate < 1 || c.Shard < 1 || c.Replicate*c.Shard != c.WorldSize {
		return nil, fmt.Errorf("the plan's cluster is inconsistent: world size %d is not replicate %d × shard %d", c.WorldSize, c.Replicate, c.Shard)
	}
	W := int64(c.Shard)
	out := make([]*GroupLayout, len(p.Groups))
	for gi := range p.Groups {
		g := &p.Groups[gi]
		pol := g.Policy
		gl := &GroupLayout{Index: gi, Name: (g).Label(), W: W, Orig: pol.Orig, Param: pol.Param, Reduce: pol.Reduce, Policy: pol}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("group %s: %s", gl.Name, fmt.Sprintf(format, args...))
		}
		for _, dt := range []ir.DType{pol.Orig, pol.Param, pol.Reduce} {
			// A group with no parameters (docs/semantics.md D13) has
			// no dtypes: it moves and holds nothing.
			if !supported(dt) && len(g.Params) > 0 {
				return nil, bad("dtype %s is not one the host backend can hold", dt)
			}
		}
		var off, goff, row, flat, sharded int64
		gl.Compute = ir.DTypeInvalid
		for _, gp := range g.Params {
			if len(gp.Shape) == 0 || gp.ShardDim < 0 || gp.ShardDim >= len(gp.Shape) {
				return nil, bad("parameter %s has a bad shape or shard dimension", gp.Name)
			}
			if !supported(gp.DType) || !supported(gp.GatherDType) {
				return nil, bad("parameter %s has dtype %s/%s, which the host backend cannot hold", gp.Name, gp.DType, gp.GatherDType)
			}
			pl := ParamLayout{Name: gp.Name, hash: nameHash(gp.Name), Shape: gp.Shape, ShardDim: gp.ShardDim, Chunk: gp.ChunkRows,
				ShardNumel: gp.ShardNumel, Offset: gp.Offset, ShardedOffset: sharded, GatherOffset: row, GradOffset: gp.GradOffset, GradFlat: -1,
				DType: gp.DType, Gather: gp.GatherDType, outer: 1, inner: 1, Numel: 1}
			for i, d := range gp.Shape {
				if d < 1 {
					return nil, bad("parameter %s has dimension %d of size %d", gp.Name, i, d)
				}
				pl.Numel *= d
				switch {
				case i < gp.ShardDim:
					pl.outer *= d
				case i > gp.ShardDim:
					pl.inner *= d
				}
			}
			d := gp.Shape[gp.ShardDim]
			if gp.ChunkRows != (d+W-1)/W || gp.ShardNumel != gp.ChunkRows*pl.outer*pl.inner {
				return nil, bad("parameter %s is not laid out as ceil(%d/%d) rows per rank", gp.Name, d, W)
			}
			if gp.ShardDim > 0 && d%W != 0 {
				return nil, bad("parameter %s is sharded on dimension %d, whose %d rows do not divide over %d ranks", gp.Name, gp.ShardDim, d, W)
			}
			if gp.Offset != off {
				return nil, bad("parameter %s at offset %d, the layout gives %d", gp.Name, gp.Offset, off)
			}
			if gp.RequiresGrad {
				if gp.GradOffset != goff {
					return nil, bad("parameter %s at gradient offset %d, the layout gives %d", gp.Name, gp.GradOffset, goff)
				}
				if gl.Compute == ir.DTypeInvalid {
					gl.Compute = gp.GatherDType
				} else if gl.Compute != gp.GatherDType {
					return nil, bad("trainable parameters compute in both %s and %s", gl.Compute, gp.GatherDType)
				}
				pl.GradFlat = flat
				flat += pl.Numel
				goff += gp.ShardNumel
			} else if gp.GradOffset != -1 {
				return nil, bad("frozen parameter %s has a gradient offset", gp.Name)
			}
			if gp.RequiresGrad && gp.DType != pol.Orig {
				return nil, bad("trainable parameter %s is %s, but the group's original dtype is %s", gp.Name, gp.DType, pol.Orig)
			}
			off += gp.ShardNumel
			row += gp.ShardNumel * gp.GatherDType.Size()
			sharded += gp.ShardNumel * gp.DType.Size()
			gl.Params = append(gl.Params, pl)
		}
		if gl.Compute == ir.DTypeInvalid {
			gl.Compute = pol.Param
		}
		if off != g.ShardNumel || goff != g.GradShardNumel || row != g.ShardBytes {
			return nil, bad("shard sizes %d/%d elements, %d bytes do not add up to the parameters' %d/%d, %d", g.ShardNumel, g.GradShardNumel, g.ShardBytes, off, goff, row)
		}
		gl.ShardNumel, gl.GradShardNumel, gl.RowBytes, gl.GradNumel, gl.ShardedBytes = off, goff, row, flat, sharded
		if pol.Reshard == schedule.ReshardTo && (pol.ReshardTo < 2 || W%int64(pol.ReshardTo) != 0) {
			return nil, bad("reshard_after_forward = %d does not divide the shard group of %d", pol.ReshardTo, W)
		}
		for _, f := range []float64{pol.PreDivide, pol.PostDivide} {
			if !(f > 0) {
				return nil, bad("divide factor %v", f)
			}
		}
		out[gi] = gl
	}
	return out, nil
}

// bufferBytes is the size the layout gives a buffer; ok is false for the
// kinds the layout does not size (activations, recompute).
func bufferBytes(b *schedule.Buffer, gl *GroupLayout, stateBytes int64) (n int64, ok bool) {
	if gl == nil {
		return 0, false
	}
	W := gl.W
	switch b.Kind {
	case schedule.BufShardedParams:
		return gl.ShardedBytes, true
	case schedule.BufH2DTemp:
		// The parameters' copy to the device, or (offload with gradient
		// accumulation) a later micro-batch's gradient copied to the host.
		if b.Pool == schedule.PoolHost {
			return gl.GradShardNumel * gl.Orig.Size(), true
		}
		return gl.ShardedBytes, true
	case schedule.BufShardedGrads:
		return gl.GradShardNumel * gl.Orig.Size(), true
	case schedule.BufOptimizerState:
		return gl.GradShardNumel * stateBytes, true
	case schedule.BufCastTemp:
		return gl.RowBytes, true
	case schedule.BufAllGatherOut, schedule.BufUnsharded:
		return W * gl.RowBytes, true
	case schedule.BufPostForwardSlice:
		if gl.Policy.ReshardTo < 1 {
			return 0, false
		}
		return W * gl.RowBytes / int64(gl.Policy.ReshardTo), true
	case schedule.BufUnshardedGrads:
		return gl.GradNumel * gl.Compute.Size(), true
	case schedule.BufAccumGrads:
		return gl.GradNumel * gl.Reduce.Size(), true
	case schedule.BufReduceScatterIn:
		return W * gl.GradShardNumel * gl.Reduce.Size(), true
	case schedule.BufReduceScatterOut:
		return gl.GradShardNumel * gl.Reduce.Size(), true
	}
	return 0, false
}
