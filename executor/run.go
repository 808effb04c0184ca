package executor

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/executor/internal/unproven"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Options configure a run.
type Options struct {
	// Scale shrinks every tensor dimension by this factor (Scale); 0 or 1
	// runs the plan at full size.
	Scale int
	// Steps is how many training steps to run (default 1).
	Steps int
	// Ranks, when set, must be the plan's world size: a plan is compiled
	// for its ranks and runs on all of them.
	Ranks int
	// Timeout is how long nothing may progress while a stream waits before
	// the run is declared deadlocked (default 10 s).
	Timeout time.Duration
	// MemoryLimit caps the host memory a run may need (default: half the
	// memory available).
	MemoryLimit int64
	// DataOnly turns off the happens-before hazard check and the CPU's
	// issue-time checks (use after free, waits before records, repeated
	// collectives), leaving what the numbers and the poison show, and
	// deadlock detection.
	DataOnly bool
	// Progress, if set, is called about ten times a second while steps
	// run, and once at the end.
	Progress func(Progress)
	// Checkpoint, if set, is a directory: after a verified run every rank
	// saves its chunks of the parameters and optimizer states there
	// (docs/checkpoint.md), and the report keeps the reference's final
	// state (Report.Final) to check a load against.
	Checkpoint string
	// Local lists the ranks this process issues (nil: every rank). A
	// process of a multi-process run issues its own rank; the others are
	// other processes' (the backend's collectives reach them).
	Local []int

	// Unproven, when set, runs a plan schedule.Prove refuses. Only
	// packages inside executor/ can make one (executor/internal/unproven):
	// tests that show the run-time checks catch on their own what the
	// proof would (mutation_test.go, the GPU backend's hazard tests).
	Unproven *unproven.Permit

	// skip, for tests: leave out op on rank.
	skip func(rank, op int) bool
}

// Progress is how far a run is.
type Progress struct {
	Done, Total int64 // operations executed, over all ranks and steps
	Steps       int
	Elapsed     time.Duration
}

// ErrWorldSize is the class of errors for a plan whose world size the
// host cannot run as asked.
var ErrWorldSize = errors.New("impossible world size")

// ErrUnproven is the class of errors for a plan Run refuses because
// schedule.Prove (what `fsdpc verify` reports) refuses it.
var ErrUnproven = errors.New("refusing to run a plan that fsdpc verify refuses")

// TooLargeError is a run that would need more host memory than allowed.
type TooLargeError struct {
	Model        string
	World, Scale int
	Need, Limit  int64
	Suggest      int   // a scale that fits, 0 if none does
	SuggestNeed  int64 // what it needs
	// Bound says where Limit comes from ("half of the cgroup memory
	// limit …"); empty when the caller set it.
	Bound string
}

func (e *TooLargeError) Error() string {
	s := fmt.Sprintf("running %s on %d ranks at scale %d needs about %s of host memory, more than the %s allowed",
		e.Model, e.World, e.Scale, ir.FormatBytes(e.Need), ir.FormatBytes(e.Limit))
	if e.Bound != "" {
		s += " (" + e.Bound + ")"
	}
	if e.Suggest > 0 {
		return s + fmt.Sprintf(": shrink the tensors with --scale %d (about %s)", e.Suggest, ir.FormatBytes(e.SuggestNeed))
	}
	return s + fmt.Sprintf(": even the smallest scale keeps %d ranks' streams and buffers too large for one process; re-plan for fewer ranks", e.World)
}

func (e *TooLargeError) Unwrap() error { return ErrWorldSize }

// Run executes a plan's training steps on a backend and checks them: the
// CPU of every rank issues the program in order, the backend's streams run
// it, and the data every compute op reads, every gradient the optimizer
// sees and the final parameters and states are compared with a reference
// computed without sharding. The report holds the timings, the memory
// measured per pool against the plan's prediction (scaled), and the
// verdict per group; the error is a *FailureError when the run found a
// mismatch, a hazard or a deadlock, or the reason it could not run. A plan
// schedule.Prove refuses is not run at all (ErrUnproven), for every caller.
func Run(p *schedule.Plan, b Backend, opts Options) (*Report, error) {
	t0 := time.Now()
	if opts.Scale == 0 {
		opts.Scale = 1
	}
	if opts.Steps == 0 {
		opts.Steps = 1
	}
	if opts.Scale < 1 || opts.Steps < 1 || opts.Steps > 1<<20 {
		return nil, fmt.Errorf("bad options: scale %d, steps %d", opts.Scale, opts.Steps)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	world := p.Cluster.WorldSize
	if opts.Ranks != 0 && opts.Ranks != world {
		return nil, fmt.Errorf("%w: the plan is compiled for %d ranks (%d × %d), and the host runs every rank of a plan; to run %d ranks, plan the model again with world_size = %d",
			ErrWorldSize, world, p.Cluster.Replicate, p.Cluster.Shard, opts.Ranks, opts.Ranks)
	}
	if world < 1 || p.Cluster.Replicate < 1 || p.Cluster.Shard < 1 || p.Cluster.Replicate*p.Cluster.Shard != world {
		return nil, fmt.Errorf("%w: the plan's world size %d is not its mesh %d × %d", ErrWorldSize, world, p.Cluster.Replicate, p.Cluster.Shard)
	}
	local, err := localRanks(opts.Local, world)
	if err != nil {
		return nil, err
	}
	// Never run a plan fsdpc verify refuses, whoever calls: the CLI, the
	// CUDA worker a scheduler started with any file, a library user. The
	// run's own checks would find at best what the proof already says.
	if opts.Unproven == nil {
		if _, err := schedule.Prove(p); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnproven, err)
		}
	}
	standIns := standInBackend(b)
	q, diffs, layouts, opt, err := prepare(p, opts.Scale)
	if err != nil {
		return nil, err
	}
	d, err := compile(q, layouts, opt)
	if err != nil {
		return nil, err
	}
	var ckpt *checkpoint.Layout
	if opts.Checkpoint != "" {
		if standIns {
			return nil, fmt.Errorf("checkpoint: the %s backend does not compute the parameters; save checkpoints from the host backend", backendName(b))
		}
		if ckpt, err = executorLayout(q, opt); err != nil {
			return nil, err
		}
	}
	if need := int64(opt.states) * 4; need > q.Train.OptimizerStateBytes && d.trains() {
		return nil, fmt.Errorf("optimizer %s keeps %d bytes of state per element, but the plan allots %d (optimizer_state_bytes)", opt.name, need, q.Train.OptimizerStateBytes)
	}
	limit, bound := opts.MemoryLimit, ""
	if limit <= 0 {
		// Half: the Go heap grows to about twice what it holds live
		// before a collection (GOGC=100).
		host := hostMemory("/", realProbes)
		limit, bound = host.bytes/2, "half of "+host.what
	}
	if need := estimate(q, layouts, opts.Steps); need > limit {
		e := &TooLargeError{Model: p.Header.Model, World: world, Scale: opts.Scale, Need: need, Limit: limit, Bound: bound}
		for k := opts.Scale * 2; k <= 1<<24; k *= 2 {
			s, _, err := Scale(p, k)
			if err != nil {
				break
			}
			sl, err := buildLayouts(s)
			if err != nil {
				break
			}
			if n := estimate(s, sl, opts.Steps); n <= limit {
				e.Suggest, e.SuggestNeed = k, n
				break
			}
		}
		return nil, e
	}
	rep := &Report{Model: p.Header.Model, Backend: backendName(b), World: world, Replicate: q.Cluster.Replicate, Shard: q.Cluster.Shard,
		Scale: opts.Scale, Steps: opts.Steps, Ops: len(q.Ops), SizeDiffs: diffs, Optimizer: opt.name,
		GradAccum: int(q.Train.GradAccum), AccumulateUnsharded: q.Train.AccumulateUnsharded, Exact: exactBackend(b)}
	for _, gl := range layouts {
		for _, pl := range gl.Params {
			rep.Elements += pl.Numel
		}
	}

	// The reference, computed first: the kernels check against it. A
	// backend with stand-in compute never updates the parameters, so
	// every step gathers what the reference's first step gathers.
	t1 := time.Now()
	refSteps := opts.Steps
	if standIns {
		refSteps = 1
	}
	ref, err := newReference(q, layouts, d.nseg, refSteps, opt)
	if err != nil {
		return nil, err
	}
	ref.run()
	for i := range d.prog {
		if k := d.prog[i].kernel; k != nil {
			k.Expect = ref.exp
		}
	}
	rep.Times.Reference = time.Since(t1)

	topo := Topology{Replicate: q.Cluster.Replicate, Shard: q.Cluster.Shard, Steps: opts.Steps, Events: q.Events,
		Phases: d.phases, Describe: d.describe, EventName: d.eventName, RecordedBy: d.recordedBy, BufferName: d.bufferName,
		HazardCheck: !opts.DataOnly, Timeout: opts.Timeout, Plan: q, Local: local}
	if err := b.Open(topo); err != nil {
		return nil, err
	}
	defer b.Close()
	d.b, d.opts, d.local = b, opts, local
	if err := d.setup(ref.exp); err != nil {
		return nil, err
	}
	rep.Times.Setup = time.Since(t0) - rep.Times.Reference

	// Every rank's CPU issues its program; the streams run it.
	t2 := time.Now()
	stop := make(chan struct{})
	var progWG sync.WaitGroup
	if opts.Progress != nil {
		progWG.Add(1)
		go d.progress(stop, &progWG, t2)
	}
	var wg sync.WaitGroup
	issue := make([]time.Duration, world)
	for _, rank := range local {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := time.Now()
			d.issue(rank)
			issue[rank] = time.Since(ts)
		}()
	}
	wg.Wait()
	runErr := b.Drain()
	rep.Completed = runErr == nil
	rep.Times.Run = time.Since(t2)
	close(stop)
	progWG.Wait()
	for _, x := range issue {
		rep.Times.Issue = max(rep.Times.Issue, x)
	}
	d.collectStats(rep, p, q)

	var fails *FailureError
	if runErr != nil && !errors.As(runErr, &fails) {
		return rep, runErr
	}
	if fails == nil && !standIns {
		t3 := time.Now()
		if mism := d.verify(rep, ref.exp); len(mism) > 0 {
			fails = &FailureError{Failures: mism}
		}
		rep.Times.Verify = time.Since(t3)
	}
	if fails == nil && !rep.memoryAgrees() {
		fails = &FailureError{Failures: []Failure{{Kind: Mismatch, Rank: 0, Op: -1, What: "the pool peaks measured differ from the plan's prediction (scaled); see the memory table"}}}
	}
	rep.Failures = fails
	if fails != nil {
		return rep, fails
	}
	if ckpt != nil {
		saved, err := d.saveCheckpoint(opts.Checkpoint, ckpt, opts.Steps)
		if err != nil {
			return rep, err
		}
		rep.Saved = saved
		rep.Final = ref.final(ckpt, layouts)
	}
	return rep, nil
}

// localRanks checks and orders the ranks a process issues.
func localRanks(only []int, world int) ([]int, error) {
	if only == nil {
		out := make([]int, world)
		for r := range out {
			out[r] = r
		}
		return out, nil
	}
	if len(only) == 0 {
		return nil, fmt.Errorf("%w: no local ranks to run", ErrWorldSize)
	}
	seen := make(map[int]bool, len(only))
	out := append([]int(nil), only...)
	slices.Sort(out)
	for _, r := range out {
		if r < 0 || r >= world || seen[r] {
			return nil, fmt.Errorf("%w: local rank %d of a world of %d (ranks %v)", ErrWorldSize, r, world, only)
		}
		seen[r] = true
	}
	return out, nil
}

// standInBackend reports whether a backend runs stand-ins for compute and
// the optimizer: it moves and reduces the data for real but leaves the
// parameters as they were, so the run checks what the backend checks
// (every gathered parameter, every collective) and not the final values.
func standInBackend(b Backend) bool {
	x, ok := b.(StandInRunner)
	return ok && x.StandIns()
}

func backendName(b Backend) string {
	if n, ok := b.(Named); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", b)
}

// exactBackend reports whether a backend reduces in a fixed rank order, so
// its results must equal the reference's bit for bit.
func exactBackend(b Backend) bool {
	x, ok := b.(FixedOrderReducer)
	return ok && x.FixedReductionOrder()
}

// The host backend's capabilities: a name, and reductions in rank order.
var _ interface {
	Backend
	Named
	FixedOrderReducer
} = (*Host)(nil)

// Name is the backend's name in reports.
func (h *Host) Name() string { return "host" }

// FixedReductionOrder: the host reduces in rank order 0, 1, ….
func (h *Host) FixedReductionOrder() bool { return true }

// Executed counts the operations executed so far.
func (h *Host) Executed() int64 { return h.executed.Load() }

// --- compile -------------------------------------------------------------------

type instr struct {
	kind   schedule.OpKind
	stream schedule.Stream
	buf    int
	pool   schedule.Pool
	bytes  int64
	event  int
	kernel *Kernel
	args   [MaxArgs]int
}

type driver struct {
	q        *schedule.Plan
	layouts  []*GroupLayout
	prog     []instr
	nseg     []int
	phases   []schedule.Phase
	recorder []int // the op recording each event, -1 for none
	b        Backend
	opts     Options
	local    []int    // the ranks this process issues
	mems     [][]Mem  // [rank][buffer]: the buffer's current or last block
	live     [][]bool // [rank][buffer]
	perStep  int64    // operations a rank executes per step
}

func (d *driver) trains() bool {
	for _, gl := range d.layouts {
		if gl.GradShardNumel > 0 {
			return true
		}
	}
	return false
}

// bufDType is the element type of a buffer kind, where it has one.
func bufDType(k schedule.BufferKind, gl *GroupLayout) ir.DType {
	switch k {
	case schedule.BufShardedParams, schedule.BufH2DTemp, schedule.BufShardedGrads:
		return gl.Orig
	case schedule.BufAccumGrads, schedule.BufReduceScatterIn, schedule.BufReduceScatterOut:
		return gl.Reduce
	case schedule.BufUnshardedGrads:
		return gl.Compute
	case schedule.BufOptimizerState:
		return ir.FP32
	}
	return ir.DTypeInvalid
}

type kinds []schedule.BufferKind

func (ks kinds) has(k schedule.BufferKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// prepare scales a plan by k and derives what running it (or loading a
// checkpoint under it) needs: the group layouts and the optimizer.
func prepare(p *schedule.Plan, k int) (q *schedule.Plan, diffs []string, layouts []*GroupLayout, opt *optimizer, err error) {
	if q, diffs, err = Scale(p, k); err != nil {
		return nil, nil, nil, nil, err
	}
	if layouts, err = buildLayouts(q); err != nil {
		return nil, nil, nil, nil, err
	}
	opt, ok := newOptimizer(q.Train.Optimizer)
	if !ok {
		return nil, nil, nil, nil, fmt.Errorf("optimizer %q: the executor runs sgd, sgd_momentum, adam, adamw, lion and adafactor", q.Train.Optimizer)
	}
	return q, diffs, layouts, opt, nil
}

// compile turns the program into launch templates, rank-independent:
// which buffers each kernel reads and writes, whether it overwrites or
// adds, the layout of each all-gather buffer, the gradient each optimizer
// step reads.
func compile(q *schedule.Plan, layouts []*GroupLayout, opt *optimizer) (*driver, error) {
	if q.Events < 0 || q.Events > len(q.Ops) {
		return nil, fmt.Errorf("the plan has %d events for %d ops", q.Events, len(q.Ops))
	}
	d := &driver{q: q, layouts: layouts, recorder: make([]int, max(q.Events, 0))}
	for i := range d.recorder {
		d.recorder[i] = -1
	}
	nb := len(q.Buffers)
	written := make([]bool, nb)
	postFwd := make([]bool, nb)
	for i, b := range q.Buffers {
		written[i] = b.Persistent
	}
	holder := make([]int, len(layouts))
	for i := range holder {
		holder[i] = -1
	}
	ord := map[[2]int]int{}
	inRange := func(b int32) bool { return b >= 0 && int(b) < nb }
	d.phases = make([]schedule.Phase, len(q.Ops))
	for i := range q.Ops {
		o := &q.Ops[i]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("op %d (%s on %s): %s", i, o.Kind, o.Stream, fmt.Sprintf(format, args...))
		}
		if int(o.Stream) >= numStreams || o.Kind > schedule.OpOptimizer || int(o.Phase) >= numPhases {
			return nil, fmt.Errorf("op %d: an enum is out of range", i)
		}
		d.phases[i] = o.Phase
		in := instr{kind: o.Kind, stream: o.Stream, buf: int(o.Buffer), event: int(o.Event)}
		for j := range in.args {
			in.args[j] = -1
		}
		switch o.Kind {
		case schedule.OpAlloc, schedule.OpFree:
			if !inRange(o.Buffer) {
				return nil, bad("buffer %d out of range", o.Buffer)
			}
			b := &q.Buffers[o.Buffer]
			if b.Persistent {
				return nil, bad("allocates or frees persistent buffer %s", b.Name)
			}
			if int(b.Pool) >= numPools {
				return nil, bad("buffer %s: pool out of range", b.Name)
			}
			in.pool, in.bytes = b.Pool, b.Bytes
			if o.Kind == schedule.OpAlloc {
				written[o.Buffer], postFwd[o.Buffer] = false, false
			}
		case schedule.OpRecord, schedule.OpWait, schedule.OpSync:
			if o.Event < 0 || int(o.Event) >= q.Events {
				return nil, bad("event %d out of range", o.Event)
			}
			if o.Kind == schedule.OpRecord && d.recorder[o.Event] < 0 {
				d.recorder[o.Event] = i
			}
		default:
			if o.Group < 0 || int(o.Group) >= len(layouts) {
				return nil, bad("group %d out of range", o.Group)
			}
			gl := layouts[o.Group]
			// The operand rules are schedule.Verify's (one table).
			rule, ok := schedule.Operands(o.Kind)
			if !ok {
				return nil, bad("the executor has no kernel for it")
			}
			for _, x := range []struct {
				buf  int32
				ks   kinds
				opt  bool
				role string
			}{{o.Buffer, rule.Target, rule.TargetOptional, "target"}, {o.Source, rule.Source, rule.SourceOptional, "source"}} {
				switch {
				case x.buf == -1 && x.opt:
				case !inRange(x.buf):
					return nil, bad("its %s buffer %d is out of range", x.role, x.buf)
				case !x.ks.has(q.Buffers[x.buf].Kind):
					return nil, bad("its %s %s is a %s buffer; the executor expects %v", x.role, q.Buffers[x.buf].Name, q.Buffers[x.buf].Kind, x.ks)
				case q.Buffers[x.buf].Group != int(o.Group):
					return nil, bad("its %s %s belongs to another group", x.role, q.Buffers[x.buf].Name)
				}
			}
			if !q.OpListsInRange(o) {
				return nil, bad("its lists of GEMMs or uses leave the plan's tables")
			}
			uses := q.OpUses(o)
			if o.Kind == schedule.OpOptimizer && len(uses) > 0 {
				// The gradient the step reads.
				g := uses[0]
				if !inRange(g) || (q.Buffers[g].Kind != schedule.BufShardedGrads && q.Buffers[g].Kind != schedule.BufReduceScatterOut) || q.Buffers[g].Group != int(o.Group) {
					return nil, bad("reads buffer %d as its gradient, which is not a sharded gradient of its group", g)
				}
				in.args[ArgGrad] = int(g)
				uses = uses[1:]
			}
			if len(uses) > 2 || len(uses) > 0 && o.Kind != schedule.OpBackward {
				return nil, bad("uses %d further buffers; the executor supports a backward's activations and recompute, an optimizer's gradient", len(q.OpUses(o)))
			}
			k := &Kernel{Op: i, Kind: o.Kind, Phase: o.Phase, Micro: int(o.Micro), Group: gl, Module: int(o.Module),
				Reduce: o.Reduce, Factor: o.Factor, PG: o.PG, PGSize: int(o.PGSize), Optimizer: opt}
			in.args[ArgDst], in.args[ArgSrc] = int(o.Buffer), int(o.Source)
			if o.Source == o.Buffer && (o.Kind == schedule.OpAllGather || o.Kind == schedule.OpAllReduce || o.Kind == schedule.OpDivide) {
				in.args[ArgSrc] = -1 // in place: one operand
			}
			if o.Buffer >= 0 {
				k.DType = bufDType(q.Buffers[o.Buffer].Kind, gl)
			}
			if o.Source >= 0 {
				k.SrcDType = bufDType(q.Buffers[o.Source].Kind, gl)
			}
			for j, u := range uses {
				if !inRange(u) || (q.Buffers[u].Kind != schedule.BufActivations && q.Buffers[u].Kind != schedule.BufRecompute) {
					return nil, bad("uses buffer %d, which is not an activation or recompute buffer", u)
				}
				in.args[ArgUse0+j] = int(u)
				k.Acts[j] = q.Buffers[u].Kind == schedule.BufActivations
			}
			switch o.Kind {
			case schedule.OpCopyIn:
				k.PostForward = q.Buffers[o.Source].Kind == schedule.BufPostForwardSlice
				if k.PostForward && gl.Policy.Reshard != schedule.ReshardTo {
					return nil, bad("copies in a post-forward slice of a group without int reshard")
				}
				postFwd[o.Buffer] = k.PostForward
			case schedule.OpCopyOut:
				k.PostForward = postFwd[o.Source]
			case schedule.OpReshard:
				if gl.Policy.Reshard != schedule.ReshardTo {
					return nil, bad("reshards a group without int reshard")
				}
			case schedule.OpDivide:
				if o.Factor <= 0 || math.IsInf(o.Factor, 0) || math.IsNaN(o.Factor) {
					return nil, bad("divides by %v", o.Factor)
				}
			case schedule.OpBackward:
				if o.Buffer >= 0 {
					key := [2]int{int(o.Group), int(o.Micro)}
					k.Ordinal = ord[key]
					ord[key]++
					k.Accumulate = written[o.Buffer]
				}
			case schedule.OpAccumulate:
				k.Accumulate = written[o.Buffer]
			case schedule.OpOptimizer:
				if in.args[ArgGrad] < 0 {
					in.args[ArgGrad] = holder[o.Group] // plans before the optimizer named its gradient
				}
			}
			if o.Buffer >= 0 {
				written[o.Buffer] = true
				if kd := q.Buffers[o.Buffer].Kind; kd == schedule.BufReduceScatterOut || kd == schedule.BufShardedGrads {
					holder[o.Group] = int(o.Buffer)
				}
			}
			in.kernel = k
		}
		d.prog = append(d.prog, in)
		if o.Kind != schedule.OpAlloc {
			d.perStep++
		}
	}
	// The model's structure: each group's backward ops per micro-batch,
	// the same in every micro-batch.
	d.nseg = make([]int, len(layouts))
	for g := range layouts {
		d.nseg[g] = ord[[2]int{g, 0}]
		for mb := 1; mb < int(q.Train.GradAccum); mb++ {
			if n := ord[[2]int{g, mb}]; n != d.nseg[g] {
				return nil, fmt.Errorf("group %s has %d backward ops writing gradients in micro-batch 0 but %d in micro-batch %d", layouts[g].Name, d.nseg[g], n, mb)
			}
		}
	}
	return d, nil
}

func (d *driver) describe(op int) string {
	if op < 0 || op >= len(d.q.Ops) {
		return fmt.Sprintf("op %d", op)
	}
	o := &d.q.Ops[op]
	what := o.Kind.String()
	switch {
	case (o.Kind == schedule.OpAlloc || o.Kind == schedule.OpFree) && o.Buffer >= 0 && int(o.Buffer) < len(d.q.Buffers):
		what += " " + d.q.Buffers[o.Buffer].Name
	case o.Kind == schedule.OpRecord || o.Kind == schedule.OpWait || o.Kind == schedule.OpSync:
		what += " [" + d.eventName(int(o.Event)) + "]"
	case o.Group >= 0 && int(o.Group) < len(d.layouts):
		what += " " + d.layouts[o.Group].Name
	}
	if o.Module >= 0 && int(o.Module) < len(d.q.Modules) {
		what += " (" + d.q.Modules[o.Module] + ")"
	}
	return fmt.Sprintf("op %d [%s on %s, %s mb%d]", op, what, o.Stream, o.Phase, o.Micro)
}

func (d *driver) eventName(ev int) string {
	if ev >= 0 && ev < len(d.q.EventNames) {
		return d.q.EventNames[ev]
	}
	return fmt.Sprintf("event %d", ev)
}

func (d *driver) recordedBy(ev int) int {
	if ev >= 0 && ev < len(d.recorder) {
		return d.recorder[ev]
	}
	return -1
}

func (d *driver) bufferName(b int) string {
	if b >= 0 && b < len(d.q.Buffers) {
		return d.q.Buffers[b].Name
	}
	return fmt.Sprintf("buffer %d", b)
}

// --- setup and issue -----------------------------------------------------------------

// setup allocates every rank's persistent buffers: the sharded parameters
// from the deterministic initial values, zero optimizer states; anything
// else (offload's host gradients) stays poisoned until written.
func (d *driver) setup(exp *expectations) error {
	world := d.q.Cluster.WorldSize
	d.mems = make([][]Mem, world)
	d.live = make([][]bool, world)
	for _, rank := range d.local {
		d.mems[rank] = make([]Mem, len(d.q.Buffers))
		d.live[rank] = make([]bool, len(d.q.Buffers))
		for bi, b := range d.q.Buffers {
			if !b.Persistent {
				continue
			}
			m, err := d.b.Alloc(rank, b.Pool, b.Bytes)
			if err != nil {
				return err
			}
			d.mems[rank][bi], d.live[rank][bi] = m, true
			switch b.Kind {
			case schedule.BufShardedParams:
				if b.Group >= 0 {
					if err := d.b.Upload(rank, m, exp.initial[b.Group][rank]); err != nil {
						return fmt.Errorf("buffer %s: %w", b.Name, err)
					}
				}
			case schedule.BufOptimizerState:
				if err := d.b.Upload(rank, m, make([]byte, b.Bytes)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// issue is one rank's CPU: the program, step after step, in order.
func (d *driver) issue(rank int) {
	b := d.b
	mems, live := d.mems[rank], d.live[rank]
	checks := !d.opts.DataOnly
	recorded := make([]int, d.q.Events) // the last step whose record was issued, +1
	abort := func(kind FailureKind, st schedule.Stream, step, op int, format string, args ...any) {
		b.Abort(Failure{Kind: kind, Rank: rank, Stream: st, Step: step, Op: op, What: fmt.Sprintf(format, args...)})
	}
	for step := 0; step < d.opts.Steps; step++ {
		for i := range d.prog {
			if b.Failed() {
				return
			}
			if d.opts.skip != nil && d.opts.skip(rank, i) {
				continue
			}
			in := &d.prog[i]
			switch in.kind {
			case schedule.OpAlloc:
				if live[in.buf] {
					abort(Protocol, in.stream, step, i, "%s allocates buffer %s, which is already allocated", d.describe(i), d.bufferName(in.buf))
					return
				}
				m, err := b.Alloc(rank, in.pool, in.bytes)
				if err != nil {
					abort(Protocol, in.stream, step, i, "%s: %v", d.describe(i), err)
					return
				}
				mems[in.buf], live[in.buf] = m, true
			case schedule.OpFree:
				if !live[in.buf] {
					abort(Protocol, in.stream, step, i, "%s frees buffer %s, which is not allocated", d.describe(i), d.bufferName(in.buf))
					return
				}
				b.Free(rank, in.stream, mems[in.buf], i)
				live[in.buf] = false
			case schedule.OpRecord:
				recorded[in.event] = step + 1
				b.Record(rank, in.stream, Event{in.event, step + 1}, i)
			case schedule.OpWait, schedule.OpSync:
				if checks && recorded[in.event] != step+1 {
					abort(Hazard, in.stream, step, i, "%s waits for [%s] before any op of this step records it: CUDA ignores such a wait, so it orders nothing",
						d.describe(i), d.eventName(in.event))
					return
				}
				ev := Event{in.event, step + 1}
				if in.kind == schedule.OpSync || in.stream == schedule.StreamHost {
					if b.Synchronize(rank, ev, i) != nil {
						return
					}
					continue
				}
				b.Wait(rank, in.stream, ev, i)
			default:
				a := Args{Step: step}
				for j, bi := range in.args {
					a.Buf[j] = int32(bi)
					if bi < 0 {
						continue
					}
					if !live[bi] {
						if mems[bi] == nil {
							abort(Protocol, in.stream, step, i, "%s uses buffer %s, which has not been allocated", d.describe(i), d.bufferName(bi))
							return
						}
						if checks {
							abort(Protocol, in.stream, step, i, "%s uses buffer %s after the CPU freed it", d.describe(i), d.bufferName(bi))
							return
						}
					}
					a.Mem[j] = mems[bi]
				}
				b.Launch(rank, in.stream, in.kernel, a)
			}
		}
	}
}

func (d *driver) progress(stop chan struct{}, wg *sync.WaitGroup, start time.Time) {
	defer wg.Done()
	ex, ok := d.b.(interface{ Executed() int64 })
	total := d.perStep * int64(d.opts.Steps) * int64(d.q.Cluster.WorldSize)
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	report := func() {
		var done int64
		if ok {
			done = ex.Executed()
		}
		d.opts.Progress(Progress{Done: min(done, total), Total: total, Steps: d.opts.Steps, Elapsed: time.Since(start)})
	}
	for {
		select {
		case <-stop:
			report()
			return
		case <-tk.C:
			report()
		}
	}
}

// --- memory ------------------------------------------------------------------------

// estimate is the host memory a run needs: every rank's pools at their
// predicted peaks (with room for the allocator's caching) and streams, and
// the reference with its expectations.
func estimate(q *schedule.Plan, layouts []*GroupLayout, steps int) int64 {
	world := int64(q.Cluster.WorldSize)
	var perRank int64
	for _, b := range q.Prediction.PeakByPool {
		perRank += b
	}
	perRank = perRank + perRank/2 + 96<<10 // caching slack; goroutines, queues, clocks
	var ref, work int64
	for _, gl := range layouts {
		od := gl.Orig.Size()
		ref += int64(steps) * (gl.W*gl.RowBytes + world*gl.GradShardNumel*od)
		ref += 2 * world * (gl.ShardNumel*od + 8*gl.GradShardNumel)
		ref += 3 * 8 * gl.W * gl.ShardNumel
		work = max(work, 8*world*(gl.W*gl.GradShardNumel+2*gl.GradNumel))
	}
	return world*perRank + ref + 2*work
}
