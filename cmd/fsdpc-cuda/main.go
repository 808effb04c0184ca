// Command fsdpc-cuda is the CUDA worker of `fsdpc run --backend cuda`: one
// process per GPU (or one process for a single-GPU rehearsal of every
// rank), which runs a plan.bin on the device and reports measured against
// predicted. Built with `go build -tags cuda ./cmd/fsdpc-cuda`; without
// the tag it builds, so that its logic is tested on machines without
// CUDA, but says it cannot run. fsdpc itself never links CUDA.
//
// Usage (docs/executor.md):
//
//	fsdpc-cuda [--virtual] [--scale K] [--steps N] [--timeout D]
//	           [--link-bandwidth B] [--stand-in spin|burn] [--trace FILE]
//	           [--device N] plan.bin
//	fsdpc-cuda bench [--ranks N] [--bytes B]
//
// Under a launcher (fsdpc run, torchrun, Slurm) the rank comes from the
// environment and collectives go through NCCL; with --virtual one process
// runs every rank of the plan on one GPU.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv, native))
}
