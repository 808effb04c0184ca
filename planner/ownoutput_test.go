package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// A block unit holding attention and feed-forward units ends at the same
// module as its feed_forward unit. Which pre-backward fires first depends
// on whether the block returns its own tensor (h + ffn(h)) or the inner
// unit's: FSDP2 registers each unit's hook on the tensors its forward
// returns (docs/semantics.md R26, R28). Checked against real FSDP2 by
// torchgen's TestNestedUnitsConformance.
func TestOwnOutputFiresEnclosingUnitFirst(t *testing.T) {
	const blocks = `
[[module]]
name = "emb"
kind = "embedding"
num = 16
dim = 8
[[module]]
name = "layers"
repeat = 2
block = "b"
[[module]]
name = "head"
kind = "linear"
in = 8
out = 16
[block.b]
%s
[[block.b.module]]
name = "attention_norm"
kind = "norm"
dim = 8
[[block.b.module]]
name = "attention"
kind = "attention"
dim = 8
heads = 2
[[block.b.module]]
name = "ffn_norm"
kind = "norm"
dim = 8
[[block.b.module]]
name = "ffn"
kind = "mlp"
dim = 8
hidden = 8
`
	units := `units = ["layers.*", "layers.*.attention", "layers.*.ffn"]`
	for _, c := range []struct {
		output string
		// The backward unshards and copy-outs of layers.1's units, in
		// order. The root's pre-backward prefetches the block (the last
		// post-forward before its own). With its own output the block
		// fires next: it copies out and prefetches ffn, whose hook
		// prefetches attention. Sharing ffn's tensor, ffn fires first,
		// gathers itself and prefetches attention, and the block's hook
		// finds its own prefetch to copy out.
		want string
	}{
		{`output = "own"`, "unshard layers.1, copy-out layers.1, unshard layers.1.ffn, copy-out layers.1.ffn, unshard layers.1.attention, copy-out layers.1.attention"},
		{`output = "child"`, "unshard layers.1, unshard layers.1.ffn, copy-out layers.1.ffn, unshard layers.1.attention, copy-out layers.1, copy-out layers.1.attention"},
		{``, "unshard layers.1, unshard layers.1.ffn, copy-out layers.1.ffn, unshard layers.1.attention, copy-out layers.1, copy-out layers.1.attention"},
	} {
		t.Run(strings.TrimPrefix(c.output+"default", `output = `), func(t *testing.T) {
			p := mustPlan(t, tinyModel(t, "world_size = 2", units, fmt.Sprintf(blocks, c.output)))
			var got []string
			for _, op := range p.Ops {
				if op.Phase != schedule.PhaseBackward || (op.Kind != schedule.OpCopyIn && op.Kind != schedule.OpCopyOut) {
					continue
				}
				g := p.Groups[op.Group].Name
				if g != "layers.1" && !strings.HasPrefix(g, "layers.1.") {
					continue
				}
				what := "unshard "
				if op.Kind == schedule.OpCopyOut {
					what = "copy-out "
				}
				got = append(got, what+g)
			}
			if s := strings.Join(got, ", "); s != c.want {
				t.Errorf("backward order of layers.1's units:\n got %s\nwant %s", s, c.want)
			}
		})
	}
}
