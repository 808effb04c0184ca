package schedule

import (
	"fmt"

	"github.com/fsdpc/fsdpc/ir"
)

// Prove is the whole verdict `fsdpc verify` gives and `fsdpc run`
// requires before it executes anything: Verify (Check, the happens-before
// proof and the dataflow checks), then a simulation of the step, whose
// peak reserved memory must fit the plan's budget. It returns the
// simulation it made. A plan Prove refuses is never run: a run of it
// would only find, at best, what Prove already says.
func Prove(p *Plan) (*Simulation, error) {
	if err := Verify(p); err != nil {
		return nil, err
	}
	sim, err := Simulate(p, NewModel(p))
	if err != nil {
		return nil, err
	}
	if sim.PeakReserved > p.Cluster.MemoryBudget {
		return nil, fmt.Errorf("the plan reserves %s per rank, over its budget of %s", ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(p.Cluster.MemoryBudget))
	}
	return sim, nil
}
