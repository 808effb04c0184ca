package schedule_test

import (
	"math"
	"strings"
	"testing"

	. "github.com/fsdpc/fsdpc/schedule"
)

// TestOptimizerImplementation: plans name the AdamW implementation their
// step was priced as, and Check refuses another name or one on another
// optimizer.
func TestOptimizerImplementation(t *testing.T) {
	base := zooByName(t, "llama3-8b")
	if got := base.Train.OptimizerImplementation; got != "fused" {
		t.Errorf("llama3-8b's AdamW: implementation %q, want fused (the model format's default)", got)
	}
	for _, tc := range []struct {
		name, want string
		set        func(p *Plan)
	}{
		{"unknown", "want \"fused\", \"foreach\" or none", func(p *Plan) { p.Train.OptimizerImplementation = "compiled" }},
		{"on sgd", "only adamw's", func(p *Plan) { p.Train.Optimizer = "sgd" }},
	} {
		p := base.Clone()
		tc.set(p)
		if err := Check(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check says %v, want %q", tc.name, err, tc.want)
		}
	}
	none := base.Clone()
	none.Train.OptimizerImplementation = "" // a plan from before format 10
	if err := Check(none); err != nil {
		t.Errorf("no implementation: %v", err)
	}
}

// TestMaxGradNorm: a plan carries the clipping threshold its step was
// priced with, and Check refuses one that is negative or not finite.
func TestMaxGradNorm(t *testing.T) {
	base := zooByName(t, "llama3-8b-torchtitan") // torchtitan clips at 1.0
	if got := base.Train.MaxGradNorm; got != 1 {
		t.Errorf("llama3-8b-torchtitan clips at %g, want 1", got)
	}
	for _, bad := range []float64{-1, math.Inf(1), math.NaN()} {
		p := base.Clone()
		p.Train.MaxGradNorm = bad
		if err := Check(p); err == nil || !strings.Contains(err.Error(), "max_grad_norm") {
			t.Errorf("max_grad_norm %g: Check says %v", bad, err)
		}
	}
}

// TestElemRecompute: a checkpointed plan carries, per module, the
// element-wise bytes its backward reruns, which the cost model prices at
// the forward share; Check refuses figures that do not fit the plan.
func TestElemRecompute(t *testing.T) {
	base := zooByName(t, "llama3-8b-torchtitan") // selective-op checkpointing
	if len(base.ElemRecompute) != len(base.Modules) {
		t.Fatalf("%d element-wise recompute figures for %d modules", len(base.ElemRecompute), len(base.Modules))
	}
	bwd := nth(t, base, 0, func(o *Op) bool { return o.Kind == OpBackward && base.OpElemRecompute(o) > 0 })
	if o := &base.Ops[bwd]; base.OpElemRecompute(o) >= o.ElemBytes {
		t.Errorf("backward %d recomputes %d of its %d element-wise bytes: want part of them", bwd, base.OpElemRecompute(o), o.ElemBytes)
	}
	fwd := nth(t, base, 0, func(o *Op) bool { return o.Kind == OpForward })
	if got := base.OpElemRecompute(&base.Ops[fwd]); got != 0 {
		t.Errorf("a forward recomputes %d bytes", got)
	}
	for _, tc := range []struct {
		name, want string
		set        func(p *Plan)
	}{
		{"one short", "want one each", func(p *Plan) { p.ElemRecompute = p.ElemRecompute[1:] }},
		{"negative", "negative element-wise recompute", func(p *Plan) { p.ElemRecompute[p.Ops[bwd].Module] = -1 }},
		{"above the backward's", "fewer than the", func(p *Plan) { p.ElemRecompute[p.Ops[bwd].Module] = p.Ops[bwd].ElemBytes + 1 }},
	} {
		p := base.Clone()
		tc.set(p)
		if err := Check(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check says %v, want %q", tc.name, err, tc.want)
		}
	}
}
