package ir

import (
	"fmt"

	"github.com/fsdpc/fsdpc/internal/checked"
)

// computeCosts runs after the forward order is known: whether a module needs
// a backward depends on what flows into it.
func (l *lowerer) computeCosts() {
	m := l.m
	ctx := costCtx{batch: m.Train.MicroBatch, seq: m.Train.SeqLen, act: m.Train.ActivationDType.Size(), compile: m.Train.Compile}
	ctx.tokens, _ = checked.Mul(ctx.batch, ctx.seq)
	regionSeen := map[ModuleID]bool{}    // the region's input is counted
	regionStarted := map[ModuleID]bool{} // a module of the region has run
	m.MFU = MFUCounts{}
	experts := map[ModuleID]work{} // MoE modules: which child holds routed experts
	sacMMs := map[ModuleID]int{}   // selective-op: matmuls run so far in each region's forward
	var readInRegion []bool
	if ctx.compile && m.Train.Checkpointing == CheckpointSelective {
		readInRegion = m.readInRegion()
	}
	for _, id := range m.Forward {
		mod := &m.Modules[id]
		for _, src := range mod.Inputs {
			if m.Modules[src].OutputRequiresGrad {
				mod.InputsRequireGrad = true
			}
		}
		trainable := l.trainableFunc(id)
		anyTrainable := m.anyTrainable(id)
		mod.OutputRequiresGrad = mod.InputsRequireGrad || anyTrainable

		var w work
		md := l.decl[id]
		if md != nil && md.spec != nil {
			var err error
			if w, err = mod.Kind.work(md.attrs, ctx); err != nil {
				l.d.keyErrorf(md.path, "module %q: %v", mod.Name, err)
				continue
			}
		}
		c := l.moduleCost(mod, md, w, trainable)
		m.MFU.AttnFlopsDense += w.attnDense
		if w.experts != "" {
			experts[id] = w
		}
		if region, ok := m.region(id); ok && mod.OutputRequiresGrad {
			mode := m.Train.Checkpointing
			if mode == CheckpointNone || mode == CheckpointSelectiveLayer {
				mode = CheckpointFull // an explicit checkpoint = true region, or a checkpointed layer
			}
			// The region's first module reads the region's input, which
			// backward's rerun starts from: a norm's residual add before it
			// (the previous block's last sum) is not rerun. Nor is the
			// region's own last add, which early stop leaves out
			// (torch.utils.checkpoint: non-reentrant checkpointing stops
			// the rerun once every tensor backward needs is recomputed) and
			// which fsdpc counts with the next region's first norm.
			rerun := c.ElemBytesFwd
			if !regionStarted[region] {
				regionStarted[region] = true
				rerun -= min(w.elemBefore, rerun)
			}
			switch mode {
			case CheckpointFull:
				m.Modules[region].Cost.RecomputeBytes = satAdd(m.Modules[region].Cost.RecomputeBytes, c.ActivationBytes)
				c.ActivationBytes = 0
				if !regionSeen[region] {
					regionSeen[region] = true
					c.ActivationBytes = w.inputBytes
				}
				c.FlopsRecompute = c.FlopsFwd
				c.GEMMsBwd = MergeGEMMs(c.GEMMsBwd, c.GEMMsFwd)
				c.AttnFlopsBwd += c.AttnFlopsFwd
				c.ElemBytesRecompute = rerun
			case CheckpointSelective:
				if md == nil || md.spec == nil || md.actBytes != nil {
					// A module without a kind, or one whose file gives
					// its activation_bytes, keeps what it declares.
					break
				}
				if w.opPolicy {
					n := sacMMs[region]
					// Compiled, the partitioner keeps a saved output only
					// if backward reads it: a module's output that nothing
					// in its region reads (an MLP's output into the
					// residual stream) is not kept. Eager, the policy's
					// cache keeps every saved op's output.
					keepOutput := !ctx.compile || readInRegion[id]
					saved, flops, gemms, err := opSAC(w, &n, ctx.act, keepOutput)
					if err != nil {
						l.d.keyErrorf(md.path, "module %q: %v", mod.Name, err)
						continue
					}
					sacMMs[region] = n
					if !regionSeen[region] {
						// The checkpoint keeps the region's input.
						regionSeen[region] = true
						saved = satAdd(saved, w.inputBytes)
					}
					m.Modules[region].Cost.RecomputeBytes = satAdd(m.Modules[region].Cost.RecomputeBytes, max(c.ActivationBytes-saved, 0))
					c.ActivationBytes = saved
					c.FlopsRecompute = flops
					c.GEMMsBwd = MergeGEMMs(c.GEMMsBwd, gemms)
					c.ElemBytesRecompute = rerun
				} else {
					m.Modules[region].Cost.RecomputeBytes = satAdd(m.Modules[region].Cost.RecomputeBytes, c.ActivationBytes-w.savedSelective)
					c.ActivationBytes = w.savedSelective
					c.FlopsRecompute = w.recomputeSelective
					for _, mm := range w.mms {
						if mm.attention {
							c.AttnFlopsBwd += mm.flops
						}
					}
				}
			}
			c.FlopsBwd += c.FlopsRecompute
		}
		c.RecomputeBytes = mod.Cost.RecomputeBytes // a region may be its own compute module
		mod.Cost = c
	}
	// Containers sum their descendants; children come after parents.
	for id := len(m.Modules) - 1; id > 0; id-- {
		m.Modules[m.Modules[id].Parent].Cost.add(m.Modules[id].Cost)
	}
	m.MFU.Params = m.mfuParams(experts)
}

// opSAC applies torchtitan's per-op selective checkpointing policy
// (torchtitan/models/llama3/infra/parallelize.py, _save_list and
// _custom_policy, the same from 9dec370 in 2024-12 to 6fc499f in 2025-08)
// to one module of a region: of the region's matrix multiplies (aten.mm),
// counted in forward order from 1, the output of every odd-numbered one is
// saved and every even-numbered one is recomputed in backward ("saves
// output of all compute ops, except every second mm"); the attention
// core's outputs (SDPA's output and log-sum-exp) are saved; everything
// element-wise (norms, RoPE, SwiGLU's product, residual adds) is
// recomputed from what is saved. In a Llama block the multiplies run wq,
// wk, wv, wo, w1, w3, w2: wq, wv, w1 and w2's outputs are kept and wk, wo
// and w3 recomputed. n counts the region's multiplies so far; saved is
// what this module keeps, flops and gemms what its backward recomputes.
// keepOutput false drops the module's output multiply from what is kept
// (torch.compile: no backward reads w2's output, so the partitioner does
// not save it, measured by bench/torchmem/blockmem.py; eager keeps it).
func opSAC(w work, n *int, act int64, keepOutput bool) (saved int64, flops float64, gemms []GEMM, err error) {
	var z sizer
	for _, mm := range w.mms {
		if mm.attention {
			saved = satAdd(saved, w.coreSaved)
			continue
		}
		*n++
		if *n%2 == 1 {
			if mm.output && !keepOutput {
				continue
			}
			saved = satAdd(saved, z.mul(mm.gemm.M, mm.gemm.N, max(mm.gemm.Count, 1), act))
			continue
		}
		flops += mm.flops
		if mm.gemm.known() {
			gemms = append(gemms, mm.gemm)
		}
	}
	return saved, flops, gemms, z.err
}

// readInRegion reports, per module, whether a later module of the same
// checkpoint region reads its output.
func (m *Model) readInRegion() []bool {
	read := make([]bool, len(m.Modules))
	for _, id := range m.Forward {
		r, ok := m.region(id)
		if !ok {
			continue
		}
		for _, src := range m.Modules[id].Inputs {
			if rs, ok := m.region(src); ok && rs == r && src != id {
				read[src] = true
			}
		}
	}
	return read
}

// region returns the checkpoint region enclosing a module, if any.
func (m *Model) region(id ModuleID) (ModuleID, bool) {
	for p := id; p != NoModule; p = m.Modules[p].Parent {
		if m.Modules[p].Checkpoint {
			return p, true
		}
	}
	return 0, false
}

// trainableFunc reports whether the parameter with a given module-relative
// name, in the subtree of id, gets a gradient.
func (l *lowerer) trainableFunc(id ModuleID) func(rel string) bool {
	prefix := l.m.Modules[id].Name
	if prefix != "" {
		prefix += "."
	}
	return func(rel string) bool {
		p, ok := l.paramByName[prefix+rel]
		return ok && l.m.Params[p].RequiresGrad
	}
}

// anyTrainable reports whether any parameter in the subtree of id trains.
func (m *Model) anyTrainable(id ModuleID) bool {
	for _, p := range m.Modules[id].Params {
		if m.Params[p].RequiresGrad {
			return true
		}
	}
	for _, c := range m.Modules[id].Children {
		if m.anyTrainable(c) {
			return true
		}
	}
	return false
}

// moduleCost turns a kind's matmuls into forward and backward FLOPs: the
// input gradient of every matmul when anything upstream needs a gradient,
// the weight gradient of every matmul whose weight trains.
func (l *lowerer) moduleCost(mod *Module, md *moduleDecl, w work, trainable func(string) bool) Cost {
	var c Cost
	c.ElemBytesFwd, c.ScratchBwd = w.elemFwd, w.scratchBwd
	var fwd, bwd []GEMM
	for _, mm := range w.mms {
		if mm.attention {
			c.AttnFlopsFwd += mm.flops
		}
		if mm.gemm.known() {
			fwd = append(fwd, mm.gemm)
		}
	}
	c.GEMMsFwd = MergeGEMMs(fwd)
	if !mod.OutputRequiresGrad {
		// Nothing needs a gradient: autograd records no backward here.
		for _, mm := range w.mms {
			c.FlopsFwd += mm.flops
		}
		if md != nil && md.flopsFwd != nil {
			c.FlopsFwd, c.GEMMsFwd = *md.flopsFwd, nil
		}
		return c
	}
	c.ElemBytesBwd = satMul2(w.elemFwd)
	if w.elemBwd > 0 {
		c.ElemBytesBwd = w.elemBwd
	}
	for _, mm := range w.mms {
		c.FlopsFwd += mm.flops
		dx, dw := mm.gemm.backward()
		if !mm.readsInput || mod.InputsRequireGrad {
			c.FlopsBwd += mm.flops * mm.dxFactor
			if mm.attention {
				c.AttnFlopsBwd += mm.flops * mm.dxFactor
			}
			if mm.gemm.known() {
				bwd = append(bwd, dx)
			}
		}
		for _, wt := range mm.weights {
			if trainable(wt) {
				c.FlopsBwd += mm.flops
				if mm.gemm.known() {
					bwd = append(bwd, dw)
				}
				break
			}
		}
	}
	c.GEMMsBwd = MergeGEMMs(bwd)
	c.ActivationBytes = w.saved
	if md == nil {
		return c
	}
	if md.flopsFwd != nil {
		c.GEMMsFwd, c.GEMMsBwd = nil, nil
		c.FlopsFwd = *md.flopsFwd
		if md.flopsBwd == nil {
			// The rule of thumb for explicit modules: one forward's worth
			// for input gradients, one for weight gradients.
			c.FlopsBwd = c.FlopsFwd
			if l.m.anyTrainable(mod.ID) {
				c.FlopsBwd += c.FlopsFwd
			}
		}
	}
	if md.flopsBwd != nil {
		c.GEMMsBwd = nil
		c.FlopsBwd = *md.flopsBwd
	}
	if md.actBytes != nil {
		c.ActivationBytes = *md.actBytes
	}
	return c
}

// Stats are whole-model totals. Tied parameters count once.
type Stats struct {
	Params, Trainable, Frozen int64
	ParamBytes                int64
	BytesByDType              map[DType]int64
	Tensors                   int
	// Per micro-batch and per optimizer step, on one rank.
	FlopsFwd, FlopsBwd float64
	FlopsPerStep       float64
	ActivationBytes    int64
}

// Stats computes the totals.
func (m *Model) Stats() Stats {
	s := Stats{BytesByDType: map[DType]int64{}}
	for i := range m.Params {
		p := &m.Params[i]
		if p.TiedTo != NoParam {
			continue
		}
		s.Tensors++
		s.Params += p.Numel
		if p.RequiresGrad {
			s.Trainable += p.Numel
		} else {
			s.Frozen += p.Numel
		}
		s.ParamBytes += p.Bytes()
		s.BytesByDType[p.DType] += p.Bytes()
	}
	root := m.Modules[0].Cost
	s.FlopsFwd, s.FlopsBwd = root.FlopsFwd, root.FlopsBwd
	s.FlopsPerStep = (root.FlopsFwd + root.FlopsBwd) * float64(m.Train.GradAccum)
	s.ActivationBytes = root.ActivationBytes
	return s
}

// ModuleByName finds a module by its dotted name.
func (m *Model) ModuleByName(name string) (ModuleID, error) {
	for i := range m.Modules {
		if m.Modules[i].Name == name {
			return ModuleID(i), nil
		}
	}
	return 0, fmt.Errorf("no module %q", name)
}

// SubtreeParams returns, per module, the number of parameter elements it
// and its descendants own (tied aliases excluded).
func (m *Model) SubtreeParams() []int64 {
	out := make([]int64, len(m.Modules))
	for i := range m.Params {
		if p := &m.Params[i]; p.TiedTo == NoParam {
			out[p.Module] += p.Numel
		}
	}
	for id := len(m.Modules) - 1; id > 0; id-- {
		out[m.Modules[id].Parent] += out[id]
	}
	return out
}
