package main

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// opJSONWant is operation o of plan p as encoding/json writes it in show
// -json: the element of the plan's MarshalJSON (o alone in its ops),
// indented at depth 2.
func opJSONWant(t testing.TB, p *schedule.Plan, o *schedule.Op) ([]byte, error) {
	t.Helper()
	q := *p
	q.Ops = []schedule.Op{*o}
	b, err := q.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var doc struct {
		Ops []json.RawMessage `json:"ops"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Ops) != 1 {
		t.Fatalf("the plan's JSON %s: %d ops, %v", b, len(doc.Ops), err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc.Ops[0], "      ", "  "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), nil
}

func checkOpJSON(t testing.TB, p *schedule.Plan, o *schedule.Op) {
	t.Helper()
	want, wantErr := opJSONWant(t, p, o)
	got, err := appendOpJSON(nil, p, o)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%+v: error %v, want %v", o, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%+v:\n%s\nwant\n%s", o, got, want)
	}
}

// TestOpJSONMatchesEncodingJSON: show -json's hand-written operations are
// encoding/json's bytes for every operation of every zoo plan, and for
// operations at the edges: every enum value a byte holds, floats in and
// out of exponent form, negative and extreme integers, NaN and ±Inf
// (encoding/json's error).
func TestOpJSONMatchesEncodingJSON(t *testing.T) {
	for _, name := range []string{"gpt2-124m", "llama3-8b", "mixtral-8x7b", "t5-base", "vit-b16", "llama3-8b-lora"} {
		p, err := loadPlan(name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Ops {
			checkOpJSON(t, p, &p.Ops[i])
		}
	}
	none := &schedule.Plan{}
	for v := range 256 {
		b := uint8(v)
		checkOpJSON(t, none, &schedule.Op{Kind: schedule.OpKind(b), Stream: schedule.Stream(b), Phase: schedule.Phase(b),
			PG: schedule.ProcessGroup(b), DType: ir.DType(b), Reduce: schedule.ReduceOp(b)})
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 1e20, 1e21, 1.2345e21, -3e-9,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789.125, 1.0 / 3, math.NaN(), math.Inf(1), math.Inf(-1)} {
		checkOpJSON(t, none, &schedule.Op{Factor: f, FLOPs: -f, AttnFLOPs: f / 7})
	}
	lists := &schedule.Plan{}
	o := schedule.Op{Micro: -1, Group: math.MaxInt32, Module: math.MinInt32, Bytes: math.MinInt64, ElemBytes: math.MaxInt64}
	lists.SetOpGEMMs(&o, []ir.GEMM{{M: 1, N: -2, K: 3, Count: 4}, {}})
	lists.SetOpUses(&o, []int32{0, -1, math.MaxInt32})
	checkOpJSON(t, lists, &o)
}

// FuzzOpJSON: any operation, written by hand, is encoding/json's bytes.
func FuzzOpJSON(f *testing.F) {
	f.Add(uint8(9), uint8(0), int64(2), int64(-1), 1.5, 1e-7, 3e21, int64(5), uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, kind, dtype uint8, micro, buffer int64, factor, flops, attn float64, bytes int64, gemms, uses uint8) {
		o := schedule.Op{Kind: schedule.OpKind(kind), Stream: schedule.Stream(kind >> 3), Phase: schedule.Phase(dtype >> 4),
			PG: schedule.ProcessGroup(kind * 7), DType: ir.DType(dtype), Reduce: schedule.ReduceOp(dtype * 3),
			Micro: int32(micro), Group: int32(-micro), Module: int32(buffer >> 7), Buffer: int32(buffer), Source: int32(micro ^ buffer),
			Event: int32(bytes >> 3), PGSize: int32(bytes), Factor: factor, Bytes: bytes, FLOPs: flops, AttnFLOPs: attn, ElemBytes: -bytes}
		var gs []ir.GEMM
		for i := range int(gemms % 5) {
			gs = append(gs, ir.GEMM{M: micro + int64(i), N: buffer, K: bytes >> i, Count: int64(i)})
		}
		var us []int32
		for i := range int(uses % 6) {
			us = append(us, int32(micro)*int32(i)-int32(buffer))
		}
		p := &schedule.Plan{}
		p.SetOpGEMMs(&o, gs)
		p.SetOpUses(&o, us)
		checkOpJSON(t, p, &o)
	})
}
