// Package ir is fsdpc's model IR and its TOML front end: the first stage of
// the pipeline
//
//	model.toml --(ir: parse, validate, lower)--> ir.Model --(planner)--> ...
//
// Load turns a model file into a Model or into Diagnostics that list every
// problem with file, line and column. The stages inside Load are:
//
//  1. decode: the TOML parser (github.com/BurntSushi/toml) yields a generic
//     tree; decode.go, syntax.go and settings.go check it key by key into a
//     syntax tree, rejecting unknown keys with a did-you-mean. locate.go
//     re-scans the source to give every key path a position.
//  2. lower: lower.go expands repeats into numbered instances, inlines
//     blocks, lets each kind make its parameter children (kindparams.go),
//     names everything with PyTorch's dotted names and resolves tied_to.
//  3. dataflow: dataflow.go connects compute modules (inputs, or the
//     previous sibling) and orders them: a topological order in which the
//     module declared first runs first whenever the graph allows. Cycles
//     are found with gonum.org/v1/gonum/graph and reported whole.
//  4. cost: cost.go and kindcost.go give every compute module its forward
//     and backward FLOPs and saved activations for the configured
//     micro-batch, sequence length and checkpointing.
//
// The Model contract: Modules are in declaration pre-order with the root at
// index 0; Params in declaration order; Forward is a topological order of
// the compute modules. Verify checks these invariants; Load runs it before
// returning, and every later stage may rely on them. A Model is not changed
// after Load returns: a pass that needs a different model builds a new one.
package ir
