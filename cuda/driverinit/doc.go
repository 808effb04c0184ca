// Package driverinit initializes the CUDA driver before gorgonia.org/cu
// does, so that a machine without a usable GPU gets an explanation rather
// than cu's. cu's package init calls cuInit(0) and, when it fails, prints
// `Error in initialization, please refer to "…" for details on:
// NoDevice` to standard output and exits: no word of what is wrong or what
// to check. This package's init calls cuInit(0) first and, when it fails,
// prints to standard error what the error means and what to check (the
// kernel driver, CUDA_VISIBLE_DEVICES, nvidia-smi, that planning needs no
// GPU), then exits with status 1. When cuInit succeeds it does nothing,
// and cu's own call, which the driver treats as a no-op after the first,
// succeeds too. The package cuda imports it, so every binary that links
// cu through fsdpc gets it.
//
// Why its init runs first: the Go spec (since Go 1.21) initializes
// packages in this order: "Given the list of all packages, sorted by
// import path, in each step the first uninitialized package in the list
// for which all imports (if any) are already initialized is initialized."
// github.com/fsdpc/fsdpc/cuda/driverinit sorts before gorgonia.org/cu
// ("gi" < "go"), and everything it imports (C, fmt, os, runtime, strings
// and cgo's own runtime/cgo, syscall, unsafe) is also among cu's
// dependencies. So by the time all of cu's imports are initialized, all of
// this package's are too, and of the two, this one comes first in the
// list. Importing anything cu does not depend on could break that: a
// package initialized after cu would let cu's init run first.
// TestInitOrder holds the imports to cu's dependencies and checks that
// every fsdpc package that depends on cu depends on this one.
//
// The cgo part, and so the init, builds only with the cuda tag, like the
// rest of fsdpc's CUDA code; the wording of the messages (explain.go) is
// plain Go and tested everywhere. On a machine without libcuda.so.1 at
// all, no Go code runs: the dynamic loader refuses to start the binary
// ("error while loading shared libraries: libcuda.so.1"), and `fsdpc run
// --backend cuda` explains that line instead (cmd/fsdpc/run_cuda.go).
package driverinit
