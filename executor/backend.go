package executor

import (
	"fmt"
	"strings"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Backend runs the operations of a set of ranks, shaped like a GPU
// runtime: per rank, caching-allocator pools, streams that execute what is
// launched on them in order, events recorded and waited on streams, and
// collectives over process groups of ranks. The driver (Run) is the CPU of
// every rank: it issues each rank's program in order and never waits for a
// stream except through Synchronize, as a CUDA program does.
//
// Calls for one rank come from one goroutine; calls for different ranks
// come concurrently. Failures inside streams (a hazard, a poisoned read, a
// mismatch, a deadlock) do not return from the call that launched the work:
// the backend stops every rank and Drain returns them, as CUDA reports
// asynchronous errors at the next synchronisation.
type Backend interface {
	// Open starts the ranks of a topology.
	Open(t Topology) error
	// Alloc takes a block for a buffer from a rank's pool as the CPU issues
	// the allocation, as PyTorch's caching allocator does: a block freed
	// earlier on the pool's stream may be handed out again at once, its
	// reuse ordered by that stream.
	Alloc(rank int, pool schedule.Pool, bytes int64) (Mem, error)
	// Free returns a block to its pool as the CPU issues the free; the
	// block's memory dies in stream order, when s reaches the free.
	Free(rank int, s schedule.Stream, m Mem, op int)
	// Record records ev on s; Wait makes s wait until ev's record (with
	// the same epoch) has executed.
	Record(rank int, s schedule.Stream, ev Event, op int)
	Wait(rank int, s schedule.Stream, ev Event, op int)
	// Launch enqueues a kernel on s. On the host stream (the CPU itself)
	// it runs before Launch returns.
	Launch(rank int, s schedule.Stream, k *Kernel, a Args)
	// Synchronize blocks the CPU until ev's record has executed.
	Synchronize(rank int, ev Event, op int) error
	// Abort records a failure the CPU found and stops every rank.
	Abort(f Failure)
	// Upload and Download copy a whole block from and to the host while no
	// stream uses it (before the first launch and after Drain).
	Upload(rank int, m Mem, data []byte) error
	Download(rank int, m Mem) ([]byte, error)
	// Failed reports whether the run has failed, so the CPU stops issuing.
	Failed() bool
	// Drain waits until every stream of every rank has executed all it was
	// given, and returns the failures, if any (a *FailureError).
	Drain() error
	// Stats are the per-rank measurements once drained.
	Stats(rank int) RankStats
	// Close stops the backend and frees everything.
	Close()
}

// A backend's optional capabilities. Run asks for each by its interface,
// and each backend asserts at compile time the ones it has (var _ …
// = (*Host)(nil)), so a misspelt method is a build error rather than a
// backend silently checked more or less strictly than it should be.
type (
	// Named is a backend with a name for reports ("host", "cuda (NVIDIA
	// H200)"); one without is called by its Go type.
	Named interface{ Name() string }
	// StandInRunner is a backend that may run stand-ins for compute and
	// the optimizer: it moves and reduces the data for real but leaves
	// the parameters as they were, so a run checks what the backend
	// checks (every gathered parameter, every collective), not the final
	// values, and cannot save a checkpoint.
	StandInRunner interface{ StandIns() bool }
	// FixedOrderReducer is a backend that may reduce in a fixed rank
	// order, so that its results must equal the reference's bit for bit;
	// the others are held to a tolerance.
	FixedOrderReducer interface{ FixedReductionOrder() bool }
)

// Topology is what a backend is opened for.
type Topology struct {
	Replicate, Shard int // the mesh: rank = r·Shard + k
	Steps            int
	// Phases is the phase of every op of the program, for timings.
	Phases []schedule.Phase
	// Describe names an op of the program in failure reports; Event
	// names an event, and RecordedBy the op that records it (-1: none).
	Describe   func(op int) string
	EventName  func(ev int) string
	RecordedBy func(ev int) int
	BufferName func(buf int) string
	// HazardCheck enables the run-time happens-before check of every
	// buffer access; Timeout is how long no stream may make progress
	// while some wait is blocked before the run is declared deadlocked.
	HazardCheck bool
	Timeout     time.Duration
	// Events is the number of events in the program.
	Events int
	// Plan is the (scaled) plan the program comes from, for backends that
	// time or describe operations by it; Local the ranks this process
	// issues, in order (the others run elsewhere).
	Plan  *schedule.Plan
	Local []int
}

// World is the number of ranks.
func (t Topology) World() int { return t.Replicate * t.Shard }

// Mem is a block of memory on one rank.
type Mem interface {
	Bytes() int64
}

// Event is one recording of a plan event: Epoch is the step it belongs to
// plus one, so a wait in step n waits for step n's record, never an older
// one.
type Event struct {
	ID, Epoch int
}

// Operand positions in Args.Mem.
const (
	ArgDst  = iota // the op's Buffer
	ArgSrc         // its Source
	ArgUse0        // its Uses
	ArgUse1
	ArgGrad // the optimizer's gradient
	MaxArgs
)

// Args are the per-launch arguments of a kernel: the step, the blocks, and
// the plan's buffer indices they stand for (-1: none), for reports.
type Args struct {
	Step int
	Mem  [MaxArgs]Mem
	Buf  [MaxArgs]int32
}

// Kernel is one compute, copy or collective operation, independent of the
// rank and step it runs for. The host backend implements each kind
// directly; a GPU backend maps them to kernels and NCCL calls.
type Kernel struct {
	Op    int // index in the program
	Kind  schedule.OpKind
	Phase schedule.Phase
	Micro int
	// DType is the element type of Dst, SrcDType of Src, where the buffer
	// has one (not the all-gather buffers, which mix dtypes).
	DType, SrcDType ir.DType
	// Group is the layout of the op's group; nil for none.
	Group *GroupLayout
	// Module is the plan's module (segment) index of compute; Ordinal the
	// op's position among its group's backward ops in the micro-batch.
	Module, Ordinal int
	Reduce          schedule.ReduceOp
	Factor          float64
	PG              schedule.ProcessGroup
	PGSize          int
	// Accumulate: the op adds into Dst (it already holds data); otherwise
	// it overwrites Dst.
	Accumulate bool
	// PostForward: a copy-in or copy-out of int reshard's backward gather
	// (N rows of W/N ranks, docs/semantics.md R36).
	PostForward bool
	// Acts lists which Use operands are saved activations (checked against
	// the forward's pattern); the others are scratch written by the op.
	Acts [2]bool
	// Optimizer and Expect are the stand-ins' data: the update rule, and
	// what the run must find (nil: no check).
	Optimizer *optimizer
	Expect    *expectations
}

// reads and writes list a kernel's accesses, for the hazard check.
func (k *Kernel) accesses() (reads, writes []int) {
	switch k.Kind {
	case schedule.OpCopyIn, schedule.OpH2D, schedule.OpD2H, schedule.OpCopyOut, schedule.OpReshard,
		schedule.OpReduceCopyIn, schedule.OpCastGrad, schedule.OpReduceScatter:
		return []int{ArgSrc}, []int{ArgDst}
	case schedule.OpAllGather, schedule.OpAllReduce, schedule.OpDivide:
		return []int{ArgDst}, []int{ArgDst}
	case schedule.OpAccumulate:
		if k.Accumulate {
			return []int{ArgSrc, ArgDst}, []int{ArgDst}
		}
		return []int{ArgSrc}, []int{ArgDst}
	case schedule.OpForward:
		return []int{ArgSrc}, []int{ArgDst}
	case schedule.OpBackward:
		reads = []int{ArgSrc}
		for i, act := range k.Acts {
			if act {
				reads = append(reads, ArgUse0+i)
			} else {
				writes = append(writes, ArgUse0+i)
			}
		}
		if k.Accumulate {
			reads = append(reads, ArgDst)
		}
		return reads, append(writes, ArgDst)
	case schedule.OpOptimizer:
		return []int{ArgDst, ArgSrc, ArgGrad}, []int{ArgDst, ArgSrc}
	}
	return nil, nil
}

// FailureKind classifies what went wrong in a run.
type FailureKind uint8

const (
	// Mismatch: data differs from what the reference says it must be.
	Mismatch FailureKind = iota
	// PoisonedRead: an op read memory that was freed or never written.
	PoisonedRead
	// Hazard: two accesses to a block, one a write, that no event orders.
	Hazard
	// Deadlock: no progress while streams wait for events or collectives
	// that never come.
	Deadlock
	// Protocol: an op the backend cannot run as given (an unallocated
	// buffer, mismatched collective sizes, a doubled gather).
	Protocol
	// Internal: a bug in the executor.
	Internal
)

var failureNames = [...]string{"mismatch", "poisoned read", "hazard", "deadlock", "protocol", "internal error"}

func (k FailureKind) String() string {
	if int(k) < len(failureNames) {
		return failureNames[k]
	}
	return fmt.Sprintf("failure(%d)", k)
}

// Failure is one problem found while running, where it happened.
type Failure struct {
	Kind   FailureKind
	Rank   int
	Stream schedule.Stream
	Step   int
	Op     int // -1: not one op
	What   string
}

func (f Failure) String() string {
	where := fmt.Sprintf("rank %d", f.Rank)
	if f.Op >= 0 {
		where += fmt.Sprintf(", %s stream, step %d, op %d", f.Stream, f.Step, f.Op)
	}
	return fmt.Sprintf("%s (%s): %s", f.Kind, where, f.What)
}

// FailureError is a run that failed, with every failure recorded (up to a
// limit), the first first.
type FailureError struct {
	Failures []Failure
	Dropped  int
}

func (e *FailureError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the run failed: %d problem(s)", len(e.Failures)+e.Dropped)
	for i, f := range e.Failures {
		if i == 8 {
			fmt.Fprintf(&b, "\n  … and %d more", len(e.Failures)-8+e.Dropped)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(f.String())
	}
	return b.String()
}

// Kinds lists the distinct kinds of failure, in order of first appearance.
func (e *FailureError) Kinds() []FailureKind {
	var out []FailureKind
	seen := map[FailureKind]bool{}
	for _, f := range e.Failures {
		if !seen[f.Kind] {
			seen[f.Kind] = true
			out = append(out, f.Kind)
		}
	}
	return out
}

// PoolStats is one pool's accounting on one rank, in bytes: the peak of
// live allocations (what the simulator predicts), the blocks the pool holds
// (allocated or cached), and allocations made.
type PoolStats struct {
	Live, Peak, Reserved int64
	Allocs               int64
}

// RankStats are one rank's measurements.
type RankStats struct {
	Pools [numPools]PoolStats
	// Busy is the time each stream spent executing kernels.
	Busy [numStreams]time.Duration
	// PhaseStart and PhaseEnd bound each step's phases (ns since Open):
	// [step][phase].
	PhaseStart, PhaseEnd [][numPhases]int64
}

const (
	numPools   = int(schedule.PoolHost) + 1
	numStreams = int(schedule.StreamHost) + 1
	numPhases  = int(schedule.PhaseOptimizer) + 1
)
