package executor

import (
	"fmt"

	"github.com/fsdpc/fsdpc/schedule"
)

// Scale returns a copy of the plan whose tensors are shrunk by k on every
// dimension, keeping the plan's structure: the same groups, parameters in
// the same order, the same program, and on the shard dimension the same
// pattern of ranks: as many ranks hold full chunks, a rank holds a partial
// chunk exactly when one did, and the same ranks hold nothing, so a
// parameter is padded exactly when it was (d mod W ≠ 0 is kept) and empty
// shards stay empty. Every buffer is resized from the scaled layout by the
// planner's formulas (docs/semantics.md R50); activations shrink by k².
// The copy is simulated again, so its Prediction holds the scaled peaks.
//
// k = 1 re-derives every size from the layout. Diffs lists the buffers of
// the input whose size the layout does not reproduce (an unscaled run is
// sized by the layout, so these explain a measured peak that differs from
// the plan's own prediction).
func Scale(p *schedule.Plan, k int) (q *schedule.Plan, diffs []string, err error) {
	if k < 1 || k > MaxScale {
		return nil, nil, fmt.Errorf("scale %d: it must be from 1 to %d", k, MaxScale)
	}
	layouts, err := buildLayouts(p)
	if err != nil {
		return nil, nil, err
	}
	for bi := range p.Buffers {
		b := &p.Buffers[bi]
		if b.Group < -1 || b.Group >= len(p.Groups) {
			return nil, nil, fmt.Errorf("buffer %q: group %d out of range", b.Name, b.Group)
		}
		if b.Group < 0 {
			if isFSDPBuffer(b.Kind) {
				return nil, nil, fmt.Errorf("buffer %q of kind %s belongs to no group", b.Name, b.Kind)
			}
			continue
		}
		if want, ok := bufferBytes(b, layouts[b.Group], p.Train.OptimizerStateBytes); ok && want != b.Bytes {
			diffs = append(diffs, fmt.Sprintf("buffer %s: the plan sizes it %d B, its group's layout %d B", b.Name, b.Bytes, want))
		}
	}

	q = new(schedule.Plan)
	*q = *p
	W := int64(p.Cluster.Shard)
	K := int64(k)
	q.Groups = make([]schedule.Group, len(p.Groups))
	for gi := range p.Groups {
		g := p.Groups[gi]
		g.Params = append([]schedule.GroupParam(nil), g.Params...)
		var off, goff, row int64
		for pi := range g.Params {
			gp := &g.Params[pi]
			shape := make([]int64, len(gp.Shape))
			rest := int64(1)
			for i, d := range gp.Shape {
				if i == gp.ShardDim {
					shape[i], gp.ChunkRows = scaleShardDim(d, W, gp.ChunkRows, K)
				} else {
					shape[i] = ceilDiv(d, K)
					rest *= shape[i]
				}
			}
			gp.Shape = shape
			gp.ShardNumel = gp.ChunkRows * rest
			gp.Offset = off
			off += gp.ShardNumel
			row += gp.ShardNumel * gp.GatherDType.Size()
			if gp.RequiresGrad {
				gp.GradOffset = goff
				goff += gp.ShardNumel
			}
		}
		g.ShardNumel, g.GradShardNumel, g.ShardBytes = off, goff, row
		q.Groups[gi] = g
	}
	scaled, err := buildLayouts(q)
	if err != nil {
		return nil, nil, fmt.Errorf("internal error: the scaled layout is invalid (please report): %w", err)
	}
	q.Buffers = make([]schedule.Buffer, len(p.Buffers))
	for bi, b := range p.Buffers {
		var gl *GroupLayout
		if b.Group >= 0 {
			gl = scaled[b.Group]
		}
		if n, ok := bufferBytes(&b, gl, p.Train.OptimizerStateBytes); ok {
			b.Bytes = n
		} else if k > 1 {
			b.Bytes = scaleOpaque(b.Bytes, K*K)
		}
		q.Buffers[bi] = b
	}
	q.Ops = make([]schedule.Op, len(p.Ops))
	for i, o := range p.Ops {
		ref := int(o.Buffer)
		if ref < 0 || ref >= len(p.Buffers) {
			ref = int(o.Source)
		}
		switch {
		case o.Kind == schedule.OpAlloc || o.Kind == schedule.OpFree:
			if ref >= 0 && ref < len(q.Buffers) {
				o.Bytes = q.Buffers[ref].Bytes
			}
		case o.Group >= 0 && int(o.Group) < len(scaled) && o.Kind == schedule.OpAllGather:
			o.Bytes = W * scaled[o.Group].RowBytes
		case o.Group >= 0 && int(o.Group) < len(scaled) && o.Kind == schedule.OpReduceScatter:
			o.Bytes = W * scaled[o.Group].GradShardNumel * scaled[o.Group].Reduce.Size()
		case o.Group >= 0 && int(o.Group) < len(scaled) && o.Kind == schedule.OpAllReduce:
			o.Bytes = scaled[o.Group].GradShardNumel * scaled[o.Group].Reduce.Size()
		case ref >= 0 && ref < len(p.Buffers) && p.Buffers[ref].Bytes > 0:
			o.Bytes = int64(float64(o.Bytes) * float64(q.Buffers[ref].Bytes) / float64(p.Buffers[ref].Bytes))
		case k > 1:
			o.Bytes = scaleOpaque(o.Bytes, K*K)
		}
		if k > 1 {
			// The attention core is part of FLOPs and shrinks with it. The
			// GEMM shapes would not stay integral and within the scaled
			// FLOPs, so the scaled plan charges its matmuls at the flat
			// efficiency (schedule.Model.Kernel without shapes).
			o.FLOPs /= float64(K * K * K)
			o.AttnFLOPs /= float64(K * K * K)
			o.GEMMs = schedule.Span{}
		}
		q.Ops[i] = o
	}
	sim, err := schedule.Simulate(q, schedule.NewModel(q))
	if err != nil {
		return nil, nil, err
	}
	q.Prediction = sim.Prediction()
	return q, diffs, nil
}

// scaleShardDim shrinks d rows laid out as c rows per rank over W ranks,
// keeping the pattern: d = full·c + rem becomes full·c′ + rem′ with
// ceil(d′/W) = c′, rem′ > 0 exactly when rem > 0. The search ends at the
// input itself, which satisfies it.
func scaleShardDim(d, W, c, k int64) (d2, c2 int64) {
	full, rem := d/c, d%c
	c0 := max(1, ceilDiv(c, k))
	if rem > 0 {
		c0 = max(c0, 2) // room for a partial chunk
	}
	for c2 = min(c0, c); c2 <= c; c2++ {
		lo, hi := int64(0), int64(0)
		if rem > 0 {
			lo, hi = min(max(1, ceilDiv(rem, k)), c2-1), c2-1
		}
		for r := lo; r <= hi; r++ {
			if d2 = full*c2 + r; ceilDiv(d2, W) == c2 {
				return d2, c2
			}
		}
	}
	return d, c
}

// MaxScale bounds Run's scale: k³ divides FLOPs and k² activation bytes,
// and 2^20 already shrinks every dimension of any model fsdpc plans
// (at most 2^40 per dimension) to a handful of rows.
const MaxScale = 1 << 20

// ceilDiv is ⌈a/b⌉ for a ≥ 0 and b > 0, without the overflow of a+b-1.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

// scaleOpaque shrinks a size the layout does not give (activations) by f,
// to a multiple of 8 bytes, keeping non-zero sizes non-zero.
func scaleOpaque(n, f int64) int64 {
	if n <= 0 {
		return n
	}
	return (ceilDiv(n, f) + 7) &^ 7
}

func isFSDPBuffer(k schedule.BufferKind) bool {
	return k != schedule.BufActivations && k != schedule.BufRecompute
}
