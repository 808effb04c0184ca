package torchgen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// recordOf is what FSDP2 would record if it did exactly what the plan says.
func recordOf(p *schedule.Plan) Record {
	var r Record
	for _, g := range p.Groups {
		l := Layout{Modules: g.Modules}
		for _, gp := range g.Params {
			l.Params = append(l.Params, struct {
				FQN    string  `json:"fqn"`
				Padded []int64 `json:"padded"`
			}{gp.Name, []int64{gp.ShardNumel}})
		}
		r.Layouts = append(r.Layouts, l)
	}
	names := map[schedule.OpKind]string{schedule.OpAllGather: "all-gather", schedule.OpReduceScatter: "reduce-scatter", schedule.OpAllReduce: "all-reduce"}
	for _, op := range p.Ops {
		if n, ok := names[op.Kind]; ok && op.PGSize > 1 {
			c := Collective{Op: n, DType: "uint8", Reduce: reduceName(op.Reduce), GroupSize: int(op.PGSize), In: op.Bytes, Out: op.Bytes}
			r.Collectives = append(r.Collectives, c)
		}
	}
	for _, e := range planOrder(p) {
		r.Events = append(r.Events, Event{Ev: e.ev, Group: e.group, Phase: e.phase, Micro: e.micro})
	}
	return r
}

func TestCompareNamesEveryMismatch(t *testing.T) {
	src := fmt.Sprintf(decoderModel, "", "world_size = 2", "", "", "")
	m, err := ir.Load("c.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bad := Compare(p, []Record{recordOf(p)}); len(bad) != 0 {
		t.Fatalf("an exact record mismatches: %v", bad)
	}
	cases := []struct {
		name  string
		spoil func(*Record)
		want  string
	}{
		{"param order", func(r *Record) {
			ps := r.Layouts[1].Params
			ps[0], ps[1] = ps[1], ps[0]
		}, "parameter 0 is"},
		{"shard size", func(r *Record) { r.Layouts[1].Params[0].Padded = []int64{1} }, "shard is 1 elements"},
		{"collective size", func(r *Record) { r.Collectives[0].Out++ }, "bytes"},
		{"reduce op", func(r *Record) {
			for i := range r.Collectives {
				if r.Collectives[i].Op == "reduce-scatter" {
					r.Collectives[i].Reduce = "premul_sum"
					return
				}
			}
		}, "reduce op premul_sum"},
		{"missing collective", func(r *Record) { r.Collectives = r.Collectives[1:] }, "issued"},
		{"no root group", func(r *Record) { r.Layouts[0].Params = nil }, "made no parameter group"},
		// The first backward copy-outs swapped, as when the pre-backward
		// hooks of two groups fire in the other order.
		{"event order", func(r *Record) {
			for i := range r.Events {
				if r.Events[i].Phase == "backward" && r.Events[i].Ev == "copy-out" {
					j := i + 1
					for r.Events[j].Ev != "copy-out" {
						j++
					}
					r.Events[i], r.Events[j] = r.Events[j], r.Events[i]
					return
				}
			}
		}, "FSDP2's is copy-out of"},
		{"missing event", func(r *Record) { r.Events = r.Events[:len(r.Events)-1] }, "FSDP2's group events end after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := recordOf(p)
			c.spoil(&r)
			bad := strings.Join(Compare(p, []Record{r}), "\n")
			if !strings.Contains(bad, c.want) {
				t.Errorf("want a mismatch mentioning %q, got:\n%s", c.want, bad)
			}
		})
	}
}
