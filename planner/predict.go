package planner

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// verifyPlan proves the emitted program safe with the happens-before
// verifier. The user cannot write a model that makes the planner emit an
// unsafe program, so a failure here is a planner bug.
func verifyPlan(s *state) error {
	if s.opts.skipVerify {
		return nil
	}
	// The simulation the predict pass needs reads the same finished
	// program as the verifier and writes nothing to it: run it on another
	// core meanwhile (the channel's buffer lets it finish even if the
	// verifier fails).
	if runtime.GOMAXPROCS(0) > 1 {
		s.simAhead = make(chan simulated, 1)
		go func() {
			sim, err := s.simulate()
			s.simAhead <- simulated{sim, err}
		}()
	}
	if err := schedule.Verify(s.plan); err != nil {
		return fmt.Errorf("internal error: the planner emitted an unsafe schedule (please report): %w", err)
	}
	return nil
}

// simulated is a simulation and its error, passed from the verify pass.
type simulated struct {
	sim *schedule.Simulation
	err error
}

// simulations counts the planner's simulations, for the test that a plan
// is simulated once (TestCompileSimulatesOnce).
var simulations atomic.Int64

// simulate runs the simulator the options ask for on the plan.
func (s *state) simulate() (*schedule.Simulation, error) {
	simulations.Add(1)
	p := s.plan
	return schedule.Simulate(p, schedule.NewModel(p))
}

// predict simulates the plan, stores the prediction, and refuses a plan
// whose memory does not fit the budget, saying what would make it fit.
func predict(s *state) error {
	p := s.plan
	var sim *schedule.Simulation
	var err error
	if s.simAhead != nil {
		r := <-s.simAhead
		s.simAhead = nil
		sim, err = r.sim, r.err
	} else {
		sim, err = s.simulate()
	}
	if err != nil {
		return err
	}
	p.Prediction = sim.Prediction()
	if sim.PeakReserved <= p.Cluster.MemoryBudget || s.opts.overBudget {
		if sim.AllocRetries > 0 && sim.PeakReserved <= p.Cluster.MemoryBudget {
			s.warnAt(s.m.BudgetPos(), "the caching allocator reaches the budget of %s and frees its cache %d times in a step to fit (%s allocated at the peak; its segments' fragmentation takes the rest): PyTorch then synchronises the device and retries each time (num_alloc_retries), so the step is slower than predicted; expandable_segments = true in [train] or a larger budget avoids it",
				ir.FormatBytes(p.Cluster.MemoryBudget), sim.AllocRetries, ir.FormatBytes(sim.PeakAllocated))
		}
		s.sim = sim
		return nil
	}
	s.errorAt(s.m.BudgetPos(), nil, "%s", s.doesNotFit(sim))
	return nil
}

// doesNotFit explains an over-budget plan: what is live at the peak, and
// what each remedy would save, with the numbers.
func (s *state) doesNotFit(sim *schedule.Simulation) string {
	p := s.plan
	var b strings.Builder
	over := sim.PeakReserved - p.Cluster.MemoryBudget
	fmt.Fprintf(&b, "the plan does not fit: it reserves %s per rank at its peak (%s allocated, the rest the caching allocator's per-stream pools, segments and fragmentation), %s over the budget of %s\n",
		ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(sim.PeakAllocated), ir.FormatBytes(over), ir.FormatBytes(p.Cluster.MemoryBudget))
	live := schedule.LiveAt(p, sim.PeakOp)
	byKind := map[schedule.BufferKind]int64{}
	count := map[schedule.BufferKind]int{}
	var persistent int64
	for _, bi := range live {
		buf := &p.Buffers[bi]
		byKind[buf.Kind] += buf.Bytes
		count[buf.Kind]++
		if buf.Persistent {
			persistent += buf.Bytes
		}
	}
	kinds := make([]schedule.BufferKind, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return byKind[kinds[i]] > byKind[kinds[j]] })
	where := "the start"
	if sim.PeakOp >= 0 {
		o := &p.Ops[sim.PeakOp]
		where = fmt.Sprintf("%s of micro-batch %d", o.Phase, o.Micro)
		if o.Group >= 0 {
			where += ", at group " + p.Groups[o.Group].Label()
		}
	}
	fmt.Fprintf(&b, "live at the peak (%s):\n", where)
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-20s %10s in %d buffers\n", k, ir.FormatBytes(byKind[k]), count[k])
	}
	fmt.Fprintf(&b, "what would make it fit:\n")
	for _, r := range s.remedies(sim, live, persistent) {
		fmt.Fprintf(&b, "  - %s\n", r)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (s *state) remedies(sim *schedule.Simulation, live []int, persistent int64) []string {
	p := s.plan
	m := s.m
	var out []string
	liveOf := func(kind schedule.BufferKind) (int64, []string) {
		var n int64
		var groups []string
		for _, bi := range live {
			if buf := &p.Buffers[bi]; buf.Kind == kind {
				n += buf.Bytes
				if buf.Group >= 0 {
					groups = append(groups, p.Groups[buf.Group].Label())
				}
			}
		}
		return n, dedup(groups)
	}
	// Unsharded parameters kept by reshard_after_forward = false.
	var kept []string
	var keptBytes int64
	for _, bi := range live {
		buf := &p.Buffers[bi]
		if buf.Kind == schedule.BufUnsharded && buf.Group >= 0 && p.Groups[buf.Group].Policy.Reshard == schedule.ReshardFalse {
			kept = append(kept, p.Groups[buf.Group].Label())
			keptBytes += buf.Bytes
		}
	}
	if len(kept) > 0 {
		out = append(out, fmt.Sprintf("reshard_after_forward = true for %s frees %s of unsharded parameters held through forward and backward (for the root: make its large modules units of their own)",
			foldNames(kept), ir.FormatBytes(keptBytes)))
	}
	for _, g := range p.Groups {
		if k := max(g.Policy.PrefetchForward, g.Policy.PrefetchBackward); k > 1 {
			out = append(out, fmt.Sprintf("a prefetch depth of 1 instead of %d keeps %d fewer all-gather outputs of about %s alive", k, k-1, ir.FormatBytes(g.ShardBytes*int64(p.Cluster.Shard))))
			break
		}
	}
	if act, _ := liveOf(schedule.BufActivations); act > 0 && m.Train.Checkpointing != ir.CheckpointFull {
		out = append(out, fmt.Sprintf("checkpointing = \"full\" keeps only each block's input of the %s of activations live at the peak", ir.FormatBytes(act)))
	}
	if rs, _ := liveOf(schedule.BufReduceScatterIn); rs > 0 {
		for _, g := range p.Groups {
			if g.Policy.Reduce.Size() > g.Policy.Param.Size() {
				out = append(out, fmt.Sprintf("reduce_dtype = %q halves the %s of reduce-scatter input at the peak", g.Policy.Param, ir.FormatBytes(rs)))
				break
			}
		}
	}
	// More GPUs shrink the sharded state, which scales with 1/W.
	budget := p.Cluster.MemoryBudget
	transient := sim.PeakReserved - persistent
	if persistent > 0 && transient < budget {
		w := p.Cluster.Shard
		need := int(float64(w)*float64(persistent)/float64(budget-transient)) + 1
		per := p.Cluster.GPUsPerNode
		need = (need + per - 1) / per * per
		if need > w {
			out = append(out, fmt.Sprintf("sharding over %d ranks instead of %d brings the %s of sharded parameters, gradients and optimizer state down to about %s",
				need, w, ir.FormatBytes(persistent), ir.FormatBytes(persistent*int64(w)/int64(need))))
		}
	} else {
		out = append(out, fmt.Sprintf("more GPUs alone cannot fit it: %s of the peak is transient (gathered layers, gradients, activations), which sharding does not shrink", ir.FormatBytes(transient)))
	}
	out = append(out, fmt.Sprintf("offload = true moves the %s of sharded parameters, gradients and optimizer state to host memory", ir.FormatBytes(persistent)))
	return out
}

// foldNames shortens a list of group names for a message.
func foldNames(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, %s and %d more", names[0], names[1], len(names)-2)
}
