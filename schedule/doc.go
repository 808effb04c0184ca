// Package schedule will own the plan and schedule types, the plan.bin wire
// format (the only code that touches it), the canonical text form, the
// happens-before verifier, the memory and cost models and the simulator.
// Everything here stays pure Go.
//
// Nothing is implemented here yet (issues "Planner and plan.bin" and
// "Verify and predict").
package schedule
