package planner

import (
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// TestAccumulateBeforeReshard: with unsharded accumulation in a wider
// reduce dtype, FSDP2's post_backward adds a micro-batch's gradients into
// the accumulator before it reshards (accumulate_unsharded_grad_if_needed
// comes first), so the unsharded parameters are still held at the add;
// the first micro-batch makes the accumulator after the reshard
// (to_accumulated_grad_if_needed). Once open discrepancy O14.
func TestAccumulateBeforeReshard(t *testing.T) {
	m := mustLoadText(t, "m.toml", "[train]\nseq_len = 4\ngrad_accum = 3\naccumulate = \"unsharded\"\n"+
		"[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n[policy]\nparam_dtype = \"bf16\"\nreduce_dtype = \"fp32\"\n"+
		"[[module]]\nname = \"layers\"\nrepeat = 2\nkind = \"linear\"\nin = 8\nout = 8\n")
	p, err := Plan(m, Options{CheckEveryPass: true})
	if err != nil {
		t.Fatal(err)
	}
	g := -1
	for i := range p.Groups {
		if p.Groups[i].Name == "layers.1" {
			g = i
		}
	}
	// Per micro-batch: is layers.1's unsharded-parameter buffer still live
	// when its accumulate runs?
	for mb := 0; mb < 3; mb++ {
		accumAt, freeAt := -1, -1
		for i, o := range p.Ops {
			if int(o.Micro) != mb || o.Phase != schedule.PhaseBackward || int(o.Group) != g {
				continue
			}
			if o.Kind == schedule.OpAccumulate && accumAt < 0 {
				accumAt = i
			}
			if o.Kind == schedule.OpFree && p.Buffers[o.Buffer].Kind == schedule.BufUnsharded && freeAt < 0 {
				freeAt = i
			}
		}
		if accumAt < 0 || freeAt < 0 {
			t.Fatalf("micro-batch %d: accumulate at op %d, unsharded free at op %d", mb, accumAt, freeAt)
		}
		if first := mb == 0; first != (accumAt > freeAt) {
			t.Errorf("micro-batch %d: accumulate at op %d, reshard at op %d: want the add %s the reshard", mb, accumAt, freeAt,
				map[bool]string{true: "after", false: "before"}[first])
		}
	}
}
