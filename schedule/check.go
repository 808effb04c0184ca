package schedule

import (
	"fmt"
	"math"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
)

// Check verifies a plan's structure: indices in range, group layouts that
// add up, every buffer allocated once before it is used and freed once after
// its last use in issue order, every waited event recorded earlier, every
// collective with a process group. The planner runs it after its passes and
// the reader runs it on every plan it decodes, so no later stage sees a
// malformed plan. (Proving the cross-stream order safe is the happens-before
// verifier's job, which builds on this.)
func Check(p *Plan) error {
	c := &checker{p: p, op: -1}
	if c.strings(); len(c.errs) == 0 {
		c.profile()
		c.groups()
		c.program()
		c.prediction()
	}
	if len(c.errs) > 0 {
		if len(c.errs) > 8 {
			c.errs = append(c.errs[:8], fmt.Sprintf("… and %d more", len(c.errs)-8))
		}
		return &CheckError{Op: c.op, Problems: c.errs}
	}
	return nil
}

// CheckError is what Check finds wrong: the problems, and the first op one
// of them is about (-1 if none is), which Decode turns into the op's byte
// offset in the file.
type CheckError struct {
	Op       int
	Problems []string
}

func (e *CheckError) Error() string { return "schedule.Check: " + strings.Join(e.Problems, "; ") }

type checker struct {
	p    *Plan
	errs []string
	op   int // the first op a problem is about, -1 for none
}

// errorf records a problem. Problems about an op say so first, as
// "op %d …" with the index as the first argument.
func (c *checker) errorf(format string, args ...any) {
	if c.op < 0 && strings.HasPrefix(format, "op %d") && len(args) > 0 {
		if i, ok := args[0].(int); ok {
			c.op = i
		}
	}
	if len(c.errs) <= 8 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

func (c *checker) groups() {
	p := c.p
	if _, ok := hardware.Preset(p.Cluster.Preset); p.Cluster.Preset != "" && !ok {
		c.errorf("cluster: unknown GPU preset %q", p.Cluster.Preset)
	}
	if p.Cluster.WorldSize < 1 || p.Cluster.Replicate < 1 || p.Cluster.Shard < 1 ||
		p.Cluster.Replicate*p.Cluster.Shard != p.Cluster.WorldSize {
		c.errorf("cluster %d = %d × %d is inconsistent", p.Cluster.WorldSize, p.Cluster.Replicate, p.Cluster.Shard)
		return
	}
	W := int64(p.Cluster.Shard)
	names := map[string]bool{}
	for gi := range p.Groups {
		g := &p.Groups[gi]
		if names[g.Name] {
			c.errorf("group %q appears twice", g.Name)
		}
		names[g.Name] = true
		var off, goff int64
		for _, gp := range g.Params {
			if len(gp.Shape) == 0 || gp.ShardDim < 0 || gp.ShardDim >= len(gp.Shape) {
				c.errorf("group %q: parameter %s has a bad shape or shard dim", g.Name, gp.Name)
				continue
			}
			d := gp.Shape[gp.ShardDim]
			n := int64(1)
			for _, x := range gp.Shape {
				n *= x
			}
			if d < 1 || gp.ChunkRows != (d+W-1)/W || gp.ShardNumel != gp.ChunkRows*(n/d) {
				c.errorf("group %q: parameter %s is not laid out as ceil(%d/%d) rows", g.Name, gp.Name, d, W)
			}
			if gp.Offset != off {
				c.errorf("group %q: parameter %s at offset %d, want %d", g.Name, gp.Name, gp.Offset, off)
			}
			off += gp.ShardNumel
			switch {
			case gp.RequiresGrad && gp.GradOffset != goff:
				c.errorf("group %q: parameter %s at gradient offset %d, want %d", g.Name, gp.Name, gp.GradOffset, goff)
			case !gp.RequiresGrad && gp.GradOffset != -1:
				c.errorf("group %q: frozen parameter %s has a gradient offset", g.Name, gp.Name)
			}
			if gp.RequiresGrad {
				goff += gp.ShardNumel
			}
		}
		var gatherBytes int64
		for _, gp := range g.Params {
			gatherBytes += gp.ShardNumel * gp.GatherDType.Size()
		}
		if g.ShardBytes != gatherBytes {
			c.errorf("group %q: %d bytes gathered per rank, the parameters give %d", g.Name, g.ShardBytes, gatherBytes)
		}
		if g.ShardNumel != off || g.GradShardNumel != goff {
			c.errorf("group %q: shard sizes %d/%d do not add up to %d/%d", g.Name, g.ShardNumel, g.GradShardNumel, off, goff)
		}
		pol := &g.Policy
		if pol.Reshard >= numReshardKinds || pol.ReduceScatterOp >= numReduceOps || pol.AllReduceOp >= numReduceOps {
			c.errorf("group %q: a policy enum is out of range", g.Name)
		}
		if pol.Reshard == ReshardTo && (pol.ReshardTo < 2 || int64(pol.ReshardTo) >= W || W%int64(pol.ReshardTo) != 0) {
			c.errorf("group %q: reshard to %d ranks does not divide %d", g.Name, pol.ReshardTo, W)
		}
		for _, f := range []float64{pol.PreDivide, pol.PostDivide} {
			if !(f >= 1) || math.IsInf(f, 0) {
				c.errorf("group %q: bad divide factor %v", g.Name, f)
			}
		}
		// A premul factor belongs to a premul-sum reduction: anywhere else
		// nothing reads it, and a stray one would make two plans that read
		// differently look the same (the planner writes 0).
		if pol.ReduceScatterOp != ReducePremulSum && pol.AllReduceOp != ReducePremulSum && pol.PremulFactor != 0 {
			c.errorf("group %q: a premul factor %v without a premul-sum reduction", g.Name, pol.PremulFactor)
		}
	}
}

func (c *checker) program() {
	p := c.p
	if p.Events < 0 || p.Events > len(p.Ops) {
		c.errorf("%d events for %d ops", p.Events, len(p.Ops))
		return
	}
	if len(p.EventNames) != p.Events {
		c.errorf("%d event names for %d events", len(p.EventNames), p.Events)
	}
	const (
		unborn = iota
		live
		dead
	)
	state := make([]int, len(p.Buffers))
	for i, b := range p.Buffers {
		if b.Persistent {
			state[i] = live
		}
		if b.Kind >= numBufferKinds || b.Pool >= numPools {
			c.errorf("buffer %q: kind or pool out of range", b.Name)
		}
		if b.Group < -1 || b.Group >= len(p.Groups) || b.Bytes < 0 {
			c.errorf("buffer %q: bad group or size", b.Name)
		}
	}
	if n := len(p.ElemRecompute); n != 0 && n != len(p.Modules) {
		c.errorf("%d element-wise recompute figures for %d modules: want one each, or none", n, len(p.Modules))
	}
	for i, b := range p.ElemRecompute {
		if b < 0 {
			c.errorf("module %d: negative element-wise recompute bytes %d", i, b)
		}
	}
	switch impl := p.Train.OptimizerImplementation; {
	case impl == "":
	case impl != "fused" && impl != "foreach":
		c.errorf("optimizer implementation %q: want \"fused\", \"foreach\" or none", impl)
	case p.Train.Optimizer != "adamw":
		c.errorf("optimizer implementation %q for optimizer %q: only adamw's is modelled", impl, p.Train.Optimizer)
	}
	if f := p.Train.MaxGradNorm; f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		c.errorf("max_grad_norm %g: want a finite threshold, 0 for no clipping", f)
	}
	if f := p.Train.ModelFLOPsPerToken; f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		c.errorf("model FLOPs per token %g: want a finite count, 0 when not known", f)
	}
	// Every micro-batch runs at least one op, so there are no more
	// micro-batches than ops: later passes allocate per micro-batch.
	ga := p.Train.GradAccum
	if ga < 1 || ga > int64(len(p.Ops)) {
		c.errorf("grad_accum %d for %d ops: every micro-batch needs ops", ga, len(p.Ops))
		return
	}
	recorded := make([]bool, p.Events)
	use := func(i int, o *Op, buf int32, role string) {
		if buf == -1 {
			return
		}
		if buf < 0 || int(buf) >= len(p.Buffers) {
			c.errorf("op %d (%s): %s buffer %d out of range", i, o.Kind, role, buf)
			return
		}
		if state[buf] != live {
			c.errorf("op %d (%s on %s) uses buffer %q while it is not live", i, o.Kind, o.Stream, p.Buffers[buf].Name)
		}
	}
	for i := range p.Ops {
		o := &p.Ops[i]
		if o.Stream >= numStreams || o.Kind >= numOpKinds || o.Phase >= numPhases || o.PG >= numProcessGroups || o.Reduce >= numReduceOps {
			c.errorf("op %d: an enum is out of range", i)
			continue
		}
		if msg := checkSpans(p, o); msg != "" {
			c.errorf("op %d (%s): %s", i, o.Kind, msg)
			continue
		}
		for _, u := range p.OpUses(o) {
			if u < 0 || int(u) >= len(p.Buffers) {
				c.errorf("op %d (%s) uses buffer %d, out of range", i, o.Kind, u)
			}
		}
		if o.Group < -1 || int(o.Group) >= len(p.Groups) || o.Module < -1 || int(o.Module) >= len(p.Modules) {
			c.errorf("op %d (%s): group or module out of range", i, o.Kind)
		}
		if o.Micro < 0 || int64(o.Micro) >= ga {
			c.errorf("op %d (%s on %s) is in micro-batch %d of %d", i, o.Kind, o.Stream, o.Micro, ga)
		}
		c.unused(i, o)
		switch o.Kind {
		case OpAlloc:
			if o.Buffer < 0 || int(o.Buffer) >= len(p.Buffers) || state[o.Buffer] != unborn || p.Buffers[o.Buffer].Persistent {
				c.errorf("op %d allocates buffer %d twice or out of range", i, o.Buffer)
				continue
			}
			if PoolOf(o.Stream) != p.Buffers[o.Buffer].Pool {
				c.errorf("op %d allocates %q on the %s stream but it belongs to the %s pool", i, p.Buffers[o.Buffer].Name, o.Stream, p.Buffers[o.Buffer].Pool)
			}
			state[o.Buffer] = live
		case OpFree:
			// A free names the buffer it frees: without one, the verifier
			// and executors would index the buffer table with -1.
			if o.Buffer < 0 || int(o.Buffer) >= len(p.Buffers) {
				c.errorf("op %d (free on %s) frees no buffer (buffer %d)", i, o.Stream, o.Buffer)
				continue
			}
			use(i, o, o.Buffer, "freed")
			{
				if p.Buffers[o.Buffer].Persistent {
					c.errorf("op %d frees persistent buffer %q", i, p.Buffers[o.Buffer].Name)
				}
				state[o.Buffer] = dead
			}
		case OpRecord, OpWait, OpSync:
			if o.Event < 0 || int(o.Event) >= p.Events {
				c.errorf("op %d (%s): event %d out of range", i, o.Kind, o.Event)
				continue
			}
			if o.Kind == OpRecord {
				if recorded[o.Event] {
					c.errorf("op %d records event %d a second time", i, o.Event)
				}
				recorded[o.Event] = true
			} else if !recorded[o.Event] {
				c.errorf("op %d (%s on %s) waits for event %d, which is not recorded before it", i, o.Kind, o.Stream, o.Event)
			}
		default:
			use(i, o, o.Buffer, "target")
			use(i, o, o.Source, "source")
			for _, u := range p.OpUses(o) {
				use(i, o, u, "used")
			}
		}
		switch o.Kind {
		case OpAllGather, OpReduceScatter, OpAllReduce:
			if o.PG == PGNone || o.PGSize < 1 || o.Bytes < 0 || o.Group < 0 {
				c.errorf("op %d (%s) has no process group, size or group", i, o.Kind)
			}
		case OpForward, OpBackward:
			if o.Module < 0 || o.FLOPs < 0 || math.IsNaN(o.FLOPs) || math.IsInf(o.FLOPs, 0) {
				c.errorf("op %d (%s) has no module or bad FLOPs", i, o.Kind)
			}
			if msg := checkGEMMs(p.OpGEMMs(o), o); msg != "" {
				c.errorf("op %d (%s): %s", i, o.Kind, msg)
			}
			if rc := p.OpElemRecompute(o); o.ElemBytes < rc {
				c.errorf("op %d (%s): %d element-wise bytes, fewer than the %d its module recomputes", i, o.Kind, o.ElemBytes, rc)
			}
		}
		if o.GEMMs.Len > 0 && o.Kind != OpForward && o.Kind != OpBackward {
			c.errorf("op %d (%s) lists GEMM shapes but computes nothing", i, o.Kind)
		}
	}
	for i, s := range state {
		if s == live && !p.Buffers[i].Persistent {
			c.errorf("buffer %q is never freed", p.Buffers[i].Name)
		}
	}
}

// checkGEMMs: a compute op's GEMM shapes are positive, sorted by M, N, K
// with no shape twice (ir.MergeGEMMs), and their FLOPs fit in the op's
// non-attention FLOPs (to rounding).
func checkGEMMs(gemms []ir.GEMM, o *Op) string {
	sum := 0.0
	for j, g := range gemms {
		if g.M < 1 || g.N < 1 || g.K < 1 || g.Count < 1 {
			return fmt.Sprintf("GEMM %d (%d×%d×%d, %d of them) has a dimension or count below 1", j, g.M, g.N, g.K, g.Count)
		}
		if j > 0 {
			a := gemms[j-1]
			if !(a.M < g.M || a.M == g.M && (a.N < g.N || a.N == g.N && a.K < g.K)) {
				return fmt.Sprintf("GEMM %d is out of order or repeats a shape", j)
			}
		}
		sum += g.FLOPs()
	}
	if limit := o.FLOPs - o.AttnFLOPs; sum > limit*(1+1e-9) {
		return fmt.Sprintf("GEMM shapes hold %g FLOPs, more than the op's %g outside attention", sum, limit)
	}
	return ""
}

// unused: fields an op's kind does not use are -1 or empty (plan.go), so
// two plans that run the same program encode the same bytes and a flipped
// bit in an unused field is refused rather than ignored.
func (c *checker) unused(i int, o *Op) {
	var bad []string
	switch o.Kind {
	case OpRecord, OpWait, OpSync:
		if o.Buffer != -1 || o.Source != -1 || o.Uses.Len > 0 {
			bad = append(bad, "buffers")
		}
	case OpAlloc, OpFree:
		if o.Source != -1 || o.Event != -1 || o.Uses.Len > 0 {
			bad = append(bad, "a source, event or uses")
		}
	default:
		if o.Event != -1 {
			bad = append(bad, "an event")
		}
	}
	if o.Module != -1 && o.Kind != OpForward && o.Kind != OpBackward {
		bad = append(bad, "a module")
	}
	if len(bad) > 0 {
		c.errorf("op %d (%s on %s) names %s, which a %s does not use", i, o.Kind, o.Stream, strings.Join(bad, " and "), o.Kind)
	}
}

// prediction: the stored forecast has one figure per group and per pool
// (or none, before simulation), so readers can index it by group and pool.
func (c *checker) prediction() {
	pr := &c.p.Prediction
	if n := len(pr.ExposedByGroup); n != 0 && n != len(c.p.Groups) {
		c.errorf("the prediction splits exposed communication over %d groups; the plan has %d", n, len(c.p.Groups))
	}
	if n := len(pr.PeakByPool); n != 0 && n != int(numPools) {
		c.errorf("the prediction has peaks for %d pools; there are %d", n, numPools)
	}
}

// profile: the cluster's hardware profile names known constants, once
// each, in order, each within its range (hardware.ProfileKeys).
func (c *checker) profile() {
	prof := c.p.Cluster.Profile
	for i, v := range prof {
		key, known := hardware.LookupProfileKey(v.Name)
		if !known || i > 0 && prof[i-1].Name >= v.Name || !key.Range.Contains(v.Value) {
			c.errs = append(c.errs, fmt.Sprintf("cluster profile constant %d (%q = %g) is unknown, out of order or outside its range", i, v.Name, v.Value))
		}
	}
}
