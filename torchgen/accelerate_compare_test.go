package torchgen

import (
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// accelModel is a small decoder whose plan has layer units, a final norm
// unit kept unsharded after forward, an output unit, bf16 mixed precision
// and a root holding the embedding; each layer's attention is an
// activation-checkpoint region.
const accelModel = `
[model]
dtype = "fp32"
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = 2
[policy]
units = ["layers.*", "norm", "output"]
param_dtype = "bf16"
reduce_dtype = "bf16"
[[policy.override]]
match = "norm"
reshard_after_forward = false
[[module]]
name = "emb"
kind = "embedding"
num = 33
dim = 8
[[module]]
name = "layers"
repeat = 2
block = "decoder"
[[module]]
name = "norm"
kind = "norm"
dim = 8
[[module]]
name = "output"
kind = "linear"
in = 8
out = 33
[block.decoder]
[[block.decoder.module]]
name = "attention"
checkpoint = true
kind = "attention"
dim = 8
heads = 2
[[block.decoder.module]]
name = "feed_forward"
kind = "mlp"
dim = 8
hidden = 16
`

// accelRecordOf is the record of a run that did exactly what plan p says,
// built from the plan: what CompareAccelerate must accept.
func accelRecordOf(t *testing.T, p *schedule.Plan) AccelerateRecord {
	t.Helper()
	var rec AccelerateRecord
	for _, g := range p.Groups {
		st := FSDPState{Modules: g.Modules, Offload: g.Policy.Offload, ParamDType: accelDType(g.Policy.Param), ReduceDType: accelDType(g.Policy.Reduce)}
		if g.Policy.Output != ir.DTypeInvalid {
			st.OutputDType = accelDType(g.Policy.Output)
		}
		switch g.Policy.Reshard {
		case schedule.ReshardTrue:
			st.Reshard = true
		case schedule.ReshardFalse:
			st.Reshard = false
		default:
			st.Reshard = float64(g.Policy.ReshardTo)
		}
		var lay Layout
		lay.Modules = g.Modules
		for _, gp := range g.Params {
			entry := struct {
				FQN    string  `json:"fqn"`
				Padded []int64 `json:"padded"`
			}{gp.Name, []int64{gp.ShardNumel}}
			st.Params = append(st.Params, entry)
			lay.Params = append(lay.Params, entry)
		}
		rec.States = append(rec.States, st)
		rec.Layouts = append(rec.Layouts, lay)
	}
	// fully_shard bottom-up, the root last.
	for i := len(p.Groups) - 1; i >= 0; i-- {
		if !p.Groups[i].Root {
			rec.Calls = append(rec.Calls, FullyShardArg{Modules: p.Groups[i].Modules, Reshard: true})
		}
	}
	rec.Calls = append(rec.Calls, FullyShardArg{Modules: []string{""}, Reshard: "default"})
	for _, op := range p.Ops {
		if (op.Kind != schedule.OpAllGather && op.Kind != schedule.OpReduceScatter) || op.PGSize < 2 {
			continue
		}
		dt := op.DType
		if op.Kind == schedule.OpAllGather {
			dt = gatherDType(&p.Groups[op.Group])
		}
		n := op.Bytes / dt.Size()
		c := Collective{Phase: op.Phase.String(), DType: accelDType(dt), GroupSize: int(op.PGSize), Reduce: reduceName(op.Reduce)}
		if op.Kind == schedule.OpAllGather {
			c.Op, c.In, c.Out, c.Reduce = "all-gather", n/int64(op.PGSize), n, ""
		} else {
			c.Op, c.In, c.Out = "reduce-scatter", n, n/int64(op.PGSize)
		}
		rec.Collectives = append(rec.Collectives, c)
	}
	for _, e := range planOrder(p) {
		rec.Events = append(rec.Events, Event{Ev: e.ev, Group: e.group, Phase: e.phase, Micro: e.micro})
	}
	rec.Checkpointed = []string{"layers.0.attention", "layers.1.attention"}
	return rec
}

func accelDType(d ir.DType) string {
	return map[ir.DType]string{ir.FP32: "float32", ir.BF16: "bfloat16", ir.FP16: "float16"}[d]
}

func TestCompareAccelerate(t *testing.T) {
	m, err := ir.Load("accel.toml", []byte(accelModel))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	group := func(name string) int {
		for i, g := range p.Groups {
			if g.Label() == name {
				return i
			}
		}
		t.Fatalf("no group %s", name)
		return -1
	}
	cases := []struct {
		name   string
		change func(r *AccelerateRecord)
		want   string // "" : no mismatch
	}{
		{"as planned", func(r *AccelerateRecord) {}, ""},
		{"extra unit", func(r *AccelerateRecord) {
			r.States = append(r.States, FSDPState{Modules: []string{"layers.0.attention"}})
		}, "accelerate made a unit of [layers.0.attention] (0 parameters) that the plan does not have"},
		{"missing unit", func(r *AccelerateRecord) {
			r.States = r.States[1:]
		}, "is no unit under accelerate"},
		{"reshard", func(r *AccelerateRecord) {
			r.States[group("layers.1")].Reshard = false
		}, "unit layers.1: reshard_after_forward is false under accelerate, true in the plan"},
		{"reduce dtype", func(r *AccelerateRecord) {
			r.States[group("layers.0")].ReduceDType = "float32"
		}, "unit layers.0: reduce_dtype is fp32 under accelerate, bf16 in the plan"},
		{"offload", func(r *AccelerateRecord) {
			r.States[group("layers.0")].Offload = true
		}, "unit layers.0: CPU offload is true under accelerate, false in the plan"},
		{"parent first", func(r *AccelerateRecord) {
			r.Calls = append([]FullyShardArg{{Modules: []string{"layers"}}}, r.Calls...)
		}, "accelerate called fully_shard on [layers] before [layers.1], which it contains"},
		{"collective dtype", func(r *AccelerateRecord) {
			r.Collectives[0].DType = "float16"
		}, "rank 0 all-gather 1 (forward) of group"},
		{"shard size", func(r *AccelerateRecord) {
			r.Layouts[group("layers.0")].Params[0].Padded = []int64{1}
		}, "rank 0 group layers.0:"},
		{"not checkpointed", func(r *AccelerateRecord) {
			r.Checkpointed = r.Checkpointed[1:]
		}, "the model checkpoints [layers.0.attention], accelerate does not"},
		{"checkpointed", func(r *AccelerateRecord) {
			r.Checkpointed = append(r.Checkpointed, "norm")
		}, "accelerate checkpoints [norm], the model does not"},
		{"error", func(r *AccelerateRecord) {
			r.Error, r.Where = "ValueError: no", "fsdp_utils.py:3"
		}, "accelerate's run failed on rank 0 (fsdp_utils.py:3): ValueError: no"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := accelRecordOf(t, p)
			c.change(&rec)
			bad := CompareAccelerate(m, p, []AccelerateRecord{rec})
			if c.want == "" {
				if len(bad) > 0 {
					t.Fatalf("mismatches for a record of the plan itself:\n%s", strings.Join(bad, "\n"))
				}
				return
			}
			for _, b := range bad {
				if strings.Contains(b, c.want) {
					return
				}
			}
			t.Errorf("no mismatch says %q; got:\n%s", c.want, strings.Join(bad, "\n"))
		})
	}
}
