package planner

import (
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// Mutation tests: each class of injected bug must make schedule.Verify
// fail, naming what broke. The base plan is a real zoo plan (GPT-2: 14
// groups, mixed precision) and, for HSDP-specific classes, an HSDP plan.

func basePlan(t *testing.T, name string) *schedule.Plan {
	t.Helper()
	p, err := Plan(loadZoo(t, name), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := schedule.Verify(p); err != nil {
		t.Fatalf("the unmutated plan fails: %v", err)
	}
	return p
}

// find returns the index of the n-th op (0-based) matching pred.
func find(p *schedule.Plan, n int, pred func(o *schedule.Op) bool) int {
	for i := range p.Ops {
		if pred(&p.Ops[i]) {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

func removeOp(p *schedule.Plan, i int) {
	p.Ops = append(p.Ops[:i], p.Ops[i+1:]...)
}

func moveOp(p *schedule.Plan, from, to int) {
	o := p.Ops[from]
	removeOp(p, from)
	if to > from {
		to--
	}
	p.Ops = append(p.Ops[:to], append([]schedule.Op{o}, p.Ops[to:]...)...)
}

func isKind(k schedule.OpKind, st schedule.Stream) func(o *schedule.Op) bool {
	return func(o *schedule.Op) bool { return o.Kind == k && o.Stream == st }
}

func TestMutationsAreCaught(t *testing.T) {
	gpt := basePlan(t, "gpt2-124m")
	hsdp := basePlan(t, "llama3.1-405b")
	tests := []struct {
		name   string
		base   *schedule.Plan
		mutate func(t *testing.T, p *schedule.Plan)
		want   string
	}{
		{"removed wait: compute no longer waits for an all-gather", gpt, func(t *testing.T, p *schedule.Plan) {
			// The compute stream's wait before the 3rd copy-out.
			co := find(p, 2, isKind(schedule.OpCopyOut, schedule.StreamCompute))
			w := co - 1
			for ; p.Ops[w].Kind != schedule.OpWait; w-- {
			}
			removeOp(p, w)
		}, "without waiting for"},
		{"free moved earlier: unsharded parameters freed before forward", gpt, func(t *testing.T, p *schedule.Plan) {
			fwd := find(p, 3, isKind(schedule.OpForward, schedule.StreamCompute))
			src := p.Ops[fwd].Source
			fr := find(p, 0, func(o *schedule.Op) bool { return o.Kind == schedule.OpFree && o.Buffer == src })
			moveOp(p, fr, fwd)
		}, "while"},
		{"swapped collectives: two groups' all-gathers exchanged", gpt, func(t *testing.T, p *schedule.Plan) {
			a := find(p, 2, isKind(schedule.OpAllGather, schedule.StreamAllGather))
			b := find(p, 3, isKind(schedule.OpAllGather, schedule.StreamAllGather))
			p.Ops[a], p.Ops[b] = p.Ops[b], p.Ops[a]
		}, "buffer"},
		{"missing reduce: a reduce-scatter dropped", gpt, func(t *testing.T, p *schedule.Plan) {
			removeOp(p, find(p, 1, isKind(schedule.OpReduceScatter, schedule.StreamReduceScatter)))
		}, "reduce-scattered 0 times"},
		{"wrong process group: an all-gather over too few ranks", gpt, func(t *testing.T, p *schedule.Plan) {
			p.Ops[find(p, 1, isKind(schedule.OpAllGather, schedule.StreamAllGather))].PGSize = 4
		}, "the group's layout needs shard(8)"},
		{"wrong process group: HSDP all-reduce over the shard group", hsdp, func(t *testing.T, p *schedule.Plan) {
			i := find(p, 5, isKind(schedule.OpAllReduce, schedule.StreamAllReduce))
			p.Ops[i].PG, p.Ops[i].PGSize = schedule.PGShard, int32(p.Cluster.Shard)
		}, "HSDP all-reduces over replicate(2)"},
		{"event recorded on the wrong stream: all-gather done marked on copy-in", gpt, func(t *testing.T, p *schedule.Plan) {
			ag := find(p, 2, isKind(schedule.OpAllGather, schedule.StreamAllGather))
			rec := ag + 1
			if p.Ops[rec].Kind != schedule.OpRecord {
				t.Fatalf("op after the all-gather is %s", p.Ops[rec].Kind)
			}
			p.Ops[rec].Stream = schedule.StreamCopyIn
		}, "without waiting for"},
		{"buffer reused too soon: reduce-scatter input freed without waiting", gpt, func(t *testing.T, p *schedule.Plan) {
			rs := find(p, 2, isKind(schedule.OpReduceScatter, schedule.StreamReduceScatter))
			in := p.Ops[rs].Source
			fr := find(p, 0, func(o *schedule.Op) bool { return o.Kind == schedule.OpFree && o.Buffer == in })
			if p.Ops[fr-1].Kind != schedule.OpWait {
				t.Fatalf("the free of the reduce-scatter input follows %s", p.Ops[fr-1].Kind)
			}
			removeOp(p, fr-1)
		}, "freed by"},
		{"doubled all-gather: a group gathered twice", gpt, func(t *testing.T, p *schedule.Plan) {
			ag := find(p, 2, isKind(schedule.OpAllGather, schedule.StreamAllGather))
			p.Ops = append(p.Ops[:ag+1], append([]schedule.Op{p.Ops[ag]}, p.Ops[ag+1:]...)...)
		}, "again before"},
		{"cross-stream free: HSDP all-reduce buffer freed on another stream", hsdp, func(t *testing.T, p *schedule.Plan) {
			fr := find(p, 0, func(o *schedule.Op) bool {
				return o.Kind == schedule.OpFree && p.Buffers[o.Buffer].Kind == schedule.BufReduceScatterOut
			})
			p.Ops[fr].Stream = schedule.StreamAllReduce
		}, "belongs to the reduce-scatter pool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.base.Clone()
			tt.mutate(t, p)
			err := schedule.Verify(p)
			if err == nil {
				t.Fatal("the mutation was not caught")
			}
			t.Logf("%.300s", strings.ReplaceAll(err.Error(), "\n", " "))
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("caught, but the error does not say %q:\n%v", tt.want, err)
			}
		})
	}
}
