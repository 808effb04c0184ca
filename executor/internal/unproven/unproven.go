// Package unproven holds the one way past executor.Run's proof: a
// Permit, given as executor.Options.Unproven, runs a plan schedule.Prove
// refuses. Go's internal rule lets only packages inside executor/ make
// one: the executor's own tests and the GPU backend's, which run broken
// plans to show that the run-time checks (hazards, poison, deadlocks)
// catch on their own what the proof would. The CLI, the CUDA worker and
// any other caller cannot name the type, so for them Run always proves.
package unproven

// Permit lets Run run a plan that schedule.Prove refuses.
type Permit struct{}
