package torchgen

import (
	"fmt"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
)

// Units nested in block units, the layout torchtitan and importers bring
// in (attention and feed-forward units inside each block unit): the block
// and its feed_forward unit end at the same module. FSDP2 hooks each
// unit's pre-backward on the tensors its forward returns. A block that
// returns h + feed_forward(h) (output = "own", torchtitan's and Hugging
// Face's blocks) has its hook reached first, so it copies out and then
// prefetches feed_forward; a block returning feed_forward's tensor itself
// (output = "child") shares it, and the inner unit's hook, registered
// first, fires first (docs/semantics.md R26, R28).
const nestedUnits = `units = ["layers.*", "layers.*.attention", "layers.*.feed_forward"]`

var nestedCases = []confCase{
	{name: "nested-own", cluster: "world_size = 2", policy: nestedUnits, block: `output = "own"`},
	{name: "nested-child", cluster: "world_size = 2", policy: nestedUnits, block: `output = "child"`},
	{name: "nested-own-ws1", cluster: "world_size = 1", policy: nestedUnits, block: `output = "own"`},
	{name: "nested-own-prefetch", cluster: "world_size = 3", policy: nestedUnits + "\nprefetch_forward = 1\nprefetch_backward = 2", block: `output = "own"`},
	{name: "nested-child-prefetch", cluster: "world_size = 3", policy: nestedUnits + "\nprefetch_forward = 1\nprefetch_backward = 2", block: `output = "child"`},
	{name: "nested-own-reshard-false-accum", train: "grad_accum = 2", cluster: "world_size = 2", policy: nestedUnits + "\nreshard_after_forward = false", block: `output = "own"`},
}

// torchtitan's MoE layout: the MoE (router, grouped experts, a shared
// expert) a unit inside each block unit, and the block's last module.
const moeModel = `
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = %d
[policy]
units = ["layers.*", "layers.*.moe"]
[[module]]
name = "tok_embeddings"
kind = "embedding"
num = 37
dim = 8
[[module]]
name = "layers"
repeat = 2
block = "moe_block"
[[module]]
name = "norm"
kind = "norm"
dim = 8
[[module]]
name = "output"
kind = "linear"
in = 8
out = 37
[block.moe_block]
%s
register = ["attention", "moe", "attention_norm", "ffn_norm"]
[[block.moe_block.module]]
name = "attention_norm"
kind = "norm"
dim = 8
[[block.moe_block.module]]
name = "attention"
kind = "attention"
dim = 8
heads = 2
[[block.moe_block.module]]
name = "ffn_norm"
kind = "norm"
dim = 8
[[block.moe_block.module]]
name = "moe"
kind = "moe"
dim = 8
hidden = 12
experts = 3
top_k = 2
grouped = true
shared_experts = 1
`

var moeCases = []struct {
	name   string
	world  int
	output string
}{
	{"moe-own", 2, `output = "own"`},
	{"moe-child", 2, `output = "child"`},
	{"moe-own-ws4", 4, `output = "own"`},
}

func moeRun(name string, world int, output string) (confRun, error) {
	m, err := ir.Load(name+".toml", []byte(fmt.Sprintf(moeModel, world, output)))
	if err != nil {
		return confRun{}, err
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		return confRun{}, err
	}
	s, err := Build(m, p)
	return confRun{name: "moe/" + name, plan: p, spec: s}, err
}

// nestedRuns plans every nested-unit case.
func nestedRuns() ([]confRun, error) {
	var runs []confRun
	for _, c := range nestedCases {
		r, err := decoderRun(c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		runs = append(runs, r)
	}
	for _, c := range moeCases {
		r, err := moeRun(c.name, c.world, c.output)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// TestNestedUnitsConformance runs the nested-unit cases under real FSDP2:
// the order of every group's unshards, prefetches, copy-outs and reshards
// must be the plan's.
func TestNestedUnitsConformance(t *testing.T) {
	py := needTorch(t)
	runs, err := nestedRuns()
	if err != nil {
		t.Fatal(err)
	}
	runConformance(t, py, runs)
}

// The nested cases plan and build without torch, so a change that breaks
// one fails go test -short, not only the conformance run.
func TestNestedCasesPlan(t *testing.T) {
	runs, err := nestedRuns()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if len(r.plan.Groups) < 5 { // the root, two blocks and a unit inside each
			t.Errorf("%s: %d groups", r.name, len(r.plan.Groups))
		}
	}
}
