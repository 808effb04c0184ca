// Package planner compiles an ir.Model into a schedule.Plan: the FSDP2
// execution plan and its per-rank schedule for one training step.
//
// The planner is a table of passes (passes.go), each a function over the
// planning state that must leave it valid: tests run the checks after every
// pass. The passes decide, in order: the units (which modules own which
// parameters), ties across units, the shard layout, each group's policy
// (reshard, prefetch, mixed precision, reduce ops, offload), which groups
// reduce late, and finally the schedule itself.
package planner

import (
	"fmt"
	"runtime/debug"
	"sort"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Options control a planning run.
type Options struct {
	// CheckEveryPass runs the state checks after every pass, not only at the
	// end (tests and `fsdpc plan -check` set it).
	CheckEveryPass bool
	// DumpAfter, if set, is called after each pass with its name and the
	// state printed as text.
	DumpAfter func(pass, text string)
	// Times, if set, adds up each pass's time (`fsdpc plan -d time`).
	Times *PassTimes
	// skipVerify leaves out the happens-before verifier: the autotuner
	// plans many candidates and verifies the one it returns.
	skipVerify bool
	// scoreOnly plans a tuner candidate: only its prediction is read, so
	// buffers and events go unnamed and the simulator keeps no memory
	// timeline. The tuner re-plans its winner in full.
	scoreOnly bool
	// overBudget returns a plan that does not fit, with its prediction,
	// instead of an error: the tuner applies its own margin. The budget
	// still bounds the caching allocator (it frees its cache there).
	overBudget bool
}

// state is what the passes read and write.
type state struct {
	m    *ir.Model
	opts Options

	// unitOf maps each module to the unit that owns its parameters: the
	// nearest enclosing unit module. Set by the grouping pass.
	unitOf []int
	units  []*unit

	plan *schedule.Plan
	// diags are the problems and warnings the passes reported (diag.go).
	diags ir.Diagnostics
	// sim is the simulation the predict pass made.
	sim *schedule.Simulation
	// simAhead, when set, receives the simulation the verify pass started
	// beside the verifier (both only read the finished program).
	simAhead chan simulated
}

// unit is one fully_shard call: one parameter group.
type unit struct {
	modules []ir.ModuleID // the wrapped module(s); several after a merge
	params  []ir.ParamID  // owners only, FSDP2's order
	aliases map[ir.ParamID][]string
	merged  bool
}

func (u *unit) name(m *ir.Model) string { return m.Modules[u.modules[0]].Name }

// Result is what a planning run makes.
type Result struct {
	Plan *schedule.Plan
	// Sim is the simulation the predict pass made of the plan, the one
	// its Prediction was read from: a caller that shows the step's
	// breakdown reads it rather than simulating the plan again.
	Sim *schedule.Simulation
	// Warnings are the plan's warnings (Plan.Warnings holds their
	// messages) placed in the model file, in source order.
	Warnings ir.Diagnostics
}

// Plan runs every pass and returns the plan; see Compile.
func Plan(m *ir.Model, opts Options) (*schedule.Plan, error) {
	r, err := Compile(m, opts)
	if err != nil {
		return nil, err
	}
	return r.Plan, nil
}

// Compile runs every pass and returns the plan with its simulation and
// warnings. What the user must change comes back as ir.Diagnostics: every
// problem the first pass that found any could find, each placed at the
// module, parameter or policy entry it is about. A panic inside a pass is
// reported as an internal error naming the pass.
func Compile(m *ir.Model, opts Options) (*Result, error) {
	if len(m.Params) == 0 {
		// FSDP2 would shard nothing and the optimizer step nothing: a
		// plan's figures (memory, MFU, the peak of a dtype no parameter
		// has) would mean nothing. A unit without parameters in a model
		// with some is fine (docs/semantics.md D13).
		return nil, ir.Diagnostics{{Severity: ir.Error, File: m.File, Msg: "the model has no parameters: FSDP shards parameters and training updates them; there is nothing to plan"}}
	}
	s := &state{m: m, opts: opts}
	for _, p := range passes {
		if err := s.run(p); err != nil {
			return nil, err
		}
	}
	s.plan.Warnings = append(s.plan.Warnings, s.warningTexts()...)
	sort.Strings(s.plan.Warnings)
	return &Result{Plan: s.plan, Sim: s.sim, Warnings: s.warnings()}, nil
}

func (s *state) run(p pass) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error during planner pass %q (please report): %v\n%s", p.name, r, debug.Stack())
		}
	}()
	start := time.Now()
	err = p.fn(s)
	s.opts.Times.add(p.name, time.Since(start))
	if err != nil {
		return fmt.Errorf("%s: %w", s.m.File, err)
	}
	if s.failed() {
		return s.errors()
	}
	if s.opts.CheckEveryPass || p.name == passes[len(passes)-1].name {
		if err := s.check(p.name); err != nil {
			return fmt.Errorf("internal error: the plan is invalid after pass %q (please report): %w", p.name, err)
		}
	}
	if s.opts.DumpAfter != nil {
		s.opts.DumpAfter(p.name, s.dump())
	}
	return nil
}
