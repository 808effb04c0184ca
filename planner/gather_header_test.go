package planner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// A group whose parameters gather in different dtypes gathers bytes (R42):
// the text header's all-gather size is W rows of ShardBytes, the size the
// ops carry, not ShardNumel elements of the param dtype.
func TestGatherHeaderOfByteGroup(t *testing.T) {
	m := tinyModel(t, "world_size = 2", `units = ["blk"]`, `
[[module]]
name = "blk"
[[module.module]]
name = "base"
requires_grad = false
dtype = "bf16"
[[module.module.param]]
name = "w"
shape = [64, 16]
[[module.module]]
name = "adapter"
[[module.module.param]]
name = "a"
shape = [64, 4]
`)
	p := mustPlan(t, m)
	g := group(t, p, "blk")
	if g.ShardBytes == g.ShardNumel*g.Policy.Param.Size() {
		t.Fatalf("the test model must gather bytes: ShardBytes %d, ShardNumel %d", g.ShardBytes, g.ShardNumel)
	}
	var ag int64
	for _, op := range p.Ops {
		if op.Kind == schedule.OpAllGather && p.Groups[op.Group].Name == "blk" {
			ag = op.Bytes
			break
		}
	}
	var text bytes.Buffer
	if err := schedule.WriteText(&text, p); err != nil {
		t.Fatal(err)
	}
	want := "all-gather " + ir.FormatBytes(ag) + ";"
	if ag == 0 || !strings.Contains(text.String(), want) {
		t.Errorf("header lacks %q (the all-gather op's size)", want)
	}
}
