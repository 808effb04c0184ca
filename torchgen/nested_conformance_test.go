package torchgen

import "testing"

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

// TestNestedUnitsConformance runs the nested-unit cases under real FSDP2:
// the order of every group's unshards, prefetches, copy-outs and reshards
// must be the plan's.
func TestNestedUnitsConformance(t *testing.T) {
	py := needTorch(t)
	var runs []confRun
	for _, c := range nestedCases {
		r, err := decoderRun(c)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		runs = append(runs, r)
	}
	runConformance(t, py, runs)
}

// The nested cases plan and build without torch, so a change that breaks
// one fails go test -short, not only the conformance run.
func TestNestedCasesPlan(t *testing.T) {
	for _, c := range nestedCases {
		if _, err := decoderRun(c); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
