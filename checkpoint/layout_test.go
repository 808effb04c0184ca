package checkpoint

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
)

// The state dict holds every parameter and, for trainable ones, the
// optimizer's states, named as DCP flattens {"model": …, "optim": …}.
func TestStateNames(t *testing.T) {
	tests := []struct {
		optimizer, extra string
		want             []string // the FQNs for embed.weight and norm.weight
		stateType        ir.DType
	}{
		{"adamw", "", []string{"model.embed.weight", "model.norm.weight", "optim.state.embed.weight.step",
			"optim.state.embed.weight.exp_avg", "optim.state.embed.weight.exp_avg_sq", "optim.state.norm.weight.step",
			"optim.state.norm.weight.exp_avg", "optim.state.norm.weight.exp_avg_sq"}, ir.FP32},
		{"adamw", "requires_grad = false", []string{"model.embed.weight", "model.norm.weight", "optim.state.embed.weight.step",
			"optim.state.embed.weight.exp_avg", "optim.state.embed.weight.exp_avg_sq"}, ir.FP32},
		{"sgd", "", []string{"model.embed.weight", "model.norm.weight"}, 0},
		{"sgd_momentum", "", []string{"model.embed.weight", "model.norm.weight", "optim.state.embed.weight.momentum_buffer",
			"optim.state.norm.weight.momentum_buffer"}, ir.FP32},
	}
	for _, tc := range tests {
		t.Run(tc.optimizer+" "+tc.extra, func(t *testing.T) {
			l, err := FromPlan(tinyPlan(t, 4, "", tc.optimizer, tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range l.Tensors {
				if x.Param == "embed.weight" || x.Param == "norm.weight" {
					got = append(got, x.FQN)
					if x.State != "" && x.State != "step" && x.DType != tc.stateType {
						t.Errorf("%s: dtype %s, want %s", x.FQN, x.DType, tc.stateType)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("tensors\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// A custom optimizer_state_bytes that names no dtype is kept as one opaque
// uint8 state with the bytes as a trailing dimension.
func TestOpaqueState(t *testing.T) {
	p := tinyPlan(t, 4, "", "adamw", "")
	p.Train.OptimizerStateBytes = 12
	l, err := FromPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	x := l.Tensors[tensorNamed(t, l, "optim.state.embed.weight.state")]
	if !slices.Equal(x.Shape, []int64{10, 6, 12}) || x.DType != ir.UINT8 || x.ShardDim != 0 {
		t.Errorf("opaque state: shape %v dtype %s dim %d", x.Shape, x.DType, x.ShardDim)
	}
	p.Train.Optimizer = "rmsprop"
	if _, err := FromPlan(p); err == nil {
		t.Error("an unknown optimizer was accepted")
	}
}

// Rank k of a shard group of W holds rows [k·c, min((k+1)·c, d)), c =
// ceil(d/W): the chunks tile every tensor exactly, in rank order, and a
// rank past the rows holds none.
func TestChunksTile(t *testing.T) {
	for _, tc := range []struct {
		world int
		mesh  string
	}{{1, ""}, {3, ""}, {4, ""}, {8, ""}, {12, ""}, {8, "2x4"}, {12, "3x4"}} {
		t.Run(fmt.Sprintf("%d%s", tc.world, tc.mesh), func(t *testing.T) {
			l := tinyLayout(t, tc.world, tc.mesh)
			for _, x := range l.Tensors {
				if x.ShardDim < 0 {
					if c := x.Chunk(0); c.Numel() != 1 || len(c.Offsets) != 0 {
						t.Errorf("%s: a step count is one 0-d chunk, got %+v", x.FQN, c)
					}
					continue
				}
				d := x.Shape[x.ShardDim]
				c := (d + int64(l.Shard) - 1) / int64(l.Shard)
				var next, total int64
				for k := range l.Shard {
					ch := x.Chunk(k)
					wantLen := max(0, min(c, d-int64(k)*c))
					if ch.Lengths[x.ShardDim] != wantLen || wantLen > 0 && ch.Offsets[x.ShardDim] != next {
						t.Errorf("%s chunk %d: offset %d length %d, want %d rows at %d", x.FQN, k, ch.Offsets[x.ShardDim], ch.Lengths[x.ShardDim], wantLen, next)
					}
					next += ch.Lengths[x.ShardDim]
					total += ch.Numel()
				}
				if total != x.Numel() {
					t.Errorf("%s: chunks hold %d of %d elements", x.FQN, total, x.Numel())
				}
			}
		})
	}
}

// Over 12 ranks the 10-row embedding leaves ranks 10 and 11 empty: they
// write nothing of it.
func TestEmptyChunks(t *testing.T) {
	l := tinyLayout(t, 12, "")
	e := tensorNamed(t, l, "model.embed.weight")
	for k, w := range l.Writer[e] {
		if want := k; k >= 10 {
			want = -1
			if w != want {
				t.Errorf("chunk %d: writer %d, want none", k, w)
			}
		} else if w != want {
			t.Errorf("chunk %d: writer %d, want %d", k, w, want)
		}
	}
}

// A tied parameter is an entry under each name (nn.Module.state_dict keeps
// both), written like its owner; its optimizer state is kept once.
func TestTiedEntries(t *testing.T) {
	src, file, _ := plans.Source("gpt2-124m")
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := FromPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	owner, alias := tensorNamed(t, l, "model.transformer.wte.weight"), tensorNamed(t, l, "model.lm_head.weight")
	if a := l.Tensors[alias]; a.Param != "transformer.wte.weight" || !slices.Equal(a.Shape, l.Tensors[owner].Shape) || alias < owner {
		t.Errorf("alias entry %+v", a)
	}
	for _, x := range l.Tensors {
		if x.State != "" && strings.Contains(x.FQN, "lm_head") {
			t.Errorf("optimizer state under the alias: %s", x.FQN)
		}
	}
	// Both names are written, each chunk once.
	for _, ti := range []int{owner, alias} {
		for k, w := range l.Writer[ti] {
			if w != k {
				t.Errorf("%s chunk %d written by %d", l.Tensors[ti].FQN, k, w)
			}
		}
	}
}
