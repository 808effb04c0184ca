package planner

import (
	"fmt"
	"strings"
	"testing"
)

// TestPlanUserErrors covers models that load but that no FSDP2 run can
// train as written: the planner must say what to change, never report an
// internal error or emit a plan its own checker refuses.
func TestPlanUserErrors(t *testing.T) {
	const head = "[train]\nseq_len = 4\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n"
	for _, tc := range []struct {
		name, model, want string
	}{
		{
			// A module with explicit costs but no parameters and no
			// gradient-carrying input: backward never reaches the root's
			// trainable [[param]].
			name:  "root param never reached",
			model: head + "[[module]]\nname = \"a\"\nflops_fwd = 1000\n[[param]]\nname = \"w\"\nshape = [8, 8]\n",
			want:  `parameter "w" requires a gradient, but backward never reaches group (root)`,
		},
		{
			// A container unit whose children are all frozen: its own
			// parameter trains but nothing under it runs a backward.
			name: "container param with frozen children",
			model: head + "[policy]\nunits = [\"c\"]\n[[module]]\nname = \"c\"\n[[module.param]]\nname = \"p\"\nshape = [8]\n" +
				"[[module.module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\nrequires_grad = false\n",
			want: `parameter "c.p" requires a gradient, but backward never reaches`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustLoadText(t, "m.toml", tc.model)
			_, err := Plan(m, Options{})
			if err == nil {
				t.Fatalf("planned; want an error containing %q", tc.want)
			}
			if strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q; want one containing %q and no internal error", err, tc.want)
			}
		})
	}
}

// TestScheduleLengthLimit: a schedule over the operation limit is refused
// with an error naming grad_accum, before the units are built when even a
// lower bound is over it, and by the emitter when only the real count is.
func TestScheduleLengthLimit(t *testing.T) {
	defer func(old int) { opLimit = old }(opLimit)
	opLimit = 2000
	const head = "[train]\nseq_len = 4\ngrad_accum = %d\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n" +
		"[[module]]\nname = \"layers\"\nrepeat = 10\nkind = \"linear\"\nin = 8\nout = 8\n"
	for _, tc := range []struct {
		accum int
		ok    bool
	}{
		{accum: 2, ok: true},
		{accum: 20, ok: false},  // emitted: about 50 ops per unit and micro-batch
		{accum: 100, ok: false}, // refused by the lower bound
	} {
		m := mustLoadText(t, "m.toml", fmt.Sprintf(head, tc.accum))
		p, err := Plan(m, Options{})
		switch {
		case tc.ok && err != nil:
			t.Errorf("grad_accum %d: %v", tc.accum, err)
		case !tc.ok && err == nil:
			t.Errorf("grad_accum %d: planned %d ops; want the limit's error", tc.accum, len(p.Ops))
		case !tc.ok && !strings.Contains(err.Error(), "operations per rank (train.grad_accum = "):
			t.Errorf("grad_accum %d: error %q does not name the limit", tc.accum, err)
		}
	}
}

// TestUnitInsideCheckpointRegion: a unit inside an activation-checkpoint
// region is refused; FSDP2 would gather it again when backward recomputes
// the region, and fsdpc's plan would miss those collectives.
func TestUnitInsideCheckpointRegion(t *testing.T) {
	const model = "[train]\nseq_len = 4\ncheckpointing = %q\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n[policy]\nunits = \"block-children\"\n" +
		"[[module]]\nname = \"layers\"\nrepeat = 2\n[[module.module]]\nname = \"a\"\nkind = \"linear\"\nin = 8\nout = 8\n" +
		"[[module.module]]\nname = \"b\"\nkind = \"linear\"\nin = 8\nout = 8\n"
	if _, err := Plan(mustLoadText(t, "m.toml", fmt.Sprintf(model, "none")), Options{}); err != nil {
		t.Fatalf("without checkpointing: %v", err)
	}
	_, err := Plan(mustLoadText(t, "m.toml", fmt.Sprintf(model, "full")), Options{})
	if err == nil || !strings.Contains(err.Error(), `"layers.0.a" is an FSDP unit inside the activation-checkpoint region "layers.0"`) {
		t.Fatalf("error %v; want the unit and the region named", err)
	}
}
