package gpu

import (
	"time"

	"github.com/fsdpc/fsdpc/ir"
)

// Ptr is an address in a Device's unified address space: device memory
// or pinned host memory, as cuMemAlloc and cuMemAllocHost return them.
// Arithmetic on it (p + offset) addresses bytes inside an allocation.
type Ptr uint64

// Stream and Event name a device's streams and events; they are only
// meaningful to the device that made them.
type (
	Stream int32
	Event  int32
)

// Run is one run of a Moves: N elements of SrcDType at src+SrcOff to
// DstDType at dst+DstOff.
type Run struct {
	DstOff, SrcOff     int64
	DstDType, SrcDType ir.DType
	N                  int64
}

// Graph is a captured sequence of stream work that can be replayed.
type Graph int32

// Device is the subset of a GPU's driver API the backend needs, shaped
// like CUDA's: work enqueued on a stream runs in order; Record and Wait
// order streams; errors of asynchronous work surface at the next
// synchronisation. All methods may be called from any goroutine (an
// implementation owns its context on one OS thread and serialises).
//
// The kernels are the few the FSDP schedule needs besides copies; their
// exact arithmetic is specified here, because the backend's data check
// recomputes it on the host (check.go) and expects the same bytes.
type Device interface {
	// Name describes the device ("NVIDIA H100 80GB HBM3, sm_90, …").
	Name() string
	// Alloc takes device memory; AllocHost pinned host memory. Free
	// returns either.
	Alloc(bytes int64) (Ptr, error)
	AllocHost(bytes int64) (Ptr, error)
	Free(p Ptr) error
	// MemInfo is the device's free and total memory (cuMemGetInfo).
	MemInfo() (free, total int64, err error)

	// NewStream makes a non-blocking stream; priority follows CUDA (lower
	// is more urgent), clamped to PriorityRange.
	NewStream(priority int) (Stream, error)
	PriorityRange() (least, greatest int)
	// NewEvent makes an event that records timing, for Elapsed;
	// NewSyncEvent one that only orders and reports completion (CUDA's
	// CU_EVENT_DISABLE_TIMING, cheaper to record), on which Elapsed
	// fails. Timing is asked for only where a time is measured.
	NewEvent() (Event, error)
	NewSyncEvent() (Event, error)
	Record(e Event, s Stream) error
	Wait(s Stream, e Event) error
	// SyncEvent blocks until e's latest record has executed.
	SyncEvent(e Event) error
	// Query reports whether e's latest record has executed, without
	// blocking (cuEventQuery); true for an event never recorded. A
	// watchdog polls it.
	Query(e Event) (bool, error)
	// Elapsed is the time between two executed records.
	Elapsed(from, to Event) (time.Duration, error)

	// Copy copies bytes in stream order, in any direction; Memset sets
	// them. Neither needs any alignment.
	Copy(dst, src Ptr, bytes int64, s Stream) error
	Memset(dst Ptr, value byte, bytes int64, s Stream) error
	// Moves runs every run from src to dst in s's order as one device
	// call: a copy where a run's dtypes agree, a cast (as Cast) where
	// they differ. A plan op's copy-in, copy-out or reshard is one Moves,
	// not one call per tensor.
	Moves(dst, src Ptr, runs []Run, s Stream) error
	// Upload copies data to dst in s's order (cuMemcpyHtoDAsync): data
	// is taken before it returns, so the caller may reuse it, but the
	// device's bytes are written only when s reaches the copy; work on
	// other streams must wait for an event recorded on s after it.
	// Download copies synchronously to Go memory, outside any stream's
	// order (the caller makes sure no stream is writing the memory).
	Upload(dst Ptr, data []byte, s Stream) error
	Download(dst []byte, src Ptr) error

	// Cast converts n elements from src's dtype to dst's, rounding to
	// nearest, ties to even (NaN stays NaN, overflow goes to infinity), as
	// the host backend does. Float dtypes fp64, fp32, bf16 and fp16 only;
	// the same dtype is a copy. Addresses need only be byte aligned (a
	// group's parameters follow each other without padding).
	Cast(dst Ptr, dt ir.DType, src Ptr, st ir.DType, n int64, s Stream) error
	// Reduce writes dst[i] = round_dt(Σ_j round32(srcs[j][i] · scale)),
	// the sum taken in float32 in the order of srcs (fp32 and bf16 inputs;
	// fp16 too): the reduction of a reduce-scatter or all-reduce, with
	// scale 1/n for an average. dst may be one of srcs.
	Reduce(dst Ptr, srcs []Ptr, n int64, dt ir.DType, scale float32, s Stream) error
	// Divide divides n elements in place: x = round_dt(x / f), the
	// quotient of float32 operands (f rounded to float32; fp64 in fp64):
	// pre- and post-divide factors.
	Divide(p Ptr, dt ir.DType, n int64, f float64, s Stream) error
	// Add adds src to dst elementwise in float32 and rounds to dst's dtype.
	Add(dst Ptr, dt ir.DType, src Ptr, st ir.DType, n int64, s Stream) error
	// Fill writes the deterministic pattern Pattern(seed, i) of dtype dt
	// into n elements: what stand-in compute leaves in its outputs.
	Fill(p Ptr, dt ir.DType, n int64, seed uint64, s Stream) error
	// Spin occupies one SM for d (a compute stand-in of the modelled
	// duration); Burn runs flops fused multiply-adds spread over the whole
	// device (a stand-in with real load, competing with communication).
	Spin(d time.Duration, s Stream) error
	Burn(flops float64, s Stream) error
	// PacedCopy copies bytes no faster than bytesPerSecond: a device copy
	// standing in for a transfer over a slower link.
	PacedCopy(dst, src Ptr, bytes int64, bytesPerSecond float64, s Stream) error

	// BeginCapture starts recording the work enqueued on s, and on every
	// stream that waits for an event recorded on a captured stream, into
	// a graph instead of running it; EndCapture ends it (all captured
	// streams must have joined back into s). Launch replays a graph on s.
	BeginCapture(s Stream) error
	EndCapture(s Stream) (Graph, error)
	LaunchGraph(g Graph, s Stream) error

	// Close frees everything the device holds.
	Close() error
}
