package executor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/internal/unproven"
	"github.com/fsdpc/fsdpc/schedule"
)

// Schedules broken the way planner/mutation_test.go breaks them must fail
// at run time, loudly: a hazard, a poisoned read, a numeric mismatch or a
// detected deadlock, never a pass. Each class runs twice: with every check,
// and with the data checks alone (DataOnly: no happens-before or issue-time
// checks), to show what the numbers by themselves catch.

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

func removeOp(p *schedule.Plan, i int) { p.Ops = append(p.Ops[:i], p.Ops[i+1:]...) }

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

type mutation struct {
	name   string
	hsdp   bool
	mutate func(t *testing.T, p *schedule.Plan)
	// dataCatches: the data checks alone (no happens-before or issue-time
	// checks) catch it whatever the timing. Races that may or may not
	// corrupt data in a given run are caught deterministically only by the
	// hazard check.
	dataCatches bool
}

var mutations = []mutation{
	{name: "removed wait: compute no longer waits for an all-gather", mutate: func(t *testing.T, p *schedule.Plan) {
		co := find(p, 2, isKind(schedule.OpCopyOut, schedule.StreamCompute))
		w := co - 1
		for ; p.Ops[w].Kind != schedule.OpWait; w-- {
		}
		removeOp(p, w)
	}},
	{name: "free moved earlier: unsharded parameters freed before forward", dataCatches: true, mutate: func(t *testing.T, p *schedule.Plan) {
		fwd := find(p, 3, isKind(schedule.OpForward, schedule.StreamCompute))
		src := p.Ops[fwd].Source
		fr := find(p, 0, func(o *schedule.Op) bool { return o.Kind == schedule.OpFree && o.Buffer == src })
		moveOp(p, fr, fwd)
	}},
	{name: "swapped collectives: two groups' all-gathers exchanged", dataCatches: true, mutate: func(t *testing.T, p *schedule.Plan) {
		a := find(p, 2, isKind(schedule.OpAllGather, schedule.StreamAllGather))
		b := find(p, 3, isKind(schedule.OpAllGather, schedule.StreamAllGather))
		p.Ops[a], p.Ops[b] = p.Ops[b], p.Ops[a]
	}},
	{name: "missing reduce: a reduce-scatter dropped", dataCatches: true, mutate: func(t *testing.T, p *schedule.Plan) {
		removeOp(p, find(p, 1, isKind(schedule.OpReduceScatter, schedule.StreamReduceScatter)))
	}},
	{name: "wrong process group: an all-gather over too few ranks", dataCatches: true, mutate: func(t *testing.T, p *schedule.Plan) {
		p.Ops[find(p, 1, isKind(schedule.OpAllGather, schedule.StreamAllGather))].PGSize = int32(p.Cluster.Shard / 2)
	}},
	{name: "wrong process group: HSDP all-reduce over the shard group", hsdp: true, dataCatches: true, mutate: func(t *testing.T, p *schedule.Plan) {
		i := find(p, 5, isKind(schedule.OpAllReduce, schedule.StreamAllReduce))
		p.Ops[i].PG, p.Ops[i].PGSize = schedule.PGShard, int32(p.Cluster.Shard)
	}},
	{name: "event recorded on the wrong stream: all-gather done marked on copy-in", mutate: func(t *testing.T, p *schedule.Plan) {
		ag := find(p, 2, isKind(schedule.OpAllGather, schedule.StreamAllGather))
		if p.Ops[ag+1].Kind != schedule.OpRecord {
			t.Fatalf("op after the all-gather is %s", p.Ops[ag+1].Kind)
		}
		p.Ops[ag+1].Stream = schedule.StreamCopyIn
	}},
	{name: "buffer reused too soon: reduce-scatter input freed without waiting", mutate: func(t *testing.T, p *schedule.Plan) {
		rs := find(p, 2, isKind(schedule.OpReduceScatter, schedule.StreamReduceScatter))
		in := p.Ops[rs].Source
		fr := find(p, 0, func(o *schedule.Op) bool { return o.Kind == schedule.OpFree && o.Buffer == in })
		if p.Ops[fr-1].Kind != schedule.OpWait {
			t.Fatalf("the free of the reduce-scatter input follows %s", p.Ops[fr-1].Kind)
		}
		removeOp(p, fr-1)
	}},
	{name: "doubled all-gather: a group gathered twice", mutate: func(t *testing.T, p *schedule.Plan) {
		ag := find(p, 2, isKind(schedule.OpAllGather, schedule.StreamAllGather))
		p.Ops = append(p.Ops[:ag+1], append([]schedule.Op{p.Ops[ag]}, p.Ops[ag+1:]...)...)
	}},
	{name: "cross-stream free: HSDP all-reduce buffer freed on another stream", hsdp: true, mutate: func(t *testing.T, p *schedule.Plan) {
		fr := find(p, 0, func(o *schedule.Op) bool {
			return o.Kind == schedule.OpFree && p.Buffers[o.Buffer].Kind == schedule.BufReduceScatterOut
		})
		p.Ops[fr].Stream = schedule.StreamAllReduce
	}},
	{name: "missing record: a wait whose event is never recorded", dataCatches: true, mutate: func(t *testing.T, p *schedule.Plan) {
		ag := find(p, 1, isKind(schedule.OpAllGather, schedule.StreamAllGather))
		if p.Ops[ag+1].Kind != schedule.OpRecord {
			t.Fatalf("op after the all-gather is %s", p.Ops[ag+1].Kind)
		}
		removeOp(p, ag+1)
	}},
}

func mutationBases(t *testing.T) (fsdp, hsdpPlan *schedule.Plan) {
	// The planner's own mutation base, as compiled (8 ranks, 13 groups,
	// two micro-batches), and the 405B model's HSDP on a 2 × 2 mesh.
	fsdp = zooPlan(t, "gpt2-124m")
	hsdpPlan = zooPlan(t, "llama3.1-405b", join(hsdp(2, 2), []edit{layers(2)})...)
	return
}

func TestMutationsFailAtRunTime(t *testing.T) {
	fsdp, hsdpPlan := mutationBases(t)
	for _, base := range []*schedule.Plan{fsdp, hsdpPlan} {
		if _, err := Run(base, NewHost(), Options{Scale: mutationScale, Timeout: 20 * time.Second}); err != nil {
			t.Fatalf("the unmutated %s plan fails: %v", base.Header.Model, err)
		}
	}
	for _, m := range mutations {
		for _, dataOnly := range []bool{false, true} {
			name := m.name
			if dataOnly {
				name += "/data only"
			}
			t.Run(name, func(t *testing.T) {
				if dataOnly && raceEnabled {
					// With the hazard checks off, a racy schedule really
					// races in Go memory, which is the point of the run;
					// the race detector would report the bug being tested.
					t.Skip("data-only runs of a racy schedule are skipped under -race")
				}
				base := fsdp
				if m.hsdp {
					base = hsdpPlan
				}
				p := base.Clone()
				m.mutate(t, p)
				start := time.Now()
				_, err := Run(p, NewHost(), Options{Scale: mutationScale, Timeout: 400 * time.Millisecond, DataOnly: dataOnly, Unproven: &unproven.Permit{}})
				var fe *FailureError
				if err == nil {
					if dataOnly && !m.dataCatches {
						t.Logf("the data checks alone did not catch it this time (a race that did not corrupt data, or an idempotent repeat); the hazard check does")
						return
					}
					t.Fatalf("the mutation ran to the end and passed")
				}
				if !errors.As(err, &fe) {
					t.Fatalf("the run did not start: %v", err)
				}
				var kinds []string
				for _, k := range fe.Kinds() {
					kinds = append(kinds, k.String())
				}
				t.Logf("caught in %v by %s: %.400s", time.Since(start).Round(time.Millisecond), strings.Join(kinds, ", "),
					strings.ReplaceAll(fe.Failures[0].String(), "\n", " "))
				for _, f := range fe.Failures {
					if f.Kind == Internal {
						t.Errorf("internal error: %v", f)
					}
				}
			})
		}
	}
}

const mutationScale = 256
