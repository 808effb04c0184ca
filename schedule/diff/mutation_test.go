package diff_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// nth is the index of the n-th op (0-based) matching pred.
func nth(t *testing.T, p *schedule.Plan, n int, pred func(o *schedule.Op) bool) int {
	t.Helper()
	for i := range p.Ops {
		if pred(&p.Ops[i]) {
			if n == 0 {
				return i
			}
			n--
		}
	}
	t.Fatal("no such op")
	return -1
}

func is(k schedule.OpKind) func(o *schedule.Op) bool {
	return func(o *schedule.Op) bool { return o.Kind == k }
}

func isIn(k schedule.OpKind, g int) func(o *schedule.Op) bool {
	return func(o *schedule.Op) bool { return o.Kind == k && int(o.Group) == g }
}

// TestMutationsShow: each class of hand-made change to a plan, including
// those that leave every count of operations per kind as it was (which is
// all the diff compared before), shows in the diff with what changed, and
// a change repeated over groups is folded into one line.
func TestMutationsShow(t *testing.T) {
	base := planOf(t, "plans/gpt2-124m.toml", zooText(t, "gpt2-124m"))
	tests := []struct {
		name   string
		mutate func(t *testing.T, p *schedule.Plan)
		want   string
	}{
		{"a wait deleted", func(t *testing.T, p *schedule.Plan) {
			i := nth(t, p, 5, is(schedule.OpWait))
			p.Ops = append(p.Ops[:i], p.Ops[i+1:]...)
		}, "forward: 1 wait removed in"},
		{"a wait on another event", func(t *testing.T, p *schedule.Plan) {
			w := nth(t, p, 5, is(schedule.OpWait))
			p.Ops[w].Event = p.Ops[nth(t, p, 0, is(schedule.OpRecord))].Event
		}, "forward: 1 wait changed (event)"},
		{"a record deleted", func(t *testing.T, p *schedule.Plan) {
			i := nth(t, p, 3, is(schedule.OpRecord))
			p.Ops = append(p.Ops[:i], p.Ops[i+1:]...)
		}, "forward: 1 record removed"},
		{"a free moved", func(t *testing.T, p *schedule.Plan) {
			i := nth(t, p, 0, isIn(schedule.OpFree, 2))
			o := p.Ops[i]
			p.Ops = append(p.Ops[:i], p.Ops[i+1:]...)
			p.Ops = append(p.Ops[:i-3], append([]schedule.Op{o}, p.Ops[i-3:]...)...)
		}, "forward: 1 free moved in transformer.h.1"},
		{"a micro-batch label", func(t *testing.T, p *schedule.Plan) {
			p.Ops[nth(t, p, 1, isIn(schedule.OpBackward, 1))].Micro = 0
		}, "backward: 1 backward changed (micro-batch) in transformer.h.0"},
		{"a phase label", func(t *testing.T, p *schedule.Plan) {
			p.Ops[nth(t, p, 0, isIn(schedule.OpForward, 3))].Phase = schedule.PhaseBackward
		}, "1 forward changed (phase) in transformer.h.2"},
		{"a stream", func(t *testing.T, p *schedule.Plan) {
			p.Ops[nth(t, p, 0, isIn(schedule.OpCopyIn, 3))].Stream = schedule.StreamCompute
		}, "1 copy-in removed in transformer.h.2"},
		{"a backward reads other activations", func(t *testing.T, p *schedule.Plan) {
			a, b := nth(t, p, 0, isIn(schedule.OpBackward, 2)), nth(t, p, 0, isIn(schedule.OpBackward, 3))
			p.Ops[a].Uses, p.Ops[b].Uses = p.Ops[b].Uses, p.Ops[a].Uses
		}, "backward: 2 backwards changed (uses)"},
		{"the element-wise bytes a backward recomputes, alone", func(t *testing.T, p *schedule.Plan) {
			// The cost model prices them apart from the rest of the
			// backward's element-wise bytes (schedule.Plan.ElemRecompute).
			m := p.Ops[nth(t, p, 0, isIn(schedule.OpBackward, 2))].Module
			if len(p.ElemRecompute) == 0 {
				p.ElemRecompute = make([]int64, len(p.Modules))
			}
			p.ElemRecompute[m]++
		}, "changed (recomputed element bytes) in transformer.h.1"},
		{"the optimizer's implementation", func(t *testing.T, p *schedule.Plan) {
			p.Train.OptimizerImplementation = "foreach"
		}, "optimizer_implementation: fused → foreach"},
		{"the clipping threshold", func(t *testing.T, p *schedule.Plan) {
			p.Train.MaxGradNorm = 0.5
		}, "max_grad_norm: none → 0.5"},
		{"a parameter renamed", func(t *testing.T, p *schedule.Plan) {
			p.Groups[1].Params[2].Name = "transformer.h.0.attn.c_attn.weight2"
		}, "transformer.h.0.attn.c_attn.weight name: transformer.h.0.attn.c_attn.weight → transformer.h.0.attn.c_attn.weight2"},
		{"a parameter frozen", func(t *testing.T, p *schedule.Plan) {
			p.Groups[1].Params[2].RequiresGrad = false
		}, "transformer.h.0.attn.c_attn.weight requires_grad: true → false"},
		{"a buffer resized", func(t *testing.T, p *schedule.Plan) {
			p.Buffers[p.Ops[nth(t, p, 0, isIn(schedule.OpCopyOut, 1))].Buffer].Bytes /= 2
		}, "unsharded bytes: 13.52 MiB → 6.76 MiB on transformer.h.0"},
		{"a warning dropped", func(t *testing.T, p *schedule.Plan) {
			p.Warnings = p.Warnings[1:]
		}, "no longer: group (root)"},
		{"a cost figure", func(t *testing.T, p *schedule.Plan) {
			p.Cluster.HBMBandwidth *= 2
		}, "Cluster.HBMBandwidth"},
		{"a policy field no other section shows", func(t *testing.T, p *schedule.Plan) {
			p.Groups[4].Policy.CastForwardInputs = !p.Groups[4].Policy.CastForwardInputs
		}, "group transformer.h.3.Policy.CastForwardInputs: true → false"},
		{"a parameter's offset inside an unchanged group layout", func(t *testing.T, p *schedule.Plan) {
			p.Groups[2].Params[1].Offset++
		}, "transformer.h.1.ln_1.bias.Offset: 96 → 97"},
		{"reshard_to of a group that does not reshard to a slice", func(t *testing.T, p *schedule.Plan) {
			// Found by TestBitFlipSweep: the policy section shows
			// reshard_to only for int reshard.
			p.Groups[7].Policy.ReshardTo = 8
		}, "group transformer.h.6.Policy.ReshardTo: 0 → 8"},
		{"the stored peak op alone", func(t *testing.T, p *schedule.Plan) {
			p.Prediction.PeakOp--
		}, "Prediction.PeakOp"},
		{"an event no op names, renamed", func(t *testing.T, p *schedule.Plan) {
			p.EventNames = append(append([]string(nil), p.EventNames...), "spare")
			p.Events++
		}, "unused event:  → spare"},
		{"every layer's forward waits retargeted", func(t *testing.T, p *schedule.Plan) {
			// The compute stream's wait for each layer's all-gather in
			// forward, pointed at the group's copy-in instead: 12 waits,
			// one line.
			for g := 1; g <= 12; g++ {
				co := nth(t, p, 0, isIn(schedule.OpCopyOut, g))
				w := co - 2
				if p.Ops[w].Kind != schedule.OpWait {
					t.Fatalf("op %d is %s", w, p.Ops[w].Kind)
				}
				p.Ops[w].Event = p.Ops[nth(t, p, 0, isIn(schedule.OpCopyIn, g))+2].Event
			}
		}, "forward: 12 waits changed (event) in transformer.h.{0–11}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base.Clone()
			tt.mutate(t, p)
			r := diff.Compare("old", base, "new", p)
			var b bytes.Buffer
			diff.Text(&b, r, false)
			if r.Identical || !strings.Contains(b.String(), tt.want) {
				t.Errorf("identical %v; the diff lacks %q:\n%s", r.Identical, tt.want, b.String())
			}
		})
	}
}
