package schedule

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
)

// WriteText prints the plan's canonical text form: the same plan always
// prints the same bytes, and a planner change shows as a readable diff.
// Groups come in forward order, parameters in FSDP2's order, operations in
// issue order; events are named after what they mark, not numbered.
func WriteText(w io.Writer, p *Plan) error {
	b := bufio.NewWriter(w)
	t := &textWriter{b: b, p: p}
	t.header()
	t.groups()
	t.program()
	return b.Flush()
}

type textWriter struct {
	b *bufio.Writer
	p *Plan
}

// f prints a line (or part of one). Every string argument is the plan's
// data: Escape'd, so that even a plan that skipped the reader's checks
// cannot add a line or reach the terminal with an escape sequence.
func (t *textWriter) f(format string, args ...any) { fmt.Fprintf(t.b, format, escapeArgs(args)...) }

func escapeArgs(args []any) []any {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = safetext.Escape(s)
		}
	}
	return args
}

func (t *textWriter) header() {
	p := t.p
	h, c, tr := p.Header, p.Cluster, p.Train
	t.f("# fsdpc plan (format %d): generated, do not edit\n", FormatVersion)
	t.f("plan %s\n", h.Model)
	t.f("  fsdpc %s, semantics %s\n", h.FsdpcVersion, h.Semantics)
	t.f("  input sha256 %s\n", h.InputSHA256)
	gpu := c.GPU
	if c.Chip() != c.GPU {
		gpu = fmt.Sprintf("%s (preset %s)", c.GPU, c.Preset)
	}
	t.f("cluster %d × %s, %d per node\n", c.WorldSize, gpu, c.GPUsPerNode)
	if c.Replicate > 1 {
		t.f("  HSDP: %d replicas × %d shards\n", c.Replicate, c.Shard)
	} else {
		t.f("  FSDP over %d ranks\n", c.Shard)
	}
	t.f("  links %s intra-node, %s inter-node; memory %s, budget %s\n",
		bandwidth(c.IntraNodeBandwidth), bandwidth(c.InterNodeBandwidth), ir.FormatBytes(c.HBMBytes), ir.FormatBytes(c.MemoryBudget))
	accumulate := "sharded"
	if tr.AccumulateUnsharded {
		accumulate = "unsharded"
	}
	optimizer := ir.OptimizerLabel(tr.Optimizer, tr.OptimizerImplementation, tr.MaxGradNorm)
	t.f("train micro_batch %d × seq_len %d, grad_accum %d (%s accumulation), checkpointing %s, %s (%d B/param)\n",
		tr.MicroBatch, tr.SeqLen, tr.GradAccum, accumulate, tr.Checkpointing, optimizer, tr.OptimizerStateBytes)
	if tr.ModelFLOPsPerToken > 0 {
		t.f("  model %s per token (MFU's count: 6N and the attention core)\n", ir.FormatFLOP(tr.ModelFLOPsPerToken))
	}
	if pr := p.Prediction; pr.StepTime > 0 {
		t.f("predicted step %s: compute %s, exposed communication %s, CPU issue %s\n",
			secs(pr.StepTime), secs(pr.ComputeTime), secs(pr.ExposedComm), secs(pr.CPUTime))
		t.f("  memory per rank: peak %s allocated, %s reserved", ir.FormatBytes(pr.PeakAllocated), ir.FormatBytes(pr.PeakReserved))
		for pool, b := range pr.PeakByPool {
			if b > 0 {
				t.f("; %s pool %s", Pool(pool), ir.FormatBytes(b))
			}
		}
		t.f("\n")
	}
	if len(p.Warnings) > 0 {
		t.f("warnings\n")
		for _, w := range p.Warnings {
			t.f("  %s\n", w)
		}
	}
}

// secs prints seconds to the microsecond, stable across platforms.
func secs(s float64) string { return strconv.FormatFloat(s*1e3, 'f', 3, 64) + " ms" }

func bandwidth(bps float64) string {
	return strconv.FormatFloat(bps/1e9, 'f', -1, 64) + " GB/s"
}

func (t *textWriter) groups() {
	p := t.p
	W := int64(p.Cluster.Shard)
	t.f("\ngroups %d\n", len(p.Groups))
	for gi := range p.Groups {
		g := &p.Groups[gi]
		pol := &g.Policy
		name := g.Name
		if g.Root {
			name = "(root)"
		}
		t.f("group %s\n", name)
		if len(g.Modules) > 1 {
			t.f("  modules %s\n", strings.Join(g.Modules, ", "))
		}
		reshard := pol.Reshard.String()
		if pol.Reshard == ReshardTo {
			reshard = fmt.Sprintf("to %d ranks", pol.ReshardTo)
		}
		t.f("  reshard_after_forward %s, prefetch forward %s backward %s", reshard, prefetch(pol.PrefetchForward), prefetch(pol.PrefetchBackward))
		if pol.Offload {
			t.f(", cpu offload")
		}
		t.f("\n")
		if len(g.Params) == 0 {
			// FSDP2 creates no FSDPParamGroup for a module that manages no
			// parameters: no dtypes, no reduction, no collectives; only the
			// module's hooks (for the root: lazy init, the final callback).
			t.f("  no parameters: FSDP2 creates no parameter group for it; its hooks run, it issues no collectives\n")
			continue
		}
		t.f("  dtypes orig %s, param %s, reduce %s", pol.Orig, pol.Param, pol.Reduce)
		if pol.Output != ir.DTypeInvalid {
			t.f(", output %s", pol.Output)
		}
		if !pol.CastForwardInputs {
			t.f(", inputs not cast")
		}
		t.f("\n")
		t.f("  reduce-scatter %s", reduceText(pol.ReduceScatterOp, pol.PremulFactor))
		if p.Cluster.Replicate > 1 {
			t.f(", all-reduce %s", reduceText(pol.AllReduceOp, 0))
		}
		if pol.PreDivide != 1 || pol.PostDivide != 1 {
			t.f(", divide %s before and %s after", num(pol.PreDivide), num(pol.PostDivide))
		}
		if g.DeferredReduce {
			t.f(", deferred to the end of backward")
		}
		t.f("\n")
		t.f("  shard %s elements per rank (%s), all-gather %s; gradients %s elements per rank\n",
			ir.FormatCount(g.ShardNumel), ir.FormatBytes(g.ShardNumel*pol.Orig.Size()),
			ir.FormatBytes(gatherBytes(g, W)), ir.FormatCount(g.GradShardNumel))
		for _, gp := range g.Params {
			grad := "frozen"
			if gp.RequiresGrad {
				grad = "grad@" + strconv.FormatInt(gp.GradOffset, 10)
			}
			dim := ""
			if gp.ShardDim != 0 {
				dim = fmt.Sprintf(" dim %d", gp.ShardDim)
			}
			t.f("  param %s %s %s rows %d/rank%s @%d %s", gp.Name, shape(gp.Shape), gp.DType, gp.ChunkRows, dim, gp.Offset, grad)
			if len(gp.Aliases) > 0 {
				t.f(" = %s", strings.Join(gp.Aliases, " = "))
			}
			t.f("\n")
		}
	}
}

func prefetch(k int) string {
	if k == 0 {
		return "implicit"
	}
	return strconv.Itoa(k)
}

func reduceText(op ReduceOp, factor float64) string {
	if op == ReducePremulSum {
		return fmt.Sprintf("premul-sum ×%s", num(factor))
	}
	return op.String()
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func shape(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (t *textWriter) program() {
	p := t.p
	if len(p.Ops) == 0 {
		return
	}
	t.f("\nschedule %d ops, %d buffers, %d events\n", len(p.Ops), len(p.Buffers), p.Events)
	persistent := 0
	for _, b := range p.Buffers {
		if b.Persistent {
			persistent++
		}
	}
	if persistent > 0 {
		t.f("persistent\n")
		for _, b := range p.Buffers {
			if b.Persistent {
				t.f("  %s %s in %s pool\n", b.Name, ir.FormatBytes(b.Bytes), b.Pool)
			}
		}
	}
	// Micro-batches repeat: a block whose operations read the same as the
	// previous micro-batch's, up to the micro-batch number, prints as one
	// line. Blocks are printed as they end, and only the last printed
	// block of each phase is kept to compare with: a plan of millions of
	// operations never holds all its lines.
	previous := map[Phase]*opBlock{}
	var b *opBlock
	flush := func() {
		if b == nil {
			return
		}
		if prev := previous[b.phase]; prev != nil && sameBlock(prev, b.micro, b.lines) {
			t.f("%s mb%d: as mb%d\n", b.phase, b.micro, prev.micro)
			return
		}
		t.f("%s mb%d\n", b.phase, b.micro)
		for _, l := range b.lines {
			t.b.WriteString(l)
		}
		previous[b.phase] = b
	}
	for i := range p.Ops {
		o := &p.Ops[i]
		if b == nil || b.phase != o.Phase || b.micro != o.Micro {
			flush()
			b = &opBlock{phase: o.Phase, micro: o.Micro}
		}
		b.lines = append(b.lines, fmt.Sprintf("  %-14s %s\n", o.Stream, safetext.Escape(t.opText(o))))
	}
	flush()
}

// opBlock is the printed operations of one phase of one micro-batch.
type opBlock struct {
	phase Phase
	micro int32
	lines []string
}

// sameBlock reports whether lines, from micro-batch micro, equal prev's
// once each side's micro-batch number is masked.
func sameBlock(prev *opBlock, micro int32, lines []string) bool {
	if len(prev.lines) != len(lines) {
		return false
	}
	a, b := fmt.Sprintf("mb%d", prev.micro), fmt.Sprintf("mb%d", micro)
	for i := range lines {
		if strings.ReplaceAll(prev.lines[i], a, "mb*") != strings.ReplaceAll(lines[i], b, "mb*") {
			return false
		}
	}
	return true
}

func (t *textWriter) bufName(i int32) string {
	if i < 0 || int(i) >= len(t.p.Buffers) {
		return "?"
	}
	return t.p.Buffers[i].Name
}

func (t *textWriter) eventName(i int32) string {
	if i >= 0 && int(i) < len(t.p.EventNames) {
		return "[" + t.p.EventNames[i] + "]"
	}
	return fmt.Sprintf("[event %d]", i)
}

func (t *textWriter) opText(o *Op) string {
	p := t.p
	switch o.Kind {
	case OpAlloc:
		return fmt.Sprintf("alloc %s %s", t.bufName(o.Buffer), ir.FormatBytes(o.Bytes))
	case OpFree:
		return fmt.Sprintf("free %s", t.bufName(o.Buffer))
	case OpRecord:
		return "record " + t.eventName(o.Event)
	case OpWait:
		return "wait " + t.eventName(o.Event)
	case OpSync:
		return "host waits " + t.eventName(o.Event)
	case OpForward, OpBackward:
		mod := "?"
		if o.Module >= 0 && int(o.Module) < len(p.Modules) {
			mod = p.Modules[o.Module]
		}
		return fmt.Sprintf("%s %s %s", o.Kind, mod, ir.FormatFLOP(o.FLOPs))
	case OpAllGather, OpReduceScatter, OpAllReduce:
		s := fmt.Sprintf("%s %s -> %s %s %s over %s(%d)", o.Kind, t.bufName(o.Source), t.bufName(o.Buffer), o.DType, ir.FormatBytes(o.Bytes), o.PG, o.PGSize)
		if o.Kind != OpAllGather {
			s += " " + reduceText(o.Reduce, o.Factor)
		}
		return s
	case OpDivide:
		return fmt.Sprintf("divide %s by %s", t.bufName(o.Buffer), num(o.Factor))
	case OpOptimizer:
		return fmt.Sprintf("optimizer %s %s", t.bufName(o.Buffer), ir.FormatBytes(o.Bytes))
	}
	return fmt.Sprintf("%s %s -> %s %s %s", o.Kind, t.bufName(o.Source), t.bufName(o.Buffer), o.DType, ir.FormatBytes(o.Bytes))
}

// gatherBytes is a group's all-gather output: W rows of its all-gather
// input, which for a group gathering several dtypes is their bytes (R42),
// not ShardNumel elements of the param dtype.
func gatherBytes(g *Group, W int64) int64 {
	if g.ShardBytes > 0 {
		return g.ShardBytes * W
	}
	return g.ShardNumel * W * g.Policy.Param.Size()
}
