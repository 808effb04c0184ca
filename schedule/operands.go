package schedule

import "slices"

// OperandRule says what kinds of buffer an operation may write (its
// Buffer, the target) and read (its Source), and whether either may be
// absent (-1). Verify holds every plan to these rules and the executors
// run by them, so a plan that names the wrong kind of buffer (a bit flip
// turning an all-gather output into an optimizer state) is refused before
// any kernel is chosen for it.
type OperandRule struct {
	Target, Source                 []BufferKind
	TargetOptional, SourceOptional bool
	// MaxUses is how many further buffers (Op.Uses) the op may read, each
	// of the kinds in Uses.
	MaxUses int
	Uses    []BufferKind
}

// operandRules is indexed by OpKind; ops that move no data (alloc, free,
// record, wait, sync) have none.
var operandRules = [numOpKinds]*OperandRule{
	OpCopyIn: {Target: kinds(BufAllGatherOut), Source: kinds(BufShardedParams, BufH2DTemp, BufPostForwardSlice)},
	OpH2D:    {Target: kinds(BufH2DTemp), Source: kinds(BufShardedParams)},
	// An all-gather runs in place on its output (the source, when named,
	// is the same buffer).
	OpAllGather: {Target: kinds(BufAllGatherOut), Source: kinds(BufAllGatherOut), SourceOptional: true},
	OpCopyOut:   {Target: kinds(BufUnsharded), Source: kinds(BufAllGatherOut)},
	OpReshard:   {Target: kinds(BufPostForwardSlice), Source: kinds(BufUnsharded)},
	OpForward:   {Target: kinds(BufActivations), Source: kinds(BufUnsharded), TargetOptional: true, SourceOptional: true},
	// A backward reads its forward's activations and recomputes into a
	// scratch buffer besides reading the parameters and writing gradients.
	OpBackward: {Target: kinds(BufUnshardedGrads), Source: kinds(BufUnsharded), TargetOptional: true, SourceOptional: true,
		MaxUses: 2, Uses: kinds(BufActivations, BufRecompute)},
	OpReduceCopyIn:  {Target: kinds(BufReduceScatterIn), Source: kinds(BufUnshardedGrads, BufAccumGrads)},
	OpDivide:        {Target: kinds(BufReduceScatterIn, BufReduceScatterOut), Source: kinds(BufReduceScatterIn, BufReduceScatterOut), SourceOptional: true},
	OpReduceScatter: {Target: kinds(BufReduceScatterOut), Source: kinds(BufReduceScatterIn)},
	OpAllReduce:     {Target: kinds(BufReduceScatterOut), Source: kinds(BufReduceScatterOut), SourceOptional: true},
	OpCastGrad:      {Target: kinds(BufShardedGrads), Source: kinds(BufReduceScatterOut)},
	OpAccumulate: {Target: kinds(BufAccumGrads, BufShardedGrads, BufReduceScatterOut),
		Source: kinds(BufUnshardedGrads, BufShardedGrads, BufReduceScatterOut, BufH2DTemp)},
	OpD2H: {Target: kinds(BufShardedGrads, BufH2DTemp), Source: kinds(BufShardedGrads, BufReduceScatterOut)},
	// The optimizer updates the sharded parameters from its states and
	// the gradient it names first in Uses.
	OpOptimizer: {Target: kinds(BufShardedParams), Source: kinds(BufOptimizerState), SourceOptional: true,
		MaxUses: 1, Uses: kinds(BufShardedGrads, BufReduceScatterOut)},
}

func kinds(k ...BufferKind) []BufferKind { return k }

// Operands returns the operand rule of an op kind; ok is false for the
// ops that name no data buffers (alloc, free, record, wait, sync).
func Operands(k OpKind) (rule OperandRule, ok bool) {
	if k >= numOpKinds || operandRules[k] == nil {
		return OperandRule{}, false
	}
	return *operandRules[k], true
}

// allows reports whether a buffer of kind k may fill a role (one of a
// rule's kind lists).
func allows(ks []BufferKind, k BufferKind) bool { return slices.Contains(ks, k) }
