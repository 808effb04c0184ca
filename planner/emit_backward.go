package planner

import (
	"sort"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// backward emits one micro-batch's backward. sync is false for the
// micro-batches of gradient accumulation that skip reduction
// (set_requires_gradient_sync(False)): their unsharded gradients are kept,
// in the reduce dtype, for the last micro-batch to reduce.
func (e *emitter) backward(sync bool) {
	D := schedule.StreamCompute
	done := map[int]bool{}
	for si := len(e.segments) - 1; si >= 0; si-- {
		seg := &e.segments[si]
		for _, g := range e.groupsEndingAt(seg.end) {
			// FSDP2 hooks pre-backward on the unit's outputs that require
			// grad; a unit whose output needs none never fires it.
			if e.firesPreBackward(g) {
				e.groups[g].preBackward()
			}
		}
		g := seg.group
		if !seg.grad {
			continue // autograd never reaches these modules
		}
		if e.groups[g].unshardedGrad == none && e.trains(g) {
			// Autograd allocates the unsharded gradients in the parameter
			// dtype as backward reaches the group.
			e.groups[g].unshardedGrad = e.alloc(D, g, schedule.BufUnshardedGrads, e.gradNumel(g)*e.computeDType(g).Size(), "unsharded-grads")
		}
		rc := -1
		if seg.recompute > 0 {
			rc = e.alloc(D, g, schedule.BufRecompute, seg.recompute, "recompute/"+e.p.Modules[si])
		}
		// Backward reads the parameters and the saved activations (rebuilt
		// into the recompute buffer under checkpointing) and writes the
		// unsharded gradients: weights read, gradients written, activations
		// read twice.
		o := blank(schedule.OpBackward, D)
		o.Group, o.Module, o.FLOPs = int32(g), int32(si), seg.bwd
		o.Source, o.Buffer = int32(e.groups[g].unshardedParam), int32(e.groups[g].unshardedGrad)
		var uses []int32
		for _, b := range []int{e.segAct[si], rc} {
			if b >= 0 {
				uses = append(uses, int32(b))
			}
		}
		e.p.SetOpUses(&o, uses)
		o.DType = e.computeDType(g)
		o.Bytes = 2*seg.paramNumel*o.DType.Size() + 2*seg.act + seg.recompute
		o.AttnFLOPs, o.ElemBytes = seg.attnBwd, seg.elemBwd+seg.elemRecompute
		e.setGEMMs(&o, seg.gemmBwd, &seg.gemmBwdAt)
		e.op(o)
		e.free(rc)
		e.free(e.segAct[si])
		e.segAct[si] = -1
		for _, h := range e.groupsStartingAt(seg.start) {
			if !e.p.Groups[h].DeferredReduce {
				e.groups[h].postBackward(sync)
				done[h] = true
			}
		}
	}
	// The final callback: post-backward for every group autograd did not
	// reach, in module pre-order (root.named_modules()), the root first.
	var late []int
	for g := range e.p.Groups {
		if !done[g] {
			late = append(late, g)
		}
	}
	sort.SliceStable(late, func(i, j int) bool { return e.s.units[late[i]].modules[0] < e.s.units[late[j]].modules[0] })
	for _, g := range late {
		e.groups[g].postBackward(sync)
	}
	if sync {
		e.finalize()
	} else {
		e.dropPending()
	}
}

// dropPending waits for and drops prefetched all-gathers nothing used: FSDP2
// runs finalize_backward after every backward, also on micro-batches that
// do not synchronise.
func (e *emitter) dropPending() {
	D := schedule.StreamCompute
	for g := range e.groups {
		pg := &e.groups[g]
		if ag := pg.allGatherResult; ag.pending {
			pg.mistargeted = true
			e.wait(D, ag.event)
			e.free(ag.out, ag.event)
			pg.allGatherResult = allGatherResult{}
		}
	}
}

// groupsEndingAt lists the groups whose last forward module is at pos, in
// the order their pre-backward hooks fire when backward reaches it
// (preBackwardFirst).
func (e *emitter) groupsEndingAt(pos int) []int {
	e.indexSpans()
	out := append([]int(nil), e.endingAt[pos]...)
	sort.SliceStable(out, func(i, j int) bool { return e.preBackwardFirst(out[i], out[j]) })
	return out
}

// preBackwardFirst orders the pre-backward hooks of two groups whose last
// forward module is the same. FSDP2's post-forward registers a unit's hook
// on the tensors its forward returns (_register_pre_backward_hook). A unit
// whose module returns a tensor of its own (output = "own": h + ffn(h))
// has it computed after the inner unit's output, so backward reaches it,
// and fires its hook, first; units returning one shared tensor fire in the
// order their post-forwards registered on it, inner first (autograd runs a
// tensor's hooks in registration order).
func (e *emitter) preBackwardFirst(a, b int) bool {
	if da, db := e.outDepth[a], e.outDepth[b]; da != db {
		return da < db
	}
	return e.encloses(b, a)
}

// outputDepths gives, per group, the depth in the module tree of the
// module that makes the group's output tensor: the outermost container
// returning its own tensor on the path from the unit's module down to its
// last compute module, or that compute module when every container on the
// way returns its child's tensor unchanged. A shallower maker computes its
// tensor later in forward.
func (e *emitter) outputDepths() []int {
	m := e.m
	out := make([]int, len(e.p.Groups))
	for g := range out {
		if e.last[g] < 0 {
			continue
		}
		roots := map[ir.ModuleID]bool{}
		for _, r := range e.s.units[g].modules {
			roots[r] = true
		}
		c := m.Forward[e.last[g]]
		maker := c
		for a := c; ; a = m.Modules[a].Parent {
			if a != c && m.Modules[a].OwnOutput {
				maker = a
			}
			// The unit's own module closes the walk: containers above it
			// are outside the unit.
			if roots[a] || m.Modules[a].Parent == ir.NoModule {
				break
			}
		}
		for a := maker; a != ir.NoModule; a = m.Modules[a].Parent {
			out[g]++
		}
	}
	return out
}

// groupsStartingAt lists the groups whose first forward module is at pos,
// inner first: their post-backward fires once backward has produced the
// gradients of their inputs.
func (e *emitter) groupsStartingAt(pos int) []int {
	e.indexSpans()
	out := append([]int(nil), e.startingAt[pos]...)
	sort.SliceStable(out, func(i, j int) bool { return e.encloses(out[j], out[i]) })
	return out
}

// indexSpans lists, once, the groups by the forward position of their
// last and first module, in group order: backward asks for every segment,
// and scanning all groups each time would make emission quadratic in depth.
func (e *emitter) indexSpans() {
	if e.endingAt != nil {
		return
	}
	e.endingAt, e.startingAt = map[int][]int{}, map[int][]int{}
	for g := range e.p.Groups {
		e.endingAt[e.last[g]] = append(e.endingAt[e.last[g]], g)
		if e.last[g] >= 0 {
			e.startingAt[e.first[g]] = append(e.startingAt[e.first[g]], g)
		}
	}
}

// preBackward is FSDPParamGroup.pre_backward (R28): unshard unless
// prefetched, wait for it, then prefetch (R40, R41).
func (pg *paramGroup) preBackward() {
	e, g := pg.e, pg.index
	pg.unshard()
	pg.waitForUnshard(false)
	// Prefetch: an explicit list of k groups in backward order, or FSDP2's
	// implicit one group, the one whose post-forward ran just before g's.
	if k := e.p.Groups[g].Policy.PrefetchBackward; k > 0 {
		for _, t := range e.nextGroups(g, k, false) {
			e.groups[t].unshard()
		}
		return
	}
	for i := len(e.comm.postForwardOrder) - 1; i >= 0; i-- {
		if e.comm.postForwardOrder[i] == g {
			if i > 0 {
				e.groups[e.comm.postForwardOrder[i-1]].unshard()
			}
			e.comm.postForwardOrder = append(e.comm.postForwardOrder[:i], e.comm.postForwardOrder[i+1:]...)
			return
		}
	}
}

// accumulate adds the group's unsharded gradients into its accumulator
// (in the reduce dtype) and drops them (FSDPParam's
// accumulate_unsharded_grad_if_needed and to_accumulated_grad_if_needed,
// R49).
func (pg *paramGroup) accumulate() {
	e, g := pg.e, pg.index
	pol := &e.p.Groups[g].Policy
	o := blank(schedule.OpAccumulate, schedule.StreamCompute)
	o.Group, o.Buffer, o.Source, o.DType, o.Bytes = int32(g), int32(pg.accumulatedGrad), int32(pg.unshardedGrad), pol.Reduce, e.gradNumel(g)*pol.Reduce.Size()
	e.op(o)
	e.free(pg.unshardedGrad)
	pg.unshardedGrad = none
}

// postBackward is FSDPParamGroup.post_backward (R31, R32, R49):
// accumulate, reshard, and on a synchronising micro-batch reduce the
// gradients (foreach_reduce).
func (pg *paramGroup) postBackward(sync bool) {
	e, g := pg.e, pg.index
	D := schedule.StreamCompute
	grp := &e.p.Groups[g]
	pol := &grp.Policy
	// FSDP2's post_backward first adds this micro-batch's gradients into
	// an accumulator that earlier micro-batches made
	// (accumulate_unsharded_grad_if_needed), while the unsharded
	// parameters are still held; only then does it reshard.
	accumulated := false
	if e.trains(g) && pg.unshardedGrad != none && pg.accumulatedGrad != none {
		pg.accumulate()
		accumulated = true
	}
	// Reshard after backward (FSDP2's default reshard_after_backward). A
	// post-forward slice backward never gathered from (its pre-backward
	// did not fire) becomes stale: the next unshard gathers the shards
	// over all ranks (toSharded, keepsStaleSlice).
	pg.reshard(false)
	if !e.trains(g) || pg.unshardedGrad == none && !accumulated {
		return
	}
	if !sync {
		// No reduction this micro-batch. With a reduce dtype wider than the
		// parameter dtype the gradients move, after the reshard, into an
		// accumulator of that dtype (to_accumulated_grad_if_needed);
		// otherwise autograd keeps accumulating in place.
		if pg.unshardedGrad != none && pol.Reduce != e.computeDType(g) {
			pg.accumulatedGrad = e.alloc(D, g, schedule.BufAccumGrads, e.gradNumel(g)*pol.Reduce.Size(), "accum-grads")
			pg.accumulate()
		}
		return
	}
	// The only cross-group wait that stalls compute in backward: the
	// previous reduce-scatter must finish before its input is recycled
	// (FSDP2 keeps one in flight; reduce_scatter_buffers allows more).
	for len(e.comm.reduceScatterStates) >= e.m.Policy.ReduceScatterBuffers {
		st := e.comm.reduceScatterStates[0]
		e.wait(D, st.event)
		e.free(st.in)
		e.comm.reduceScatterStates = e.comm.reduceScatterStates[1:]
	}

	W := int64(e.W())
	src := pg.unshardedGrad
	if pg.accumulatedGrad != none {
		src = pg.accumulatedGrad // this micro-batch's gradients were added above
	}
	rsInBytes := grp.GradShardNumel * W * pol.Reduce.Size()
	rsIn := e.alloc(D, g, schedule.BufReduceScatterIn, rsInBytes, "reduce-scatter-in")
	o := blank(schedule.OpReduceCopyIn, D)
	o.Group, o.Buffer, o.Source, o.DType, o.Bytes = int32(g), int32(rsIn), int32(src), pol.Reduce, rsInBytes
	e.op(o)
	e.free(src)
	pg.unshardedGrad, pg.accumulatedGrad = none, none

	RS := schedule.StreamReduceScatter
	e.wait(RS, e.record(D))
	outBytes := grp.GradShardNumel * pol.Reduce.Size()
	rsOut := e.alloc(RS, g, schedule.BufReduceScatterOut, outBytes, "reduce-scatter-out")
	if pol.PreDivide != 1 {
		d := blank(schedule.OpDivide, RS)
		d.Group, d.Buffer, d.Source, d.Factor, d.DType, d.Bytes = int32(g), int32(rsIn), int32(rsIn), pol.PreDivide, pol.Reduce, rsInBytes
		e.op(d)
	}
	c := blank(schedule.OpReduceScatter, RS)
	c.Group, c.Buffer, c.Source = int32(g), int32(rsOut), int32(rsIn)
	c.PG, c.PGSize, c.DType, c.Reduce, c.Factor, c.Bytes = schedule.PGShard, int32(W), pol.Reduce, pol.ReduceScatterOp, pol.PremulFactor, rsInBytes
	e.op(c)
	rsEv := e.record(RS)
	e.comm.reduceScatterStates = append(e.comm.reduceScatterStates, reduceScatterState{rsIn, rsEv})

	post := RS
	if rep := e.p.Cluster.Replicate; rep > 1 {
		AR := schedule.StreamAllReduce
		e.wait(AR, rsEv)
		a := blank(schedule.OpAllReduce, AR)
		a.Group, a.Buffer, a.Source = int32(g), int32(rsOut), int32(rsOut)
		a.PG, a.PGSize, a.DType, a.Reduce, a.Bytes = schedule.PGReplicate, int32(rep), pol.Reduce, pol.AllReduceOp, outBytes
		e.op(a)
		post = AR
	}
	if pol.PostDivide != 1 {
		d := blank(schedule.OpDivide, post)
		d.Group, d.Buffer, d.Source, d.Factor, d.DType, d.Bytes = int32(g), int32(rsOut), int32(rsOut), pol.PostDivide, pol.Reduce, outBytes
		e.op(d)
	}
	grad := rsOut
	if pol.Reduce != pol.Orig {
		grad = e.alloc(post, g, schedule.BufShardedGrads, grp.GradShardNumel*pol.Orig.Size(), "sharded-grads")
		cg := blank(schedule.OpCastGrad, post)
		cg.Group, cg.Buffer, cg.Source, cg.DType, cg.Bytes = int32(g), int32(grad), int32(rsOut), pol.Orig, grp.GradShardNumel*pol.Orig.Size()
		e.op(cg)
		if post == schedule.StreamAllReduce {
			// HSDP keeps each group's all-reduce buffer until the end of
			// backward, so a later reduce-scatter cannot reuse a block
			// whose all-reduce is in flight (FSDP2 pitfall 6).
			pg.allReduceInput = rsOut
		} else {
			e.free(rsOut)
		}
	}
	if pg.shardedGrad != none && !pol.Offload {
		// An earlier micro-batch left sharded gradients: add the new ones
		// (FSDP2's grad._local_tensor += new) and drop them.
		a := blank(schedule.OpAccumulate, post)
		a.Group, a.Buffer, a.Source, a.DType, a.Bytes = int32(g), int32(pg.shardedGrad), int32(grad), pol.Orig, grp.GradShardNumel*pol.Orig.Size()
		e.op(a)
		if grad == rsOut && post == schedule.StreamAllReduce {
			pg.allReduceInput = rsOut
		} else {
			e.free(grad)
		}
		grad = pg.shardedGrad
	}
	if pol.Offload {
		bytes := grp.GradShardNumel * pol.Orig.Size()
		dst := pg.hostGrad
		if pg.hostGradWritten {
			// Gradients from an earlier micro-batch are on the host: the
			// copy lands in a pinned temporary and the CPU adds it, which
			// needs the data, so FSDP2 copies blocking here.
			dst = e.alloc(schedule.StreamHost, g, schedule.BufH2DTemp, bytes, "d2h")
		}
		o := blank(schedule.OpD2H, post)
		o.Group, o.Buffer, o.Source, o.DType, o.Bytes = int32(g), int32(dst), int32(grad), pol.Orig, bytes
		e.op(o)
		pg.gradOffloadEvent = e.record(post)
		if dst != pg.hostGrad {
			sy := blank(schedule.OpSync, schedule.StreamHost)
			sy.Group, sy.Event = int32(g), int32(pg.gradOffloadEvent)
			e.op(sy)
			a := blank(schedule.OpAccumulate, schedule.StreamHost)
			a.Group, a.Buffer, a.Source, a.DType, a.Bytes = int32(g), int32(pg.hostGrad), int32(dst), pol.Orig, bytes
			e.op(a)
			e.free(dst)
		}
		pg.hostGradWritten = true
		// The device copy goes back to its pool only once the copy has
		// drained: its allocating stream waits for the copy first (the
		// HSDP + offload race, FSDP2 pitfall 7).
		if grad == rsOut && post == schedule.StreamAllReduce {
			pg.allReduceInput = rsOut // freed at the end with the other HSDP buffers
		} else {
			e.free(grad, pg.gradOffloadEvent)
		}
		grad = none
	}
	pg.shardedGrad = grad
	// The post-reduce event: the reduce-scatter's own when nothing ran
	// after it.
	if last := &e.p.Ops[len(e.p.Ops)-1]; last.Kind == schedule.OpRecord && int(last.Event) == rsEv {
		pg.postReduceEvent = rsEv
	} else {
		pg.postReduceEvent = e.record(post)
	}
}

// finalize is the final callback's finalize on a synchronising backward
// (R33): every group's finalizeBackward, then the prefetches nothing
// waited for, and the last reduce-scatter input is dropped.
func (e *emitter) finalize() {
	D := schedule.StreamCompute
	for g := range e.groups {
		e.groups[g].finalizeBackward()
	}
	// A prefetch that nothing waited for is waited and dropped (FSDP2
	// pitfall 5: its memory was held until here).
	e.dropPending()
	for _, st := range e.comm.reduceScatterStates {
		e.wait(D, st.event)
		e.free(st.in)
	}
	e.comm.reduceScatterStates = e.comm.reduceScatterStates[:0]
}

// finalizeBackward is FSDPParamGroup.finalize_backward, less the
// pending all-gather dropPending handles after every group's: the
// compute stream waits for the group's post-reduce work, HSDP's held
// reduce-scatter output is freed after it (R48), and the host blocks on
// the gradients' offload (R46).
func (pg *paramGroup) finalizeBackward() {
	e := pg.e
	if pg.postReduceEvent != none {
		e.wait(schedule.StreamCompute, pg.postReduceEvent)
		e.free(pg.allReduceInput, pg.postReduceEvent)
		pg.postReduceEvent, pg.allReduceInput = none, none
	}
	if pg.gradOffloadEvent != none {
		o := blank(schedule.OpSync, schedule.StreamHost)
		o.Group, o.Event = int32(pg.index), int32(pg.gradOffloadEvent)
		e.op(o)
		pg.gradOffloadEvent = none
	}
}

// optimizerTraffic is the HBM traffic of one optimizer step over elems
// sharded elements whose parameters and gradients are paramSize bytes.
//
// Fused (one kernel, fused=True): read the parameter and the gradient,
// read and write each state, write the parameter: 3 parameter-sized and 2
// state-sized accesses (AdamW in fp32: 28 B an element).
//
// Foreach (foreach=True): PyTorch's _multi_tensor_adam (torch/optim/adam.py;
// _multi_tensor_adamw in adamw.py before AdamW became Adam with decoupled
// weight decay) runs, with weight decay and neither capturable nor
// amsgrad, one multi-tensor kernel per line, each element read and written
// (p parameter, g gradient, m exp_avg, v exp_avg_sq, d a new list the size of v):
//
//	_foreach_mul_(p, 1-lr·wd)       p r+w
//	_foreach_lerp_(m, g, 1-β1)      m r+w, g r
//	_foreach_mul_(v, β2)            v r+w
//	_foreach_addcmul_(v, g, g, 1-β2) v r+w, g r (both operands one tensor)
//	d = _foreach_sqrt(v)            v r, d w
//	_foreach_div_(d, √bc2)          d r+w
//	_foreach_add_(d, eps)           d r+w
//	_foreach_addcdiv_(p, m, d, −s)  p r+w, m r, d r
//
// 6 parameter-sized and 14 state-element accesses (7 × the two states'
// bytes): AdamW in fp32 moves 80 B an element, 2.9× the fused kernel.
//
// With gradient-norm clipping ([train] max_grad_norm > 0) the step first
// makes clipTraffic's two passes over the same gradients.
func optimizerTraffic(elems, paramSize int64, tr ir.Train) int64 {
	clip := clipTraffic(elems, paramSize, tr)
	if tr.OptimizerForeach {
		return clip + elems*paramSize*6 + 7*elems*tr.OptimizerStateBytes
	}
	return clip + elems*paramSize*3 + 2*elems*tr.OptimizerStateBytes
}

// clipTraffic is the HBM traffic of gradient-norm clipping over elems
// sharded gradient elements of gradSize bytes (the parameters' original
// dtype, as FSDP keeps its sharded gradients), 0 without clipping.
//
// torch.nn.utils.clip_grad_norm_ (torch/nn/utils/clip_grad.py; torchtitan's
// dist_utils.clip_grad_norm_ calls its two halves) runs _get_total_norm,
// one _foreach_norm over the gradients (each element read once), then
// _clip_grads_with_norm_, _foreach_mul_ of every gradient by the clamped
// coefficient (each element read and written) whether or not the norm
// exceeds the threshold: clamp(max_norm / (norm + 1e-6), max=1) avoids
// the host sync a test would need. FSDP1's FullyShardedDataParallel.
// clip_grad_norm_ makes the same passes one gradient at a time
// (vector_norm, then mul_). 3 gradient-sized accesses: 12 B an fp32
// element. The all-reduce of the norm in between (the norm's DTensor
// full_tensor(), FSDP1's dist.all_reduce over its process group) is one
// scalar over the shard group, which the plan holds no op for; see
// docs/cost-model.md.
func clipTraffic(elems, gradSize int64, tr ir.Train) int64 {
	if tr.MaxGradNorm <= 0 {
		return 0
	}
	return 3 * elems * gradSize
}

// optimizer emits the optimizer step on every group's shards, then frees
// the sharded gradients (zero_grad(set_to_none=True)).
func (e *emitter) optimizer() {
	e.micro = int(e.m.Train.GradAccum) - 1
	for g := range e.p.Groups {
		if !e.trains(g) {
			continue
		}
		grp := &e.p.Groups[g]
		st := schedule.StreamCompute
		if grp.Policy.Offload {
			st = schedule.StreamHost
		}
		bytes := optimizerTraffic(grp.GradShardNumel, grp.Policy.Orig.Size(), e.m.Train)
		o := blank(schedule.OpOptimizer, st)
		o.Group, o.Buffer, o.Source, o.DType, o.Bytes = int32(g), int32(e.groups[g].shardedParam), int32(e.groups[g].optimizerState), grp.Policy.Orig, bytes
		// It reads the sharded gradients, on the device or the host copy;
		// finalize ordered their last write before it.
		if grad := e.groups[g].shardedGrad; grad != none {
			e.p.SetOpUses(&o, []int32{int32(grad)})
		} else if e.groups[g].hostGrad != none {
			e.p.SetOpUses(&o, []int32{int32(e.groups[g].hostGrad)})
		}
		e.op(o)
	}
	// zero_grad(set_to_none=True): the gradients go back to the pools they
	// came from once the optimizer has read them.
	var done int = -1
	for g := range e.p.Groups {
		if e.groups[g].shardedGrad == none {
			continue
		}
		if done < 0 {
			done = e.record(schedule.StreamCompute)
		}
		e.free(e.groups[g].shardedGrad, done)
		e.groups[g].shardedGrad = none
	}
	e.staleSlicesToNextStep()
}
