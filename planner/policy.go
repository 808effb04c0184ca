package planner

import (
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// policyFor merges the policy default with every override whose pattern
// matches one of the unit's modules, in file order, later ones winning key
// by key.
func (s *state) policyFor(u *unit) ir.GroupPolicy {
	g := s.m.Policy.Default
	for _, o := range s.m.Policy.Overrides {
		matched := false
		for _, mod := range u.modules {
			matched = matched || o.Match.Glob.Match(s.m.Modules[mod].Name)
		}
		if !matched {
			continue
		}
		if o.ReshardAfterForward != nil {
			g.ReshardAfterForward = o.ReshardAfterForward
		}
		if o.PrefetchForward != nil {
			g.PrefetchForward = o.PrefetchForward
		}
		if o.PrefetchBackward != nil {
			g.PrefetchBackward = o.PrefetchBackward
		}
		if o.ParamDType != ir.DTypeInvalid {
			g.ParamDType = o.ParamDType
		}
		if o.ReduceDType != ir.DTypeInvalid {
			g.ReduceDType = o.ReduceDType
		}
		if o.OutputDType != ir.DTypeInvalid {
			g.OutputDType = o.OutputDType
		}
		if o.CastForwardInputs != nil {
			g.CastForwardInputs = o.CastForwardInputs
		}
		if o.Offload != nil {
			g.Offload = o.Offload
		}
		if o.GradientDivideFactor != nil {
			g.GradientDivideFactor = o.GradientDivideFactor
		}
		if o.ForceSumReduction != nil {
			g.ForceSumReduction = o.ForceSumReduction
		}
		if o.ShardDim != nil {
			g.ShardDim = o.ShardDim
		}
	}
	return g
}

// resolvePolicies fixes every group's settings with FSDP2's defaults and
// clamping rules.
func resolvePolicies(s *state) error {
	m := s.m
	W := m.Cluster.ShardSize()
	replicate := 1
	if m.Cluster.Mesh != nil {
		replicate = m.Cluster.Mesh.Replicate
	}
	for gi, u := range s.units {
		g := &s.plan.Groups[gi]
		pol := s.policyFor(u)
		r := &g.Policy

		// reshard_after_forward: unset means true for non-root units and
		// false for the root (FSDP2's None default since mid-2025). An
		// int N reshards to N ranks; 1 is false and W is true, as FSDP2
		// normalises them.
		switch rf := pol.ReshardAfterForward; {
		case rf == nil && g.Root:
			r.Reshard = schedule.ReshardFalse
		case rf == nil || rf.N == 0 && rf.Bool:
			r.Reshard = schedule.ReshardTrue
		case rf.N == 0:
			r.Reshard = schedule.ReshardFalse
		case rf.N == 1:
			r.Reshard = schedule.ReshardFalse
			s.warnAt(s.settingPos(u, "reshard_after_forward"), "%s: reshard_after_forward = 1 keeps the whole unsharded parameters, the same as false", groupLabel(g))
		case rf.N == W:
			r.Reshard = schedule.ReshardTrue
			s.warnAt(s.settingPos(u, "reshard_after_forward"), "%s: reshard_after_forward = %d is the whole shard group, the same as true", groupLabel(g), W)
		default:
			r.Reshard, r.ReshardTo = schedule.ReshardTo, rf.N
		}
		if pol.PrefetchForward != nil {
			r.PrefetchForward = *pol.PrefetchForward
		}
		if pol.PrefetchBackward != nil {
			r.PrefetchBackward = *pol.PrefetchBackward
		}
		r.CastForwardInputs = pol.CastForwardInputs == nil || *pol.CastForwardInputs
		r.Offload = pol.Offload != nil && *pol.Offload
		if !s.mixedPrecision(gi, pol) {
			continue // reported; the other groups are still checked
		}
		divideFactors(r, pol, W, replicate)
	}
	return nil
}

// mixedPrecision applies MixedPrecisionPolicy's clamping: the original
// dtype is the one dtype of the trainable parameters; param_dtype equal to
// it means no cast; reduce_dtype equal to the (cast) parameter dtype means
// none; the gradient is reduced in reduce_dtype, or in the parameter dtype.
// A group whose trainable parameters do not share a dtype is reported,
// and mixedPrecision returns false.
func (s *state) mixedPrecision(gi int, pol ir.GroupPolicy) bool {
	g := &s.plan.Groups[gi]
	r := &g.Policy
	var origs []string
	first := -1
	for i, p := range g.Params {
		if !p.RequiresGrad {
			continue
		}
		if r.Orig == ir.DTypeInvalid {
			r.Orig, first = p.DType, i
		} else if p.DType != r.Orig {
			origs = append(origs, fmt.Sprintf("%s is %s", p.Name, p.DType))
		}
	}
	if len(origs) > 0 {
		var notes []ir.Note
		for i, p := range g.Params {
			if p.RequiresGrad && (i == first || p.DType != r.Orig) {
				notes = append(notes, note(s.m.Params[s.units[gi].params[i]].Pos, "%s is %s", p.Name, p.DType))
			}
		}
		s.errorAt(s.groupPos(gi), notes, "%s: trainable parameters of one group must share a dtype (FSDP2 asserts it); the group is %s but %s",
			groupLabel(g), r.Orig, strings.Join(origs, ", "))
		return false
	}
	if r.Orig == ir.DTypeInvalid && len(g.Params) > 0 {
		r.Orig = g.Params[0].DType // an all-frozen group
	}
	// Each parameter gathers in param_dtype if it is floating point, in its
	// own dtype otherwise (FSDP2 clamps param_dtype per parameter). When the
	// group's parameters gather in different dtypes FSDP2 gathers bytes
	// (uint8), and the sizes are the parameters' bytes.
	gatherOf := func(dt ir.DType) ir.DType {
		if pol.ParamDType != ir.DTypeInvalid && dt.IsFloat() {
			return pol.ParamDType
		}
		return dt
	}
	r.Param = gatherOf(r.Orig)
	uniform := true
	g.ShardBytes = 0
	for i := range g.Params {
		gp := &g.Params[i]
		gp.GatherDType = gatherOf(gp.DType)
		g.ShardBytes += gp.ShardNumel * gp.GatherDType.Size()
		uniform = uniform && gp.GatherDType == r.Param
	}
	if !uniform {
		s.warnAt(s.groupPos(gi), "%s: its parameters gather in different dtypes, so FSDP2 all-gathers them as bytes (uint8); a param_dtype that covers them all keeps one dtype", groupLabel(g))
		r.Param = ir.UINT8
	}
	// Gradients come in the trainable parameters' compute dtype, which is
	// what reduce_dtype defaults to.
	r.Reduce = gatherOf(r.Orig)
	if pol.ReduceDType != ir.DTypeInvalid {
		r.Reduce = pol.ReduceDType
	}
	r.Output = pol.OutputDType
	return true
}

// divideFactors follows FSDP2's _get_gradient_divide_factors: averaging
// collectives for fp32 and bf16, sums with explicit pre- and post-division
// for fp16 (to avoid overflow) or when forced, PREMUL_SUM for a custom
// factor.
func divideFactors(r *schedule.GroupPolicy, pol ir.GroupPolicy, shard, replicate int) {
	dp := float64(shard * replicate)
	f, custom := dp, false
	if pol.GradientDivideFactor != nil {
		f, custom = *pol.GradientDivideFactor, true
	}
	r.PreDivide, r.PostDivide, r.PremulFactor = 1, 1, 0
	forceSum := pol.ForceSumReduction != nil && *pol.ForceSumReduction
	overflowRisk := r.Reduce != ir.FP32 && r.Reduce != ir.BF16
	switch {
	case overflowRisk || forceSum:
		// FSDP2 sums in any reduce dtype but fp32 and bf16 (overflow risk),
		// dividing before and after, and when sums are forced.
		r.ReduceScatterOp, r.AllReduceOp = schedule.ReduceSum, schedule.ReduceSum
		if overflowRisk {
			// FSDP2: pre = 1; while f % pre == 0 and f / pre > pre: pre *= 2
			// (about √f: 8 → 4, 12 → 4, 6 → 4).
			pre := 1.0
			for isMultiple(f, pre) && f/pre > pre {
				pre *= 2
			}
			r.PreDivide, r.PostDivide = pre, f/pre
		} else {
			r.PostDivide = f
		}
	case custom:
		// A factor equal to the reduce-scatter group's size (the shard
		// group, not the data-parallel size: they differ under HSDP)
		// averages the reduce-scatter; any other pre-multiplies by 1/f.
		// The all-reduce then sums (_fsdp_collectives.py
		// _get_gradient_divide_factors, torch 2.14).
		if f == float64(shard) {
			r.ReduceScatterOp, r.AllReduceOp = schedule.ReduceAvg, schedule.ReduceSum
		} else {
			r.ReduceScatterOp, r.AllReduceOp, r.PremulFactor = schedule.ReducePremulSum, schedule.ReduceSum, 1/f
		}
	case dp > 1:
		r.ReduceScatterOp, r.AllReduceOp = schedule.ReduceAvg, schedule.ReduceAvg
	default:
		r.ReduceScatterOp, r.AllReduceOp = schedule.ReduceSum, schedule.ReduceSum
	}
}

func isMultiple(f, d float64) bool {
	q := f / d
	return q == float64(int64(q))
}

func groupLabel(g *schedule.Group) string {
	if g.Root {
		return "group (root)"
	}
	return "group " + g.Name
}
