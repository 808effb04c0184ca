// Package gputest implements gpu.Device on the CPU, faithfully enough to
// CUDA's semantics that tests of the GPU backend catch ordering bugs
// without a GPU.
//
// Memory. Device and pinned host allocations live in one address space,
// in two regions (device from 0x10_0000_0000, host from 0x7000_0000_0000).
// Each allocation starts on a 256-byte boundary and is followed by at
// least 256 unused bytes, and no address is ever handed out twice, so an
// access past the end of a buffer or after its Free names no live
// allocation. New memory holds 0xff bytes, a NaN in every float format.
// A kernel that touches memory outside a live allocation records an
// error naming the address; like CUDA's sticky errors it surfaces from
// the next SyncEvent, Download or Close, and the device runs no
// more kernels (records still complete, so nothing waits forever).
//
// Streams. Each stream is a goroutine running its queue in order. Record
// enqueues a record; Wait enqueues a wait for the event's latest record
// enqueued before the Wait (a no-op if there is none); SyncEvent blocks
// for the latest record at the time of the call. Kernel bodies run under
// one device-wide memory lock, so racing streams interleave at kernel
// granularity and the Go race detector stays quiet about the fake itself.
//
// Race detection (WithRaceDetection). Every stream and the host carry a
// vector clock; enqueueing work ticks the stream's clock, Record captures
// it, Wait joins it, SyncEvent joins it into the host's, and everything
// the host did before enqueueing is ordered before the work. Each
// allocation keeps, per byte range, the last writer and the readers since
// then; an access not ordered after a conflicting one records an
// ErrHazard naming both parties and the bytes. The check runs when work
// is enqueued, in enqueue order, which is a linearisation of the
// happens-before order: a missing Wait is reported every time, whatever
// the goroutines' timing.
//
// Graphs. BeginCapture puts a stream in capture mode; streams that wait
// on events recorded during the capture join it; EndCapture fails with
// ErrCapture when a joined stream's work was not joined back into the
// origin. LaunchGraph runs the captured kernels on the launching stream,
// serially, in a topological order of the captured edges that prefers the
// most recently captured ready node (the order least like the capture
// order, to expose missing edges); in race-detection mode the capture
// itself is also checked for races between its streams.
//
// Simplifications against CUDA, chosen to be strict where they matter to
// the backend:
//   - Free waits until no queued work uses the allocation (cuMemFree's
//     implicit synchronisation), then frees it for good.
//   - Upload is asynchronous, in its stream's order (cuMemcpyHtoDAsync):
//     a kernel on another stream that is not ordered after it by an
//     event races with it.
//   - Download fails with ErrHazard when queued work touches the bytes it
//     reads; with race detection, also when the host is not ordered
//     after the last conflicting write by a SyncEvent.
//   - Enqueueing calls check their arguments and fail synchronously on
//     bad handles or values, but report bad addresses asynchronously;
//     they never return an earlier asynchronous error.
//   - Waiting, in a capturing stream, on an event recorded outside the
//     capture, and waiting on an event whose latest record was captured in
//     a capture that has ended, are errors; launching a graph into a
//     capturing stream is not supported. Free during a capture fails and
//     invalidates it (cuMemFree synchronises the device); the other
//     synchronous calls are allowed, as in relaxed capture mode.
//   - Kernels handle fp64, fp32, bf16 and fp16 (Cast also copies any dtype
//     to itself). fp64 to bf16 or fp16 rounds through fp32, as the host
//     backend's store does. Reduce accepts fp32, bf16 and fp16. Add works
//     in fp64 when either operand is fp64, as the host backend does.
//   - The host is one thread for race detection: calls from different
//     goroutines are ordered by the device's lock, which can hide a race
//     between them but never reports a false one.
//   - Priorities are recorded, not used. Burn busy-waits doing fused
//     multiply-adds for flops / rate (WithBurnRate), at most 50 ms.
//
// NCCL. A Fabric plays NCCL between devices, one per rank as one GPU per
// process: communicators from ids, Split, all-gather, reduce-scatter and
// all-reduce as kernels on the caller's stream that run once every
// member's has started (reductions in float32, in member order), Abort,
// and a collective made to hang (Fabric.Hang) for testing watchdogs.
package gputest
