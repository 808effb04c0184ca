package schedule_test

import (
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"

	. "github.com/fsdpc/fsdpc/schedule"
)

func zooByName(t testing.TB, name string) *Plan {
	t.Helper()
	for _, z := range zoo(t) {
		if z.name == name {
			return z.plan
		}
	}
	t.Fatalf("no zoo plan %s", name)
	return nil
}

// nth returns the index of the n-th op (0-based) matching pred.
func nth(t *testing.T, p *Plan, n int, pred func(o *Op) bool) int {
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

func kindIn(k OpKind, group int) func(o *Op) bool {
	return func(o *Op) bool { return o.Kind == k && int(o.Group) == group }
}

func deleteOp(p *Plan, i int) { p.Ops = append(p.Ops[:i], p.Ops[i+1:]...) }

// forgeries are hand-made plans that order every buffer use correctly (or
// break only what Check must see) but compute the wrong thing; each was
// accepted by Verify (or hung it) before the dataflow checks. Group 1 of
// GPT-2 is transformer.h.0; the plan has 2 micro-batches.
var forgeries = []struct {
	name   string
	forge  func(t *testing.T, p *Plan)
	reason string
}{
	{"copy-out reads activations", func(t *testing.T, p *Plan) {
		co := nth(t, p, 0, kindIn(OpCopyOut, 1))
		p.Ops[co].Source = p.Ops[nth(t, p, 0, kindIn(OpForward, 0))].Buffer // live: the root's activations
	}, "a all-gather-out"},
	{"copy-in writes another group's all-gather output", func(t *testing.T, p *Plan) {
		ci := nth(t, p, 0, kindIn(OpCopyIn, 1))
		p.Ops[ci].Buffer = p.Ops[nth(t, p, 0, kindIn(OpCopyIn, 0))].Buffer // still live
	}, "belongs to another group"},
	{"a buffer smaller than its layout", func(t *testing.T, p *Plan) {
		b := p.Ops[nth(t, p, 0, kindIn(OpCopyOut, 1))].Buffer
		p.Buffers[b].Bytes /= 2
	}, "the group's layout makes it"},
	{"copy-in left out: the all-gather reads nothing", func(t *testing.T, p *Plan) {
		deleteOp(p, nth(t, p, 0, kindIn(OpCopyIn, 1)))
	}, "which no op has written since its allocation"},
	{"all-gather left out", func(t *testing.T, p *Plan) {
		deleteOp(p, nth(t, p, 0, kindIn(OpAllGather, 1)))
	}, "which no all-gather has filled"},
	{"a forward relabelled to another module", func(t *testing.T, p *Plan) {
		p.Ops[nth(t, p, 0, kindIn(OpForward, 1))].Module = p.Ops[nth(t, p, 0, kindIn(OpForward, 2))].Module
	}, "runs forward 2 times in micro-batch 0"},
	{"a backward reads another module's activations", func(t *testing.T, p *Plan) {
		// The root group runs two segments (the head, then the
		// embeddings); the head's backward reads the embeddings'.
		head, emb := nth(t, p, 0, kindIn(OpBackward, 0)), nth(t, p, 1, kindIn(OpBackward, 0))
		if p.Ops[head].Module == p.Ops[emb].Module {
			t.Fatal("the root group has one segment")
		}
		p.Ops[head].Uses = p.Ops[emb].Uses
	}, "not by its own module's forward"},
	{"a backward relabelled to the other micro-batch", func(t *testing.T, p *Plan) {
		p.Ops[nth(t, p, 1, kindIn(OpBackward, 1))].Micro = 0
	}, "runs backward 2 times in micro-batch 0"},
	{"a micro-batch label past grad_accum", func(t *testing.T, p *Plan) {
		p.Ops[nth(t, p, 0, kindIn(OpForward, 1))].Micro = 2
	}, "is in micro-batch 2 of 2"},
	{"grad_accum far beyond the ops", func(t *testing.T, p *Plan) {
		p.Train.GradAccum = 1 << 40
	}, "every micro-batch needs ops"},
	{"a backward that writes no gradients", func(t *testing.T, p *Plan) {
		p.Ops[nth(t, p, 1, kindIn(OpBackward, 1))].Buffer = -1
	}, "writes no gradients"},
	{"a micro-batch's gradient never accumulated", func(t *testing.T, p *Plan) {
		deleteOp(p, nth(t, p, 0, kindIn(OpAccumulate, 1)))
	}, "a gradient is dropped"},
	{"a micro-batch's gradient accumulated twice", func(t *testing.T, p *Plan) {
		i := nth(t, p, 0, kindIn(OpAccumulate, 1))
		p.Ops = append(p.Ops[:i+1], p.Ops[i:]...)
	}, "a second time"},
	{"an optimizer step left out", func(t *testing.T, p *Plan) {
		deleteOp(p, nth(t, p, 0, kindIn(OpOptimizer, 1)))
	}, "takes 0 optimizer steps"},
	{"a divide by zero", func(t *testing.T, p *Plan) {
		// GPT-2's reduce-scatters average; an explicit divide is forged.
		i := nth(t, p, 0, kindIn(OpReduceScatter, 1))
		o := p.Ops[i]
		p.Ops = append(p.Ops[:i+1], p.Ops[i:]...)
		p.Ops[i+1] = Op{Kind: OpDivide, Stream: o.Stream, Phase: o.Phase, Micro: o.Micro, Group: 1, Module: -1,
			Buffer: o.Buffer, Source: -1, Event: -1, DType: o.DType, Factor: 0}
	}, "divides by 0"},
	{"a policy pre-divide the program never applies", func(t *testing.T, p *Plan) {
		// Found by a bit-flip sweep of t5-base: Verify called it safe,
		// and the run's gradients differed from the reference by 0.2%.
		p.Groups[1].Policy.PreDivide = 1.001953125
	}, "its policy divides by 1.001953125 and 1"},
	{"a group's original dtype unlike its trainable parameters'", func(t *testing.T, p *Plan) {
		// Found by a bit-flip sweep of t5-base: Verify called it safe,
		// the executor refused it.
		p.Groups[1].Policy.Orig = ir.BF16
	}, "but the group's original dtype is bf16"},
	{"a wait that names a buffer", func(t *testing.T, p *Plan) {
		p.Ops[nth(t, p, 0, func(o *Op) bool { return o.Kind == OpWait })].Buffer = 0
	}, "which a wait does not use"},
	{"a prediction for fewer groups", func(t *testing.T, p *Plan) {
		p.Prediction.ExposedByGroup = p.Prediction.ExposedByGroup[:1]
	}, "over 1 groups"},
	// The cost model would panic on these (NewModel): Verify holds the
	// profile to hardware.ProfileKeys, names and ranges.
	{"a profile constant the cost model does not know", func(t *testing.T, p *Plan) {
		p.Cluster.Profile = []ir.ProfileValue{{Name: "warp_efficiency", Value: 0.5}}
	}, `("warp_efficiency" = 0.5) is unknown`},
	{"an overlap of 100%", func(t *testing.T, p *Plan) {
		p.Cluster.Profile = []ir.ProfileValue{{Name: "overlap", Value: 1}}
	}, `("overlap" = 1) is unknown, out of order or outside its range`},
}

// TestForgedPlans: each forgery is refused by Verify with a reason, and
// the unforged plan is not.
func TestForgedPlans(t *testing.T) {
	base := zooByName(t, "gpt2-124m")
	if err := Verify(base); err != nil {
		t.Fatalf("the unforged plan: %v", err)
	}
	for _, f := range forgeries {
		t.Run(f.name, func(t *testing.T) {
			p := base.Clone()
			f.forge(t, p)
			err := Verify(p)
			if err == nil || !strings.Contains(err.Error(), f.reason) {
				t.Errorf("Verify = %v, want an error containing %q", err, f.reason)
			}
		})
	}
}

// TestForgedAllReduce: HSDP's all-reduce must reduce as the group's policy
// says (llama3.1-405b is the zoo's HSDP plan).
func TestForgedAllReduce(t *testing.T) {
	p := zooByName(t, "llama3.1-405b").Clone()
	i := nth(t, p, 0, func(o *Op) bool { return o.Kind == OpAllReduce })
	p.Ops[i].Reduce = ReduceSum
	if p.Groups[p.Ops[i].Group].Policy.AllReduceOp == ReduceSum {
		t.Fatal("the policy already sums")
	}
	if err := Verify(p); err == nil || !strings.Contains(err.Error(), "reduces with sum; the group's policy says") {
		t.Errorf("Verify = %v", err)
	}
}
