package planner

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// emitSchedule writes the program one rank runs for one training step, in
// the order the CPU issues it, following FSDP2's hooks:
//
//	root pre-forward   copy-in and all-gather streams wait for the compute
//	                   stream (the previous step's optimizer)
//	pre-forward(g)     unshard(g): copy-in (cast) on CI, all-gather on AG;
//	                   wait_for_unshard(g): CI and AG wait for the previous
//	                   group's copy-out, whose all-gather output is freed;
//	                   compute waits for the all-gather; copy-out
//	forward compute    on the compute stream
//	post-forward(g)    reshard: free, keep, or keep a 1/N slice
//	pre-backward(g)    unshard (unless prefetched), wait, free the all-gather
//	                   output at once; prefetch the group that ran before it
//	backward compute   recompute included
//	post-backward(g)   reshard; compute waits for the previous
//	                   reduce-scatter and frees its input; chunk-cat into the
//	                   reduce-scatter input; reduce-scatter (then HSDP's
//	                   all-reduce); divide, cast, offload
//	final callback     deferred groups' post-backward; finalize
//	optimizer step     per group, on the device or (offload) the host
//
// Implicit forward prefetch is the CPU running ahead: nothing but events
// orders a group's all-gather after the previous group's compute, and the
// copy-in stream's wait for the previous copy-out bounds live all-gather
// outputs at two.
func emitSchedule(s *state) error {
	return newEmitter(s).emit()
}

func (e *emitter) emit() error {
	s := e.s
	if e.checkGradientsReach(); s.failed() {
		return nil
	}
	accum := s.m.Train.GradAccum
	// Every group and segment issues several operations per micro-batch
	// (at least a gather, its wait, a compute and a free), so a schedule
	// that cannot fit is refused before it is built.
	if least := minOpsPerUnit * accum * int64(len(e.p.Groups)+len(e.segments)); least > int64(opLimit) {
		e.tooLongError()
		return nil
	}
	e.presize(int(accum))
	e.persistent()
	for mb := 0; mb < int(accum) && !e.tooLong; mb++ {
		e.micro = mb
		e.phase = schedule.PhaseForward
		e.forward()
		e.phase = schedule.PhaseBackward
		e.backward(mb == int(accum)-1 || !s.m.Train.AccumulateUnsharded)
	}
	e.phase = schedule.PhaseOptimizer
	e.optimizer()
	if e.tooLong {
		e.tooLongError()
		return nil
	}
	for g := range e.groups {
		e.groups[g].checkIdle()
	}
	if e.bug != nil {
		return fmt.Errorf("internal error: the emitter left FSDP2's state machine (please report): %w", e.bug)
	}
	e.p.Events = e.nextEvent
	if !s.opts.scoreOnly {
		// The tables in the form a decoded plan has (scoring needs none).
		e.p.CompactLists()
	}
	for g := range e.p.Groups {
		if e.groups[g].mistargeted {
			s.warnAt(s.groupPos(g), "%s: backward prefetch all-gathers it although no gradient flows through it (FSDP2 pitfall 5): the gather is wasted and its %s are held until the end of backward; FSDP2's explicit prefetch lists (set_modules_to_backward_prefetch) can skip it, fsdpc's prefetch depth cannot",
				groupLabel(&e.p.Groups[g]), ir.FormatBytes(e.unshardedBytes(g)))
		}
	}
	for g := range e.p.Groups {
		if e.keepsStaleSlice(g) {
			pol := &e.p.Groups[g].Policy
			s.warnAt(s.groupPos(g), "%s: reshard_after_forward = %d keeps a 1/%d slice of its parameters (%s) after forward that backward never gathers from: no gradient flows into its output, so FSDP2 fires no pre-backward for it and holds the slice until the next forward replaces it; reshard_after_forward = true for it holds nothing",
				groupLabel(&e.p.Groups[g]), pol.ReshardTo, pol.ReshardTo, ir.FormatBytes(e.unshardedBytes(g)/int64(pol.ReshardTo)))
		}
	}
	return nil
}

// MaxOpsPerRank bounds a plan's schedule: 4,194,304 operations per rank
// encode to about 170 MiB of plan.bin (about 40 bytes each) and take the
// planner about 1.5 GiB (about 350 bytes each, measured on the zoo and on
// 10,000 to 100,000 repeated layers), so every plan fsdpc writes can be
// read back by show, verify and run (plan.bin is at most 1 GiB) on a
// machine with a few gigabytes. docs/model-format.md, Limits.
const MaxOpsPerRank = 1 << 22

// schedule.Op holds its indices, micro-batch and group size as int32, and
// the emitter narrows its ints to them unchecked: events, non-persistent
// buffers and micro-batches number at most the ops, so this bound keeps
// them in range (the line below fails to compile if it does not), and a
// group's ranks are at most the model format's world size, 2^24. Verify,
// which every plan passes, would refuse a wrapped value.
var _ int32 = MaxOpsPerRank

// opLimit is MaxOpsPerRank; tests lower it to reach the limit cheaply.
var opLimit = MaxOpsPerRank

// minOpsPerUnit is fewer operations than any group or segment issues in a
// micro-batch (the zoo issues 12 to 47).
const minOpsPerUnit = 4

func (e *emitter) tooLongError() {
	e.s.scheduleTooLong(len(e.p.Groups))
}

// scheduleTooLong is the one error for a schedule over opLimit, whether
// the units pass foresees it or the emitter reaches it.
// It is placed at train.grad_accum, the setting it names.
func (s *state) scheduleTooLong(units int) {
	s.errorAt(s.m.KeyPos("train.grad_accum"), nil, "the schedule needs more than %d operations per rank (train.grad_accum = %d micro-batches over %d FSDP units), fsdpc's limit: use fewer micro-batches per step or coarser units",
		opLimit, s.m.Train.GradAccum, units)
}

type emitter struct {
	s     *state
	m     *ir.Model
	p     *schedule.Plan
	micro int
	phase schedule.Phase
	// tooLong is set once the schedule reaches MaxOpsPerRank operations.
	tooLong bool
	// bug is the first transition a group made that FSDP2's state machine
	// does not (paramGroup.illegal): reported as an internal error.
	bug error

	nextEvent   int
	eventStream []schedule.Stream // where each event was recorded
	groups      []paramGroup      // per group, FSDP2's FSDPParamGroup state
	comm        commContext       // FSDP2's FSDPCommContext state

	first, last []int    // forward spans per group
	hookOrder   [2][]int // groups with hooks in forward and backward hook order (nextGroups)
	outDepth    []int    // per group, the depth of the module making its output tensor (outputDepths)
	// Groups by the forward position of their last and first module
	// (groupsEndingAt, groupsStartingAt).
	endingAt, startingAt map[int][]int
	// Segments: consecutive compute modules of one group.
	segments []segment
	segAct   []int // activation buffer per segment in this micro-batch
}

type segment struct {
	group          int
	modules        []ir.ModuleID
	start, end     int   // positions in the forward order
	grad           bool  // some module's output needs a gradient: backward runs
	paramNumel     int64 // parameters the segment's modules compute with
	fwd, bwd       float64
	act, recompute int64
	// The attention core's share of fwd and bwd, and the element-wise
	// kernels' HBM traffic (ir.Cost): forward, backward's own, and the
	// forward kernels backward reruns under checkpointing.
	attnFwd, attnBwd                float64
	elemFwd, elemBwd, elemRecompute int64
	// The shapes of its matrix multiplies (ir.Cost.GEMMsFwd, GEMMsBwd),
	// and where the plan's GEMM table holds them once the first forward
	// or backward of the segment is emitted (the rest share the run).
	gemmFwd, gemmBwd     []ir.GEMM
	gemmFwdAt, gemmBwdAt schedule.Span
}

// setGEMMs gives o the shapes gs, held at *at in the plan's table: added
// there the first time.
func (e *emitter) setGEMMs(o *schedule.Op, gs []ir.GEMM, at *schedule.Span) {
	if len(gs) > 0 && at.Len == 0 {
		e.p.SetOpGEMMs(o, gs)
		*at = o.GEMMs
	}
	o.GEMMs = *at
}

func newEmitter(s *state) *emitter {
	n := len(s.plan.Groups)
	e := &emitter{s: s, m: s.m, p: s.plan}
	e.groups = make([]paramGroup, n)
	for g := range e.groups {
		e.groups[g] = newParamGroup(e, g)
	}
	e.first, e.last = s.forwardSpans()
	e.outDepth = e.outputDepths()
	e.buildSegments()
	return e
}

// checkGradientsReach refuses a unit whose parameters require gradients
// that autograd never produces: none of its modules is on a path to the
// loss with a gradient, so backward never reaches it. FSDP2 would leave
// those gradients None and skip them; a model file that says they train
// has a mistake the user should hear about, not a plan that pretends.
func (e *emitter) checkGradientsReach() {
	reached := make([]bool, len(e.p.Groups))
	for i := range e.segments {
		if e.segments[i].grad {
			reached[e.segments[i].group] = true
		}
	}
	for g := range e.p.Groups {
		if !e.trains(g) || reached[g] {
			continue
		}
		name, pos := "", ir.Pos{}
		for i, gp := range e.p.Groups[g].Params {
			if gp.RequiresGrad {
				name, pos = gp.Name, e.m.Params[e.s.units[g].params[i]].Pos
				break
			}
		}
		e.s.errorAt(pos, nil, "parameter %q requires a gradient, but backward never reaches %s: no module of it computes with a trainable parameter or an input that needs a gradient; set requires_grad = false or give it a module that uses it",
			name, groupLabel(&e.p.Groups[g]))
	}
}

// opsPool holds the operation lists of scored tuner candidates, so the
// next candidate emits into one instead of allocating and clearing its
// own (a sixth of the tuner's time on llama3-70b went to that).
var opsPool sync.Pool

// recycleOps hands a scored plan's operation list to the next emission.
func recycleOps(p *schedule.Plan) {
	ops := p.Ops[:0]
	p.Ops, p.GEMMTable, p.UseTable = nil, nil, nil
	opsPool.Put(&ops)
}

// presize reserves the program's slices from the emitter's own shape, so
// they are not regrown and copied as the emission appends to them. The
// zoo and the scaling models emit 16 to 30 operations and 5 to 6 buffers
// per group or segment and micro-batch; an estimate that falls short only
// costs a regrowth.
func (e *emitter) presize(accum int) {
	if e.s.opts.scoreOnly && e.p.Ops == nil {
		if v, ok := opsPool.Get().(*[]schedule.Op); ok {
			e.p.Ops = *v
		}
	}
	per := max(accum, 1) * (len(e.p.Groups) + len(e.segments))
	e.p.Ops = slices.Grow(e.p.Ops, 30*per+16*len(e.p.Groups))
	e.p.Buffers = slices.Grow(e.p.Buffers, 6*per+4*len(e.p.Groups))
	e.p.EventNames = slices.Grow(e.p.EventNames, 8*per)
	e.eventStream = slices.Grow(e.eventStream, 8*per)
}

// buildSegments splits the forward order into runs of compute modules that
// belong to one group with no unit starting or ending inside them.
func (e *emitter) buildSegments() {
	m := e.m
	subtree := m.SubtreeParams()
	boundary := make([]bool, len(m.Forward)+1)
	for g := range e.first {
		if e.last[g] >= 0 {
			boundary[e.first[g]] = true
			boundary[e.last[g]+1] = true
		}
	}
	for pos, id := range m.Forward {
		g := e.s.unitOf[id]
		mod := &m.Modules[id]
		region, inRegion := regionOf(m, id)
		startNew := len(e.segments) == 0 || boundary[pos] || e.segments[len(e.segments)-1].group != g
		if startNew {
			e.segments = append(e.segments, segment{group: g, start: pos})
		}
		seg := &e.segments[len(e.segments)-1]
		seg.modules = append(seg.modules, id)
		seg.end = pos
		seg.fwd += mod.Cost.FlopsFwd
		seg.bwd += mod.Cost.FlopsBwd
		seg.act += mod.Cost.ActivationBytes
		seg.attnFwd += mod.Cost.AttnFlopsFwd
		seg.attnBwd += mod.Cost.AttnFlopsBwd
		seg.elemFwd += mod.Cost.ElemBytesFwd
		seg.elemBwd += mod.Cost.ElemBytesBwd
		seg.elemRecompute += mod.Cost.ElemBytesRecompute
		seg.gemmFwd = ir.MergeGEMMs(seg.gemmFwd, mod.Cost.GEMMsFwd)
		seg.gemmBwd = ir.MergeGEMMs(seg.gemmBwd, mod.Cost.GEMMsBwd)
		seg.grad = seg.grad || mod.OutputRequiresGrad
		seg.paramNumel += subtree[id]
		seg.recompute = max(seg.recompute, mod.Cost.ScratchBwd)
		if inRegion && firstInRegion(m, id, region) {
			seg.recompute = max(seg.recompute, m.Modules[region].Cost.RecomputeBytes)
		}
	}
	recomputes := false
	for i := range e.segments {
		e.p.Modules = append(e.p.Modules, segmentName(m, e.segments[i].modules))
		recomputes = recomputes || e.segments[i].elemRecompute > 0
	}
	if recomputes {
		for i := range e.segments {
			e.p.ElemRecompute = append(e.p.ElemRecompute, e.segments[i].elemRecompute)
		}
	}
	e.segAct = make([]int, len(e.segments))
}

func regionOf(m *ir.Model, id ir.ModuleID) (ir.ModuleID, bool) {
	for a := id; a != ir.NoModule; a = m.Modules[a].Parent {
		if m.Modules[a].Checkpoint {
			return a, true
		}
	}
	return 0, false
}

// firstInRegion reports whether id is the first compute module of region
// in declaration order (regions are contiguous subtrees).
func firstInRegion(m *ir.Model, id, region ir.ModuleID) bool {
	for a := region; ; {
		mod := &m.Modules[a]
		if mod.Compute {
			return a == id
		}
		if len(mod.Children) == 0 {
			return false
		}
		a = mod.Children[0]
	}
}

func segmentName(m *ir.Model, mods []ir.ModuleID) string {
	first, last := m.Modules[mods[0]].Name, m.Modules[mods[len(mods)-1]].Name
	if len(mods) == 1 {
		return first
	}
	return first + " … " + last
}

// --- emission primitives -------------------------------------------------

func (e *emitter) op(o schedule.Op) {
	if len(e.p.Ops) >= opLimit {
		e.tooLong = true // reported after the micro-batch; see emitSchedule
		return
	}
	o.Phase, o.Micro = e.phase, int32(e.micro)
	e.p.Ops = append(e.p.Ops, o)
}

// blank is an Op with no group, module, buffer or event.
func blank(kind schedule.OpKind, st schedule.Stream) schedule.Op {
	return schedule.Op{Kind: kind, Stream: st, Group: -1, Module: -1, Buffer: -1, Source: -1, Event: -1}
}

func (e *emitter) record(st schedule.Stream) int {
	ev := e.nextEvent
	e.nextEvent++
	name := ""
	if !e.s.opts.scoreOnly {
		name = e.eventName(st)
	}
	e.p.EventNames = append(e.p.EventNames, name)
	e.eventStream = append(e.eventStream, st)
	o := blank(schedule.OpRecord, st)
	o.Event = int32(ev)
	e.op(o)
	return ev
}

// eventName labels an event after the operation it follows: "layers.3
// all-gather mb0", unique within the plan.
func (e *emitter) eventName(st schedule.Stream) string {
	// Names are concatenated, not formatted: a plan names thousands of
	// events and buffers, and fmt was a tenth of the emitter's time.
	group, what := "", st.String()+" ready"
	for i := len(e.p.Ops) - 1; i >= 0; i-- {
		o := &e.p.Ops[i]
		if o.Phase != e.phase || int(o.Micro) != e.micro {
			break
		}
		if o.Stream != st || o.Kind == schedule.OpRecord || o.Kind == schedule.OpWait ||
			o.Kind == schedule.OpAlloc || o.Kind == schedule.OpFree {
			continue
		}
		what = o.Kind.String()
		if o.Group >= 0 {
			group = e.p.Groups[o.Group].Label() + " "
		}
		break
	}
	name := group + what + " " + e.phase.String() + " mb" + strconv.Itoa(e.micro)
	base, n := name, 1
	for e.eventNamed(name) {
		n++
		name = base + " #" + strconv.Itoa(n)
	}
	return name
}

func (e *emitter) eventNamed(name string) bool {
	for i := len(e.p.EventNames) - 1; i >= 0 && i >= len(e.p.EventNames)-64; i-- {
		if e.p.EventNames[i] == name {
			return true
		}
	}
	return false
}

func (e *emitter) wait(st schedule.Stream, ev int) {
	if ev < 0 {
		return
	}
	o := blank(schedule.OpWait, st)
	o.Event = int32(ev)
	e.op(o)
}

func (e *emitter) newBuffer(g int, kind schedule.BufferKind, pool schedule.Pool, bytes int64, persistent bool, what string) int {
	if e.s.opts.scoreOnly {
		e.p.Buffers = append(e.p.Buffers, schedule.Buffer{Kind: kind, Pool: pool, Group: g, Bytes: bytes, Persistent: persistent})
		return len(e.p.Buffers) - 1
	}
	group, micro, bwd := "", "", ""
	if g >= 0 {
		group = e.p.Groups[g].Label() + "/"
	}
	if !persistent {
		micro = "/mb" + strconv.Itoa(e.micro)
		if e.phase == schedule.PhaseBackward {
			bwd = "/bwd"
		}
	}
	name := group + what + micro + bwd
	// Names are unique: a second buffer of the same role gets a suffix.
	base, n := name, 1
	for e.bufferNamed(name) {
		n++
		name = base + "#" + strconv.Itoa(n)
	}
	e.p.Buffers = append(e.p.Buffers, schedule.Buffer{Name: name, Kind: kind, Pool: pool, Group: g, Bytes: bytes, Persistent: persistent})
	return len(e.p.Buffers) - 1
}

func (e *emitter) bufferNamed(name string) bool {
	// Recent buffers are the likely clash; scan back a bounded window.
	for i := len(e.p.Buffers) - 1; i >= 0 && i >= len(e.p.Buffers)-64; i-- {
		if e.p.Buffers[i].Name == name {
			return true
		}
	}
	return false
}

func (e *emitter) alloc(st schedule.Stream, g int, kind schedule.BufferKind, bytes int64, what string) int {
	b := e.newBuffer(g, kind, schedule.PoolOf(st), bytes, false, what)
	o := blank(schedule.OpAlloc, st)
	o.Group, o.Buffer, o.Bytes = int32(g), int32(b), bytes
	e.op(o)
	return b
}

// free releases a buffer on the stream that allocated it, after that stream
// waits for the given events: the caching allocator hands a freed block to
// the next allocation on its own stream at once, so every use on another
// stream must be ordered before the free by an event (FSDP2 pitfall 7).
func (e *emitter) free(buf int, after ...int) {
	if buf < 0 {
		return
	}
	st := schedule.StreamOfPool(e.p.Buffers[buf].Pool)
	for _, ev := range after {
		if ev >= 0 && e.eventStream[ev] != st { // same stream: program order suffices
			e.wait(st, ev)
		}
	}
	o := blank(schedule.OpFree, st)
	o.Group, o.Buffer, o.Bytes = int32(e.p.Buffers[buf].Group), int32(buf), e.p.Buffers[buf].Bytes
	e.op(o)
}

// --- sizes -----------------------------------------------------------------

func (e *emitter) W() int { return e.m.Cluster.ShardSize() }

// unshardedBytes is U·b_c: the all-gather output and the unsharded
// parameters.
func (e *emitter) unshardedBytes(g int) int64 {
	return e.p.Groups[g].ShardBytes * int64(e.W())
}

// shardedBytes is a rank's padded shards in the parameters' own dtypes.
func (e *emitter) shardedBytes(g int) int64 {
	var n int64
	for _, p := range e.p.Groups[g].Params {
		n += p.ShardNumel * p.DType.Size()
	}
	return n
}

// casts reports whether any of the group's parameters gathers in another
// dtype than its own: only then does copy-in go through a temporary.
func (e *emitter) casts(g int) bool {
	for _, p := range e.p.Groups[g].Params {
		if p.GatherDType != p.DType {
			return true
		}
	}
	return false
}

// computeDType is the dtype the group's trainable parameters compute and
// produce gradients in.
func (e *emitter) computeDType(g int) ir.DType {
	for _, p := range e.p.Groups[g].Params {
		if p.RequiresGrad {
			return p.GatherDType
		}
	}
	return e.p.Groups[g].Policy.Param
}

// gradNumel is N′: the unpadded elements of the parameters with gradients.
func (e *emitter) gradNumel(g int) int64 {
	var n int64
	for _, p := range e.p.Groups[g].Params {
		if p.RequiresGrad {
			n += numel(p.Shape)
		}
	}
	return n
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

func (e *emitter) trains(g int) bool { return e.p.Groups[g].GradShardNumel > 0 }

// --- persistent state ------------------------------------------------------

func (e *emitter) persistent() {
	for g := range e.p.Groups {
		grp := &e.p.Groups[g]
		pool := schedule.PoolCompute
		if grp.Policy.Offload {
			pool = schedule.PoolHost
		}
		e.groups[g].shardedParam = e.newBuffer(g, schedule.BufShardedParams, pool, e.shardedBytes(g), true, "sharded-params")
		if e.trains(g) && e.m.Train.OptimizerStateBytes > 0 {
			// The optimizer sees the unpadded local tensors; the padded
			// size bounds every rank.
			e.groups[g].optimizerState = e.newBuffer(g, schedule.BufOptimizerState, pool, grp.GradShardNumel*e.m.Train.OptimizerStateBytes, true, "optimizer-state")
		}
		if e.trains(g) && grp.Policy.Offload {
			e.groups[g].hostGrad = e.newBuffer(g, schedule.BufShardedGrads, pool, grp.GradShardNumel*grp.Policy.Orig.Size(), true, "sharded-grads")
		}
	}
}

// --- forward ---------------------------------------------------------------

func (e *emitter) forward() {
	e.comm.postForwardOrder = e.comm.postForwardOrder[:0]
	// The root's pre-forward makes the copy-in and all-gather streams wait
	// for the compute stream: the optimizer step (or the previous
	// micro-batch) must finish before shards are read.
	ev := e.record(schedule.StreamCompute)
	e.wait(schedule.StreamCopyIn, ev)
	e.wait(schedule.StreamAllGather, ev)
	if e.micro == 0 {
		e.previousStepSlices()
	}
	opening, closing := e.hooksByPosition()
	for si := range e.segments {
		seg := &e.segments[si]
		for _, g := range opening[seg.start] {
			e.groups[g].preForward()
		}
		e.segAct[si] = -1
		if seg.act > 0 {
			e.segAct[si] = e.alloc(schedule.StreamCompute, seg.group, schedule.BufActivations, seg.act, "activations/"+e.p.Modules[si])
		}
		// Forward reads the group's unsharded parameters and writes the
		// activations backward will need; its traffic is the weights once
		// and the saved activations.
		o := blank(schedule.OpForward, schedule.StreamCompute)
		o.Group, o.Module, o.FLOPs = int32(seg.group), int32(si), seg.fwd
		o.Source, o.Buffer = int32(e.groups[seg.group].unshardedParam), int32(e.segAct[si])
		o.DType = e.computeDType(seg.group)
		o.Bytes = seg.paramNumel*o.DType.Size() + seg.act
		o.AttnFLOPs, o.ElemBytes = seg.attnFwd, seg.elemFwd
		e.setGEMMs(&o, seg.gemmFwd, &seg.gemmFwdAt)
		e.op(o)
		for _, g := range closing[seg.end] {
			e.groups[g].postForward()
		}
	}
	// Root post-forward: drop the last all-gather output "to avoid holding
	// onto memory after forward".
	e.freeAllGatherState()
}

// freeAllGatherState frees the forward all-gather output kept for
// overlap (comm_ctx.all_gather_state = None), once the copy-in and
// all-gather streams have waited for its copy-out (R23, R27).
func (e *emitter) freeAllGatherState() {
	if st := &e.comm.allGatherState; st.held {
		e.wait(schedule.StreamCopyIn, st.event)
		e.wait(schedule.StreamAllGather, st.event)
		e.free(st.out)
		*st = allGatherState{}
	}
}

// hooksByPosition lists the groups whose pre-forward fires before each
// forward position (outer units first) and whose post-forward fires after
// it (inner units first).
func (e *emitter) hooksByPosition() (opening, closing map[int][]int) {
	opening, closing = map[int][]int{}, map[int][]int{}
	for g := range e.p.Groups {
		if e.last[g] < 0 {
			continue
		}
		opening[e.first[g]] = append(opening[e.first[g]], g)
		closing[e.last[g]] = append(closing[e.last[g]], g)
	}
	for _, gs := range opening {
		// An enclosing unit opens first and closes last.
		sort.SliceStable(gs, func(i, j int) bool { return e.encloses(gs[i], gs[j]) })
	}
	for _, gs := range closing {
		sort.SliceStable(gs, func(i, j int) bool { return e.encloses(gs[j], gs[i]) })
	}
	return opening, closing
}

func (e *emitter) span(g int) int { return e.last[g] - e.first[g] }

// encloses orders two units that open or close at one position: the one
// spanning more of the forward encloses the other, and at equal spans the
// one whose module sits higher in the tree does (the root around a merged
// fully_shard([emb, output]), which spans the whole forward too).
func (e *emitter) encloses(a, b int) bool {
	if sa, sb := e.span(a), e.span(b); sa != sb {
		return sa > sb
	}
	return e.depth(a) < e.depth(b)
}

// depth is how deep a unit's first module sits in the module tree.
func (e *emitter) depth(g int) int {
	d := 0
	for m := e.s.units[g].modules[0]; m != ir.NoModule; m = e.m.Modules[m].Parent {
		d++
	}
	return d
}

// preForward is FSDPParamGroup.pre_forward: unshard and wait for it
// (R22, R23), then explicit forward prefetch (R39).
func (pg *paramGroup) preForward() {
	e, g := pg.e, pg.index
	pg.unshard()
	pg.waitForUnshard(true)
	// Explicit forward prefetch: the next k groups to start forward, issued
	// right after this group's own copy-out.
	if k := e.p.Groups[g].Policy.PrefetchForward; k > 0 {
		for _, t := range e.nextGroups(g, k, true) {
			e.groups[t].unshard()
		}
	}
}

// nextGroups returns up to k groups whose hooks fire after g's: in forward,
// the groups whose pre-forward comes later (a unit starting where g starts
// but nested in it comes after it); in backward, likewise for pre-backward.
// The groups are sorted in hook order once per direction, so each call is a
// binary search and k steps: planning stays linear in depth with explicit
// prefetch.
func (e *emitter) nextGroups(g, k int, forward bool) []int {
	d := 0
	if !forward {
		d = 1
	}
	if e.hookOrder[d] == nil {
		var order []int
		for h := range e.p.Groups {
			if e.last[h] >= 0 {
				order = append(order, h)
			}
		}
		sort.SliceStable(order, func(i, j int) bool { return e.hookBefore(order[i], order[j], forward) })
		e.hookOrder[d] = order
	}
	order := e.hookOrder[d]
	i := sort.Search(len(order), func(i int) bool { return e.hookBefore(g, order[i], forward) })
	out := make([]int, 0, k)
	for ; i < len(order) && len(out) < k; i++ {
		out = append(out, order[i])
	}
	return out
}

// hookBefore orders hooks by position. At one position, pre-forwards run
// outer units first, and pre-backwards in the order preBackwardFirst gives.
func (e *emitter) hookBefore(a, b int, forward bool) bool {
	if forward {
		if e.first[a] != e.first[b] {
			return e.first[a] < e.first[b]
		}
		return e.span(a) > e.span(b)
	}
	if e.last[a] != e.last[b] {
		return e.last[a] > e.last[b]
	}
	return e.preBackwardFirst(a, b)
}

// unshard is FSDPParamGroup.unshard (R22): the copy-in and all-gather of
// the group, unless its parameters are already unsharded or gathering.
func (pg *paramGroup) unshard() {
	e, g := pg.e, pg.index
	if pg.state == unsharded || pg.allGatherResult.pending || len(e.p.Groups[g].Params) == 0 {
		return
	}
	grp := &e.p.Groups[g]
	pol := &grp.Policy
	CI, AG := schedule.StreamCopyIn, schedule.StreamAllGather
	fromSlice := pg.state == shardedPostForward
	// int reshard: the backward all-gather reads the post-forward slice
	// (R36).
	if fromSlice {
		e.wait(CI, pg.reshardAfterForwardEvent)
		e.wait(AG, pg.reshardAfterForwardEvent)
	}
	out := e.alloc(CI, g, schedule.BufAllGatherOut, e.unshardedBytes(g), "all-gather-out")
	shardBytes := grp.ShardBytes
	src := pg.shardedParam
	var temps []int
	switch {
	case fromSlice:
		// Already in the parameter dtype: no cast; each of the N ranks
		// contributes its 1/N of the unsharded parameters.
		src = pg.postForwardSlice
		shardBytes = e.unshardedBytes(g) / int64(pol.ReshardTo)
	case pol.Offload:
		h2d := e.alloc(CI, g, schedule.BufH2DTemp, e.shardedBytes(g), "h2d")
		o := blank(schedule.OpH2D, CI)
		o.Group, o.Buffer, o.Source, o.Bytes, o.DType = int32(g), int32(h2d), int32(src), e.shardedBytes(g), pol.Orig
		e.op(o)
		src, temps = h2d, append(temps, h2d)
		if e.casts(g) {
			cast := e.alloc(CI, g, schedule.BufCastTemp, shardBytes, "cast")
			temps = append(temps, cast)
		}
	case e.casts(g):
		cast := e.alloc(CI, g, schedule.BufCastTemp, shardBytes, "cast")
		temps = append(temps, cast)
	}
	o := blank(schedule.OpCopyIn, CI)
	o.Group, o.Buffer, o.Source, o.Bytes, o.DType = int32(g), int32(out), int32(src), shardBytes, pol.Param
	e.op(o)
	for _, t := range temps {
		e.free(t)
	}
	size, pgroup := e.W(), schedule.PGShard
	if fromSlice {
		size, pgroup = pol.ReshardTo, schedule.PGPostForward
	}
	var ev int
	if size > 1 {
		e.wait(AG, e.record(CI))
		c := blank(schedule.OpAllGather, AG)
		c.Group, c.Buffer, c.Source = int32(g), int32(out), int32(out)
		c.PG, c.PGSize, c.DType, c.Bytes = pgroup, int32(size), pol.Param, e.unshardedBytes(g)
		e.op(c)
		ev = e.record(AG)
	} else {
		ev = e.record(CI) // one rank: the copy-in is the gather
	}
	pg.allGatherResult = allGatherResult{pending: true, out: out, event: ev}
}

// waitForUnshard is FSDPParamGroup.wait_for_unshard (R23, R28): the
// gathered parameters are copied out on the compute stream. In forward the
// all-gather output is kept until the next group's wait (so its copy-out
// overlaps the next all-gather); otherwise it is freed at once.
func (pg *paramGroup) waitForUnshard(forward bool) {
	if !pg.allGatherResult.pending {
		return
	}
	e, g := pg.e, pg.index
	ag := pg.allGatherResult
	D, CI, AG := schedule.StreamCompute, schedule.StreamCopyIn, schedule.StreamAllGather
	if forward {
		e.freeAllGatherState()
	}
	e.wait(D, ag.event)
	un := e.alloc(D, g, schedule.BufUnsharded, e.unshardedBytes(g), "unsharded")
	o := blank(schedule.OpCopyOut, D)
	o.Group, o.Buffer, o.Source, o.Bytes, o.DType = int32(g), int32(un), int32(ag.out), e.unshardedBytes(g), e.p.Groups[g].Policy.Param
	e.op(o)
	pg.toUnsharded(un)
	co := e.record(D)
	if forward {
		e.comm.allGatherState = allGatherState{held: true, out: ag.out, event: co}
	} else {
		e.wait(CI, co)
		e.wait(AG, co)
		e.free(ag.out)
	}
	pg.allGatherResult = allGatherResult{}
}

// postForward is FSDPParamGroup.post_forward: reshard, and record the
// group in the post-forward order backward prefetch reads (R26).
func (pg *paramGroup) postForward() {
	pg.reshard(true)
	pg.e.comm.postForwardOrder = append(pg.e.comm.postForwardOrder, pg.index)
}

// reshard is FSDPParamGroup.reshard. After forward it follows
// reshard_after_forward (R26): true frees the unsharded parameters, false
// keeps them, N keeps a 1/N slice (R36). After backward it always returns
// the group to its shards (reshard_after_backward, R31).
func (pg *paramGroup) reshard(forward bool) {
	e, g := pg.e, pg.index
	pol := &e.p.Groups[g].Policy
	if forward {
		switch pol.Reshard {
		case schedule.ReshardFalse:
			return
		case schedule.ReshardTo:
			if pg.state != unsharded {
				return // nothing was gathered: a group without parameters
			}
			D := schedule.StreamCompute
			bytes := e.unshardedBytes(g) / int64(pol.ReshardTo)
			sl := e.alloc(D, g, schedule.BufPostForwardSlice, bytes, "post-forward-slice")
			o := blank(schedule.OpReshard, D)
			o.Group, o.Buffer, o.Source, o.Bytes, o.DType = int32(g), int32(sl), int32(pg.unshardedParam), bytes, pol.Param
			e.op(o)
			// The new slice replaces one that post-backward left
			// referenced: FSDP2 clones before it drops the old one.
			e.free(pg.staleSlice)
			pg.staleSlice = none
			pg.toShardedPostForward(sl)
			return
		}
	}
	pg.toSharded()
}

// firesPreBackward reports whether backward reaches group g's output
// tensor, so its pre-backward hook fires (R28): only if the output of its
// last forward compute module requires a gradient.
func (e *emitter) firesPreBackward(g int) bool {
	return e.last[g] >= 0 && e.m.Modules[e.m.Forward[e.last[g]]].OutputRequiresGrad
}

// keepsStaleSlice reports whether group g's post-forward slice outlives
// its micro-batch: under int reshard a unit whose pre-backward never fires
// is never copied out in backward (to_unsharded frees the slice), and the
// final callback's post-backward only marks it sharded (to_sharded keeps
// _sharded_post_forward_param_data), so the slice stays until the unit's
// next post-forward replaces it, across the optimizer into the next step.
func (e *emitter) keepsStaleSlice(g int) bool {
	pol := &e.p.Groups[g].Policy
	return pol.Reshard == schedule.ReshardTo && len(e.p.Groups[g].Params) > 0 && e.last[g] >= 0 && !e.firesPreBackward(g)
}

// previousStepSlices allocates, at the start of the step, the slices the
// previous step's last micro-batch left (keepsStaleSlice), so the step's
// memory is its steady state's; the step frees its own last ones after the
// optimizer (staleSlicesToNextStep).
func (e *emitter) previousStepSlices() {
	for g := range e.p.Groups {
		if e.keepsStaleSlice(g) {
			pol := &e.p.Groups[g].Policy
			e.groups[g].staleSlice = e.alloc(schedule.StreamCompute, g, schedule.BufPostForwardSlice, e.unshardedBytes(g)/int64(pol.ReshardTo), "post-forward-slice-of-previous-step")
		}
	}
}

// staleSlicesToNextStep frees the slices the step's last micro-batch
// left: the next step's previousStepSlices stands for them.
func (e *emitter) staleSlicesToNextStep() {
	for g := range e.p.Groups {
		if e.groups[g].staleSlice != none {
			e.free(e.groups[g].staleSlice)
			e.groups[g].staleSlice = none
		}
	}
}
