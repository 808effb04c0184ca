package gpu

import (
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
	// Abort stops the communicator's outstanding work (ncclCommAbort).
	Abort() error
	Close() error
}
