package planner

import "testing"

// TestFrozenUnitsAccumulate plans frozen units under gradient
// accumulation. Backward prefetch gathers the last frozen unit though no
// gradient reaches it; FSDP2's finalize_backward waits for that gather and
// drops it without a copy-out. The verifier once took the next
// micro-batch's gather of the unit for a second gather before the first
// was copied out and called the plan unsafe (an internal error on a valid
// model).
func TestFrozenUnitsAccumulate(t *testing.T) {
	for _, accum := range []string{"1", "2", "4"} {
		t.Run("grad_accum="+accum, func(t *testing.T) {
			m := mustLoadText(t, "frozen.toml", "[train]\nseq_len = 4\ngrad_accum = "+accum+
				"\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n"+
				"[[module]]\nname = \"layers\"\nrepeat = 4\nkind = \"linear\"\nin = 8\nout = 8\nrequires_grad = false\n"+
				"[[module]]\nname = \"head\"\nkind = \"linear\"\nin = 8\nout = 8\n")
			if _, err := Plan(m, Options{CheckEveryPass: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
