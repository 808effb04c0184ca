package checkpoint

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// tinyModel is a model small enough to check chunk by chunk: an embedding
// of 10 rows (uneven over 3, 4, 8 and 12 ranks, empty shards over 12), a
// repeated block of two linears and a norm, and a head. Its cluster and
// train keys are filled in per test.
const tinyModel = `
[model]
name = "tiny"
dtype = "fp32"

[train]
seq_len = 8
optimizer = %q

[cluster]
gpu = { preset = "h100-sxm", hbm = "1000TiB" }
gpus_per_node = 4
world_size = %d
%s

[policy]
param_dtype = "bf16"
reduce_dtype = "fp32"

[[module]]
name = "embed"
kind = "embedding"
num = 10
dim = 6

[[module]]
name = "layers"
repeat = 2
block = "b"

[[module]]
name = "norm"
kind = "norm"
dim = 6
%s

[[module]]
name = "head"
kind = "linear"
in = 6
out = 13

[block.b]
[[block.b.module]]
name = "up"
kind = "linear"
in = 6
out = 16

[[block.b.module]]
name = "down"
kind = "linear"
in = 16
out = 6
`

// tinyPlan plans tinyModel on world ranks; mesh is "" or "R×S"; extra
// goes into the norm module (e.g. requires_grad = false).
func tinyPlan(t testing.TB, world int, mesh, optimizer, extra string) *schedule.Plan {
	t.Helper()
	m := ""
	if mesh != "" {
		var r, s int
		fmt.Sscanf(mesh, "%dx%d", &r, &s)
		m = fmt.Sprintf("mesh = { replicate = %d, shard = %d }", r, s)
	}
	if optimizer == "" {
		optimizer = "adamw"
	}
	src := fmt.Sprintf(tinyModel, optimizer, world, m, extra)
	model, err := ir.Load("tiny.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(model, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tinyLayout(t testing.TB, world int, mesh string) *Layout {
	t.Helper()
	l, err := FromPlan(tinyPlan(t, world, mesh, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func tensorNamed(t testing.TB, l *Layout, fqn string) int {
	t.Helper()
	for i := range l.Tensors {
		if l.Tensors[i].FQN == fqn {
			return i
		}
	}
	var names []string
	for i := range l.Tensors {
		names = append(names, l.Tensors[i].FQN)
	}
	t.Fatalf("no tensor %s in %s", fqn, strings.Join(names, ", "))
	return -1
}
