package gpu

import (
	"errors"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Comm is one rank's communicator over a process group, shaped like an
// NCCL communicator: collectives are enqueued on a stream of the calling
// rank and complete in that stream's order. Every member must call the
// same collectives in the same order.
type Comm interface {
	// Size and Rank are the group's size and this member's index in it.
	Size() int
	Rank() int
	// AllGather: recv (Size · bytes) receives every member's send (bytes)
	// in member order. send may be recv + Rank·bytes (in place).
	AllGather(send, recv Ptr, bytes int64, s Stream) error
	// ReduceScatter: recv (n elements) receives the reduction of chunk
	// Rank of every member's send (Size · n elements); op is Sum, Avg or
	// PremulSum with factor.
	ReduceScatter(send, recv Ptr, n int64, dt ir.DType, op schedule.ReduceOp, factor float64, s Stream) error
	// AllReduce reduces n elements of every member's buf into every buf.
	AllReduce(buf Ptr, n int64, dt ir.DType, op schedule.ReduceOp, factor float64, s Stream) error
	// Split makes a communicator of the members that pass the same
	// color, ranked by key (ncclCommSplit): every member calls it, and
	// it returns when all have. It is how the sub-groups of HSDP and of
	// an intermediate reshard_after_forward are made from the world.
	Split(color, key int) (Comm, error)
	// Abort stops the communicator's outstanding work (ncclCommAbort).
	Abort() error
	// Close releases the communicator; a second Close does nothing.
	Close() error
}

// AsyncErrorer is a Comm that can report an asynchronous error of its
// collectives (ncclCommGetAsyncError): the watchdog polls it.
type AsyncErrorer interface {
	AsyncError() error
}

// ErrInProgress is what a call on a non-blocking communicator returns
// while NCCL is still working on it (ncclInProgress): the communicator's
// Poll says when it has finished. Split returns the new communicator with
// it, and that one is polled.
var ErrInProgress = errors.New("the communicator's call is in progress")

// Poller is a non-blocking communicator (NCCL's config.blocking = 0): a
// call that would wait for the peers (creation, Split, a first
// collective's connection) returns ErrInProgress at once, and Poll
// (ncclCommGetAsyncError) returns ErrInProgress until the call has
// finished, then nil or its error. No call is ever inside such a
// communicator for long, so an Abort from another goroutine is safe at
// any time, which is NCCL's documented way to tolerate a peer that never
// arrives. Guard polls its calls to completion.
type Poller interface {
	Poll() error
}

// Subgroups returns Options.Comm for the process holding world, the
// communicator of every rank: a group as large as the world is world
// itself; any other is split from it, colored by the group and keyed by
// the rank's place in it (executor.Membership), so that its members are
// ordered as the plan's collectives expect. Every rank must ask for the
// same groups in the same order, since each Split is a collective over
// world (Backend.Open asks in the plan's canonical order).
func Subgroups(world Comm) func(pg schedule.ProcessGroup, size int) (Comm, error) {
	return func(pg schedule.ProcessGroup, size int) (Comm, error) {
		g, pos, err := executor.Membership(pg, size, world.Rank(), world.Size())
		if err != nil {
			return nil, err
		}
		if size == world.Size() && pos == world.Rank() {
			return world, nil
		}
		return world.Split(g.Base, pos)
	}
}
