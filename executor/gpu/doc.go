// Package gpu is the executor's GPU backend, written against a small
// driver-shaped interface (Device) so that it is pure Go: the cuda package
// implements Device on a real GPU (build tag cuda), and gputest implements
// it on the CPU so every part of the backend is tested without one.
//
// The backend runs a plan's program the way PyTorch's FSDP2 runs on a GPU:
// each rank's five streams are device streams (the communication streams
// at high priority), the plan's events are device events, buffers come
// from a caching allocator per pool over device (or pinned host) memory,
// copies and casts are the copy kernel's moves (executor.Kernel.Moves),
// reductions the reduction kernel, and compute and the optimizer are
// stand-ins: Spin occupies the modelled duration, Burn does real
// fused multiply-adds. Stand-ins leave the parameters as they are, so the
// data check is that every gathered parameter equals the reference's and
// that every collective's result equals the host's recomputation from the
// collective's own inputs (check.go).
//
// Collectives run either through a Comm per process group (NCCL, one
// process per GPU) or, for a single-GPU rehearsal, between virtual ranks
// sharing the device: copies and reduction kernels on the ranks' planned
// streams, ordered by events, optionally paced to the cluster's link
// bandwidth (virtual.go).
//
// Every operation of the timed step is bracketed by events; the
// measurement (measure.go) yields per-op times on the device clock, step
// time, exposed communication, collective bandwidth and memory, set
// against the simulator's prediction for the same plan on the measured
// device figures.
package gpu
