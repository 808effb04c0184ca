// Package executor runs a plan for real and proves it correct.
//
// Run walks a plan's program as the CPU of every rank does: it issues each
// op in program order to a Backend, whose streams execute their ops in
// order, ordered across streams only by the plan's events. The Backend
// interface is shaped like a GPU runtime (per-rank caching-allocator
// pools, streams, events, kernels, collectives over process groups); the
// host backend (NewHost) implements it with every rank in this process and
// every stream a goroutine; the CUDA backend (executor/gpu, over the
// device of package cuda, one process per GPU run by cmd/fsdpc-cuda)
// implements it on real GPUs, and on a CPU stand-in device for tests.
//
// Every rank's sharded parameters start from a deterministic function of
// (parameter name, element index), laid out exactly as the plan's layout
// says. Compute is replaced by stand-ins that check what they read: the
// forward and backward compare the unsharded parameters with the full
// parameters cast to the gather dtype (a data check of every all-gather),
// backward writes gradients that depend on the parameters it read, the
// rank, the micro-batch and the step, and the optimizer step compares the
// gradient it receives before updating the shards. A reference computes
// the same steps without sharding, from FSDP2's semantics rather than from
// the program, and at the end every rank's shards and optimizer states
// must equal it bit for bit (the host reduces in a fixed rank order).
//
// Scale shrinks a plan's tensors while keeping its structure, so a plan
// for 512 GPUs runs on a laptop. See docs/executor.md.
package executor
