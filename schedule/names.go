package schedule

import "fmt"

// Names of the enums, used by the text form and the JSON view. They are part
// of the plan's text format: renaming one is a reviewed change.

var streamNames = [...]string{"compute", "copy-in", "all-gather", "reduce-scatter", "all-reduce", "host"}
var poolNames = [...]string{"compute", "copy-in", "reduce-scatter", "all-reduce", "host"}
var bufferKindNames = [...]string{"sharded-params", "sharded-grads", "optimizer-state", "cast-temp", "h2d-temp",
	"all-gather-out", "unsharded", "post-forward-slice", "unsharded-grads", "accum-grads",
	"reduce-scatter-in", "reduce-scatter-out", "activations", "recompute"}
var opKindNames = [...]string{"alloc", "free", "record", "wait", "copy-in", "h2d", "all-gather", "copy-out",
	"reshard", "forward", "backward", "reduce-copy-in", "divide", "reduce-scatter", "all-reduce",
	"cast-grad", "accumulate", "d2h", "sync", "optimizer"}
var pgNames = [...]string{"none", "shard", "replicate", "post-forward"}
var phaseNames = [...]string{"forward", "backward", "optimizer"}
var reshardNames = [...]string{"true", "false", "to"}
var reduceNames = [...]string{"none", "avg", "sum", "premul-sum"}

func name(names []string, i int, what string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", what, i)
}

func (s Stream) String() string       { return name(streamNames[:], int(s), "stream") }
func (p Pool) String() string         { return name(poolNames[:], int(p), "pool") }
func (k BufferKind) String() string   { return name(bufferKindNames[:], int(k), "buffer") }
func (k OpKind) String() string       { return name(opKindNames[:], int(k), "op") }
func (g ProcessGroup) String() string { return name(pgNames[:], int(g), "pg") }
func (p Phase) String() string        { return name(phaseNames[:], int(p), "phase") }
func (r ReshardKind) String() string  { return name(reshardNames[:], int(r), "reshard") }
func (r ReduceOp) String() string     { return name(reduceNames[:], int(r), "reduce") }

// PoolOf is the pool of buffers allocated on a stream.
func PoolOf(s Stream) Pool {
	switch s {
	case StreamCopyIn, StreamAllGather:
		return PoolCopyIn
	case StreamReduceScatter:
		return PoolReduceScatter
	case StreamAllReduce:
		return PoolAllReduce
	case StreamHost:
		return PoolHost
	}
	return PoolCompute
}

// MarshalText gives the JSON view names instead of numbers.
func (s Stream) MarshalText() ([]byte, error)       { return []byte(s.String()), nil }
func (p Pool) MarshalText() ([]byte, error)         { return []byte(p.String()), nil }
func (k BufferKind) MarshalText() ([]byte, error)   { return []byte(k.String()), nil }
func (k OpKind) MarshalText() ([]byte, error)       { return []byte(k.String()), nil }
func (g ProcessGroup) MarshalText() ([]byte, error) { return []byte(g.String()), nil }
func (p Phase) MarshalText() ([]byte, error)        { return []byte(p.String()), nil }
func (r ReshardKind) MarshalText() ([]byte, error)  { return []byte(r.String()), nil }
func (r ReduceOp) MarshalText() ([]byte, error)     { return []byte(r.String()), nil }
