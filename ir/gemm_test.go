package ir

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func gemmFLOPs(gs []GEMM) float64 {
	s := 0.0
	for _, g := range gs {
		s += g.FLOPs()
	}
	return s
}

// TestGEMMShapes: a decoder layer's GEMM shapes hold every matmul FLOP
// outside the attention core, in forward and in backward, with the
// backward shapes the transposes autograd runs; full checkpointing adds
// the forward's shapes to backward.
func TestGEMMShapes(t *testing.T) {
	const body = `
[[module]]
name = "layers"
repeat = 2
[[module.module]]
name = "attention"
kind = "attention"
dim = 64
heads = 4
kv_heads = 2
[[module.module]]
name = "feed_forward"
kind = "mlp"
dim = 64
hidden = 160
activation = "swiglu"
`
	none := mustLoad(t, body)
	full, err := Load("full.toml", []byte(strings.Replace(header, "seq_len = 8", "seq_len = 8\ncheckpointing = \"full\"", 1)+body))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m         *Model
		recompute bool
	}{{none, false}, {full, true}} {
		for _, name := range []string{"layers.0.attention", "layers.1.feed_forward"} {
			c := tc.m.Modules[mustID(t, tc.m, name)].Cost
			if got, want := gemmFLOPs(c.GEMMsFwd), c.FlopsFwd-c.AttnFlopsFwd; math.Abs(got-want) > 1e-9*want {
				t.Errorf("%s: forward GEMM shapes hold %g FLOPs, want %g", name, got, want)
			}
			if got, want := gemmFLOPs(c.GEMMsBwd), c.FlopsBwd-c.AttnFlopsBwd; math.Abs(got-want) > 1e-9*want {
				t.Errorf("%s (recompute %t): backward GEMM shapes hold %g FLOPs, want %g", name, tc.recompute, got, want)
			}
		}
	}
	// 16 tokens; w1 and w3 are 64 -> 160, w2 160 -> 64: forward (16, 160,
	// 64) twice and (16, 64, 160); backward their input gradients (16, 64,
	// 160) ×2 and (16, 160, 64), and weight gradients (64, 160, 16) ×2 and
	// (160, 64, 16).
	ff := none.Modules[mustID(t, none, "layers.0.feed_forward")].Cost
	if want := []GEMM{{16, 64, 160, 1}, {16, 160, 64, 2}}; !reflect.DeepEqual(ff.GEMMsFwd, want) {
		t.Errorf("forward shapes %v, want %v", ff.GEMMsFwd, want)
	}
	if want := []GEMM{{16, 64, 160, 2}, {16, 160, 64, 1}, {64, 160, 16, 2}, {160, 64, 16, 1}}; !reflect.DeepEqual(ff.GEMMsBwd, want) {
		t.Errorf("backward shapes %v, want %v", ff.GEMMsBwd, want)
	}
	// Containers do not carry shapes.
	if c := none.Modules[mustID(t, none, "layers.0")].Cost; c.GEMMsFwd != nil || c.GEMMsBwd != nil {
		t.Errorf("a container carries GEMM shapes: %v %v", c.GEMMsFwd, c.GEMMsBwd)
	}
}

func TestMergeGEMMs(t *testing.T) {
	got := MergeGEMMs([]GEMM{{8, 2, 3, 1}, {1, 2, 3, 2}}, nil, []GEMM{{1, 2, 3, 1}, {1, 1, 9, 1}})
	want := []GEMM{{1, 1, 9, 1}, {1, 2, 3, 3}, {8, 2, 3, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergeGEMMs = %v, want %v", got, want)
	}
	if MergeGEMMs(nil, nil) != nil {
		t.Error("merging nothing gives a list")
	}
}
