package schedule

import (
	"fmt"
	"math"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// The semantic half of Verify: what a plan computes, beyond the order it
// computes it in. A plan can order every buffer use correctly and still be
// wrong: an op that reads the wrong kind of buffer or another group's, a
// buffer sized unlike its layout (so the memory verdict is about a
// different plan), a module run twice in a micro-batch and never in
// another, a gradient that is computed but never reaches the optimizer.
// These are the checks that hand-forged and bit-flipped plans showed were
// missing (issue 14).

// operands holds every data-moving op to its OperandRule: the kinds of its
// target, source and further uses, all in its own group.
func (v *hbVerifier) operands() {
	p := v.p
	for i := range p.Ops {
		o := &p.Ops[i]
		rule, ok := Operands(o.Kind)
		if !ok {
			continue
		}
		if o.Group < 0 {
			v.errorf("%s belongs to no group; every %s moves a group's data", v.describe(i), o.Kind)
			continue
		}
		for _, x := range []struct {
			buf      int32
			ks       []BufferKind
			optional bool
			role     string
		}{{o.Buffer, rule.Target, rule.TargetOptional, "target"}, {o.Source, rule.Source, rule.SourceOptional, "source"}} {
			switch {
			case x.buf < 0 && x.optional:
			case x.buf < 0:
				v.errorf("%s has no %s buffer; it needs a %s", v.describe(i), x.role, kindList(x.ks))
			case !allows(x.ks, p.Buffers[x.buf].Kind):
				v.errorf("%s: its %s %q is a %s buffer; a %s's %s is a %s", v.describe(i), x.role, p.Buffers[x.buf].Name,
					p.Buffers[x.buf].Kind, o.Kind, x.role, kindList(x.ks))
			case p.Buffers[x.buf].Group != int(o.Group):
				v.errorf("%s: its %s %q belongs to another group", v.describe(i), x.role, p.Buffers[x.buf].Name)
			}
		}
		// What the executors refuse to run, Verify refuses to call safe.
		grp := &p.Groups[o.Group]
		switch {
		case o.Kind == OpDivide && !(o.Factor > 0 && !math.IsInf(o.Factor, 0)):
			v.errorf("%s divides by %v", v.describe(i), o.Factor)
		case o.Kind == OpReshard && grp.Policy.Reshard != ReshardTo,
			o.Kind == OpCopyIn && o.Source >= 0 && p.Buffers[o.Source].Kind == BufPostForwardSlice && grp.Policy.Reshard != ReshardTo:
			v.errorf("%s keeps or gathers a post-forward slice of group %s, which does not reshard to a slice", v.describe(i), grp.Label())
		}
		uses := p.OpUses(o)
		if len(uses) > rule.MaxUses {
			v.errorf("%s reads %d further buffers; a %s reads at most %d", v.describe(i), len(uses), o.Kind, rule.MaxUses)
			continue
		}
		for _, u := range uses {
			switch {
			case !allows(rule.Uses, p.Buffers[u].Kind):
				v.errorf("%s reads %q, a %s buffer; a %s reads %s there", v.describe(i), p.Buffers[u].Name, p.Buffers[u].Kind, o.Kind, kindList(rule.Uses))
			case p.Buffers[u].Group != int(o.Group):
				v.errorf("%s reads %q, which belongs to another group", v.describe(i), p.Buffers[u].Name)
			}
		}
	}
}

func kindList(ks []BufferKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = k.String()
	}
	return strings.Join(s, " or ")
}

// layouts: what FSDP2's layout allows and the executors assume: a
// group's trainable parameters are all in its original dtype (one
// reduce-scatter row, one optimizer), and only dimension 0 may be sharded
// unevenly.
func (v *hbVerifier) layouts() {
	p := v.p
	W := int64(p.Cluster.Shard)
	for gi := range p.Groups {
		g := &p.Groups[gi]
		for _, gp := range g.Params {
			if gp.RequiresGrad && gp.DType != g.Policy.Orig {
				v.errorf("group %s: trainable parameter %s is %s, but the group's original dtype is %s", g.Label(), gp.Name, gp.DType, g.Policy.Orig)
			}
			if gp.ShardDim > 0 && gp.ShardDim < len(gp.Shape) && gp.Shape[gp.ShardDim]%W != 0 {
				v.errorf("group %s: parameter %s is sharded on dimension %d, whose %d rows do not divide over %d ranks", g.Label(), gp.Name, gp.ShardDim, gp.Shape[gp.ShardDim], W)
			}
		}
	}
}

// sizes: every buffer of a group is as large as the group's layout makes
// it (the formulas of docs/semantics.md R50, which the executor also sizes
// by), so the memory verdict describes the plan that runs.
func (v *hbVerifier) sizes() {
	p := v.p
	W := int64(p.Cluster.Shard)
	for bi := range p.Buffers {
		b := &p.Buffers[bi]
		if b.Group < 0 {
			if b.Kind != BufActivations && b.Kind != BufRecompute {
				v.errorf("buffer %q (%s) belongs to no group", b.Name, b.Kind)
			}
			continue
		}
		g := &p.Groups[b.Group]
		var sharded, gradNumel int64
		compute := ir.DTypeInvalid
		for _, gp := range g.Params {
			sharded += gp.ShardNumel * gp.DType.Size()
			if gp.RequiresGrad {
				n := int64(1)
				for _, d := range gp.Shape {
					n *= d
				}
				gradNumel += n
				if compute == ir.DTypeInvalid {
					compute = gp.GatherDType
				}
			}
		}
		if compute == ir.DTypeInvalid {
			compute = g.Policy.Param
		}
		pol := &g.Policy
		var want int64
		switch b.Kind {
		case BufShardedParams:
			want = sharded
		case BufH2DTemp:
			want = sharded
			if b.Pool == PoolHost { // a later micro-batch's gradient copied to the host
				want = g.GradShardNumel * pol.Orig.Size()
			}
		case BufShardedGrads:
			want = g.GradShardNumel * pol.Orig.Size()
		case BufOptimizerState:
			want = g.GradShardNumel * p.Train.OptimizerStateBytes
		case BufCastTemp:
			want = g.ShardBytes
		case BufAllGatherOut, BufUnsharded:
			want = W * g.ShardBytes
		case BufPostForwardSlice:
			if pol.Reshard != ReshardTo || pol.ReshardTo < 1 {
				v.errorf("buffer %q keeps a post-forward slice of group %s, which does not reshard to a slice", b.Name, g.Label())
				continue
			}
			want = W * g.ShardBytes / int64(pol.ReshardTo)
		case BufUnshardedGrads:
			want = gradNumel * compute.Size()
		case BufAccumGrads:
			want = gradNumel * pol.Reduce.Size()
		case BufReduceScatterIn:
			want = W * g.GradShardNumel * pol.Reduce.Size()
		case BufReduceScatterOut:
			want = g.GradShardNumel * pol.Reduce.Size()
		default: // activations and recompute: sized by the model, not the layout
			continue
		}
		if b.Bytes != want {
			v.errorf("buffer %q (%s of group %s) is %d bytes; the group's layout makes it %d", b.Name, b.Kind, g.Label(), b.Bytes, want)
		}
	}
}

// modules: every micro-batch runs each module's forward exactly once and
// the same backwards, and a backward reads the activations its own
// module's forward saved in the same micro-batch; parameters are copied
// out of an all-gather output only after the all-gather. In a group with
// gradients every backward writes them.
func (v *hbVerifier) modules() {
	p := v.p
	ga, nm := int(p.Train.GradAccum), len(p.Modules)
	if nm > 0 && ga > len(p.Ops)/nm {
		v.errorf("%d micro-batches of %d modules need %d forwards; the plan has %d ops", ga, nm, ga*nm, len(p.Ops))
		return
	}
	fwd := make([]int, nm*ga)
	bwd := make([]int, nm*ga)
	writer := make([]int, len(p.Buffers)) // the last op that wrote each buffer
	for i := range writer {
		writer[i] = -1
	}
	for i := range p.Ops {
		o := &p.Ops[i]
		switch o.Kind {
		case OpForward:
			fwd[int(o.Module)*ga+int(o.Micro)]++
		case OpCopyOut:
			// The all-gather output holds every rank's shard only once the
			// collective has run: a copy-in alone leaves the others' rows
			// unwritten.
			// (On one rank the copy-in fills it.)
			if w := writer[o.Source]; p.Cluster.Shard > 1 && (w < 0 || p.Ops[w].Kind != OpAllGather) {
				v.errorf("%s copies out %q, which no all-gather has filled since it was last written", v.describe(i), p.Buffers[o.Source].Name)
			}
		case OpBackward:
			bwd[int(o.Module)*ga+int(o.Micro)]++
			if o.Buffer < 0 && o.Group >= 0 && p.Groups[o.Group].GradShardNumel > 0 {
				v.errorf("%s writes no gradients, but group %s has trainable parameters", v.describe(i), p.Groups[o.Group].Label())
			}
			for _, u := range p.OpUses(o) {
				if p.Buffers[u].Kind != BufActivations {
					continue
				}
				w := writer[u]
				if w < 0 || p.Ops[w].Kind != OpForward || p.Ops[w].Module != o.Module || p.Ops[w].Micro != o.Micro {
					from := "nothing"
					if w >= 0 {
						from = v.describe(w)
					}
					v.errorf("%s reads activations %q saved by %s, not by its own module's forward in micro-batch %d", v.describe(i), p.Buffers[u].Name, from, o.Micro)
				}
			}
		}
		if o.Kind != OpAlloc && o.Kind != OpFree && o.Buffer >= 0 {
			writer[o.Buffer] = i
		}
	}
	for m := range nm {
		for mb := range ga {
			if n := fwd[m*ga+mb]; n != 1 {
				v.errorf("module %s runs forward %d times in micro-batch %d; it must run once", p.Modules[m], n, mb)
			}
			if n, n0 := bwd[m*ga+mb], bwd[m*ga]; n > 1 || n != n0 {
				v.errorf("module %s runs backward %d times in micro-batch %d and %d times in micro-batch 0; every micro-batch runs it at most once, the same in all", p.Modules[m], n, mb, n0)
			}
		}
	}
}

// span is a run of micro-batches [lo, hi].
type span struct{ lo, hi int }

// grad is what a buffer holds of its group's gradient: the micro-batches
// whose gradients have been summed into it, and whether all of them have
// been reduce-scattered (and, under HSDP, all-reduced).
type grad struct {
	micro              []span // sorted, disjoint, not adjacent
	reduced, allReduce bool
	// pre and post are the divisions applied before and after the
	// reduction (the policy's pre- and post-divide factors).
	pre, post float64
}

func fresh(mb int) grad { return grad{micro: []span{{mb, mb}}, pre: 1, post: 1} }

// add sums other into g; it reports a micro-batch both hold (added twice).
func (g *grad) add(other grad) (twice int, ok bool) {
	if len(g.micro) == 0 {
		*g = grad{micro: append([]span(nil), other.micro...), reduced: other.reduced, allReduce: other.allReduce, pre: other.pre, post: other.post}
		return 0, true
	}
	if len(other.micro) == 0 {
		return 0, true
	}
	all := append(append([]span(nil), g.micro...), other.micro...)
	// Insertion sort: the lists are a span or two.
	for i := 1; i < len(all); i++ {
		for j := i; j > 0 && all[j].lo < all[j-1].lo; j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	out := all[:1]
	ok = true
	for _, s := range all[1:] {
		last := &out[len(out)-1]
		switch {
		case s.lo <= last.hi:
			if ok {
				twice, ok = s.lo, false
			}
			last.hi = max(last.hi, s.hi)
		case s.lo == last.hi+1:
			last.hi = s.hi
		default:
			out = append(out, s)
		}
	}
	g.micro = out
	g.reduced = g.reduced && other.reduced
	g.allReduce = g.allReduce && other.allReduce
	return twice, ok
}

func (g grad) String() string {
	if len(g.micro) == 0 {
		return "no micro-batch's gradient"
	}
	var parts []string
	for _, s := range g.micro {
		if s.lo == s.hi {
			parts = append(parts, fmt.Sprint(s.lo))
		} else {
			parts = append(parts, fmt.Sprintf("%d–%d", s.lo, s.hi))
		}
	}
	return "the gradients of micro-batches " + strings.Join(parts, ", ")
}

// gradients follows every trainable group's gradient from the backwards
// that write it, through the reduce-scatter (and HSDP's all-reduce) and
// the accumulation over micro-batches, to the optimizer step: each group
// with gradients steps exactly once, on a buffer that holds every
// micro-batch's gradient exactly once, reduced. A plan that computes a
// gradient and then drops it (an accumulate or reduce-copy-in left out, an
// optimizer reading a stale buffer, a backward that writes nowhere) is
// refused here even when its every buffer use is well ordered.
func (v *hbVerifier) gradients() {
	p := v.p
	ga := int(p.Train.GradAccum)
	hsdp := p.Cluster.Replicate > 1
	held := make([]grad, len(p.Buffers))
	written := make([]bool, len(p.Buffers))
	for i, b := range p.Buffers {
		written[i] = b.Persistent
	}
	holder := make([]int32, len(p.Groups)) // the group's latest sharded gradient
	for i := range holder {
		holder[i] = -1
	}
	steps := make([]int, len(p.Groups))
	from := func(src, dst int32) int32 {
		if src < 0 {
			return dst
		}
		return src
	}
	for i := range p.Ops {
		o := &p.Ops[i]
		dst := o.Buffer
		switch o.Kind {
		case OpAlloc:
			held[dst], written[dst] = grad{}, false
			continue
		case OpBackward:
			if dst >= 0 {
				g := fresh(int(o.Micro))
				if written[dst] && len(held[dst].micro) > 0 {
					g = held[dst]
					g.add(fresh(int(o.Micro))) // segments of one micro-batch add up
					g.reduced, g.allReduce, g.pre, g.post = false, false, 1, 1
				}
				held[dst] = g
			}
		case OpReduceCopyIn, OpCastGrad, OpD2H:
			held[dst] = held[from(o.Source, dst)]
		case OpDivide:
			g := held[from(o.Source, dst)]
			if g.reduced {
				g.post *= o.Factor
			} else {
				g.pre *= o.Factor
			}
			held[dst] = g
		case OpReduceScatter:
			g := held[o.Source]
			g.reduced, g.allReduce = true, false
			held[dst] = g
		case OpAllReduce:
			g := held[from(o.Source, dst)]
			g.allReduce = true
			held[dst] = g
		case OpAccumulate:
			if !written[dst] {
				held[dst] = held[o.Source]
				break
			}
			g := held[dst]
			g.micro = append([]span(nil), g.micro...)
			src := held[o.Source]
			if len(g.micro) > 0 && len(src.micro) > 0 && (g.pre != src.pre || g.post != src.post) {
				v.errorf("%s adds a gradient divided by %g/%g into one divided by %g/%g", v.describe(i), src.pre, src.post, g.pre, g.post)
			}
			if mb, ok := g.add(src); !ok {
				v.errorf("%s adds micro-batch %d's gradient into %q a second time", v.describe(i), mb, p.Buffers[dst].Name)
			}
			held[dst] = g
		case OpOptimizer:
			steps[o.Group]++
			gb := holder[o.Group]
			if uses := p.OpUses(o); len(uses) > 0 {
				gb = uses[0]
			}
			grp := &p.Groups[o.Group]
			if grp.GradShardNumel == 0 {
				continue
			}
			if gb < 0 {
				v.errorf("%s steps group %s, which has no gradient yet", v.describe(i), grp.Label())
				continue
			}
			g := held[gb]
			complete := len(g.micro) == 1 && g.micro[0] == span{0, ga - 1}
			switch {
			case !complete:
				v.errorf("%s steps group %s on %q, which holds %s of %d: a gradient is dropped", v.describe(i), grp.Label(), p.Buffers[gb].Name, g, ga)
			case !g.reduced:
				v.errorf("%s steps group %s on %q, which is not reduce-scattered", v.describe(i), grp.Label(), p.Buffers[gb].Name)
			case hsdp && !g.allReduce:
				v.errorf("%s steps group %s on %q, which is not all-reduced across replicas", v.describe(i), grp.Label(), p.Buffers[gb].Name)
			case g.pre != grp.Policy.PreDivide || g.post != grp.Policy.PostDivide:
				v.errorf("%s steps group %s on a gradient divided by %g before and %g after the reduction; its policy divides by %g and %g",
					v.describe(i), grp.Label(), g.pre, g.post, grp.Policy.PreDivide, grp.Policy.PostDivide)
			}
		default:
			continue
		}
		if dst >= 0 {
			written[dst] = true
			if k := p.Buffers[dst].Kind; k == BufReduceScatterOut || k == BufShardedGrads {
				holder[o.Group] = dst
			}
		}
	}
	for g := range p.Groups {
		grp := &p.Groups[g]
		switch {
		case grp.GradShardNumel > 0 && steps[g] != 1:
			v.errorf("group %s has gradients and takes %d optimizer steps; it must take one", grp.Label(), steps[g])
		case grp.GradShardNumel == 0 && steps[g] > 1:
			v.errorf("group %s takes %d optimizer steps", grp.Label(), steps[g])
		}
	}
}
