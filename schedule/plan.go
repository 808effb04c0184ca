// Package schedule owns the FSDP plan: its types, the plan.bin wire format
// (wire.go is the only code that touches the bytes), the canonical text
// form and the structural checks every plan must pass. Everything here is
// pure Go and runs anywhere.
//
// A Plan is SPMD: every rank runs the same program, one training step (all
// micro-batches and the optimizer step) as operations on five CUDA streams
// and the host, ordered within a stream and across streams only by events.
// Per-rank differences (which rows of a parameter a rank owns) follow from
// the layout and the rank index and are not spelled out.
package schedule

import "github.com/fsdpc/fsdpc/ir"

// FormatVersion is the plan.bin format version. It changes whenever an old
// reader would misread a new file; readers refuse newer versions.
const FormatVersion = 11

// Semantics names the FSDP behaviour the schedule models: PyTorch FSDP2
// (fully_shard) as torch 2.14 runs it, the version the conformance suite
// checks every plan shape against (torchgen, Debian forky's
// python3-torch 2.14.1): one parameter group per fully_shard call, the
// reshard_after_forward default None (true for non-root units, false for
// the root), a grouped unit's post-backward on its first module's inputs.
// docs/semantics.md lists what older releases do differently.
const Semantics = "torch-fsdp2/2.14"

// Plan is a compiled FSDP execution plan.
type Plan struct {
	Header  Header  `json:"header"`
	Cluster Cluster `json:"cluster"`
	Train   Train   `json:"train"`
	Groups  []Group `json:"groups"`
	// Modules names every module the schedule refers to (compute segments),
	// so the plan needs no model file to be read.
	Modules []string `json:"modules"`
	// ElemRecompute holds, for each entry of Modules, the part of that
	// segment's backward element-wise traffic (an OpBackward's ElemBytes)
	// that reruns its forward kernels under activation checkpointing: the
	// cost model prices it at the share of HBM bandwidth forward kernels
	// reach, the rest of ElemBytes at the gradient kernels'. Nil when no
	// segment recomputes any (and in plans of format version 8 and older).
	ElemRecompute []int64  `json:"elem_recompute,omitempty"`
	Buffers       []Buffer `json:"buffers"`
	Events        int      `json:"events"` // events are numbered 0 … Events-1
	// EventNames label each event for the text form, so inserting one event
	// does not renumber every later line of a plan diff.
	EventNames []string `json:"event_names"`
	Ops        []Op     `json:"ops"`
	// GEMMTable and UseTable hold every op's GEMM shapes and further
	// reads (Op.GEMMs, Op.Uses locate an op's run): kept out of Op so
	// that Op holds no pointer and the millions of them in the largest
	// plans cost the garbage collector nothing to scan. Ops with equal
	// lists share one run. Read them with OpGEMMs and OpUses; the JSON
	// form writes each op's lists in place.
	GEMMTable []ir.GEMM `json:"-"`
	UseTable  []int32   `json:"-"`
	// Warnings the planner raised, sorted.
	Warnings []string `json:"warnings"`
	// Prediction is the simulator's forecast of one step; zero until the
	// plan has been simulated.
	Prediction Prediction `json:"prediction"`
}

// Prediction is what the simulator expects one step to cost on one rank.
type Prediction struct {
	StepTime    float64 `json:"step_time"`             // seconds
	ComputeTime float64 `json:"compute_time"`          // the compute alone, as if communication were free
	ExposedComm float64 `json:"exposed_communication"` // the compute stream waiting for communication
	CPUTime     float64 `json:"cpu_time"`              // when the CPU finished issuing the step
	// ExposedByGroup splits ExposedComm by the group whose communication
	// was waited for.
	ExposedByGroup []float64 `json:"exposed_by_group"`
	// Device memory: the peak allocated across pools, at which op, and
	// each pool's own peak (what the caching allocator reserves).
	PeakAllocated int64   `json:"peak_allocated"`
	PeakOp        int     `json:"peak_op"`
	PeakByPool    []int64 `json:"-"`
	PeakReserved  int64   `json:"peak_reserved"`
}

// Header says where a plan came from.
type Header struct {
	FsdpcVersion string `json:"fsdpc_version"`
	// InputSHA256 is the hex SHA-256 of the model file the plan was made
	// from; Model its model name.
	InputSHA256 string `json:"input_sha256"`
	Model       string `json:"model"`
	Semantics   string `json:"semantics"`
}

// Cluster is the target the plan was made for.
type Cluster struct {
	GPU string `json:"gpu"`
	// Preset is the GPU preset the cluster's figures start from, "" for a
	// GPU given as figures (format 7 on; older plans read "" and look
	// their chip up by GPU name, as they were planned).
	Preset             string  `json:"preset,omitempty"`
	WorldSize          int     `json:"world_size"`
	GPUsPerNode        int     `json:"gpus_per_node"`
	Replicate          int     `json:"replicate"`
	Shard              int     `json:"shard"` // the mesh; Replicate is 1 without HSDP
	IntraNodeBandwidth float64 `json:"intra_node_bandwidth"`
	InterNodeBandwidth float64 `json:"inter_node_bandwidth"`
	HBMBytes           int64   `json:"hbm_bytes"`
	MemoryBudget       int64   `json:"memory_budget"`
	// The cost model's figures: dense peak FLOP/s indexed by ir.DType,
	// HBM and host-link bandwidths in bytes per second.
	PeakFLOPS     []float64 `json:"-"`
	HBMBandwidth  float64   `json:"hbm_bandwidth"`
	HostBandwidth float64   `json:"host_bandwidth"`
	// Profile is the hardware profile the model file named: calibration
	// constants that replace the GPU's built-in profile (NewModel).
	Profile []ir.ProfileValue `json:"profile"`
}

// Train is the training setup the schedule runs.
type Train struct {
	MicroBatch int64 `json:"micro_batch"`
	SeqLen     int64 `json:"seq_len"`
	GradAccum  int64 `json:"grad_accum"`
	// AccumulateUnsharded: only the last micro-batch reduces (no_sync).
	AccumulateUnsharded bool   `json:"accumulate_unsharded"`
	Checkpointing       string `json:"checkpointing"`
	Optimizer           string `json:"optimizer"`
	// OptimizerImplementation is the PyTorch implementation the
	// optimizer's step was priced as: "fused" or "foreach" for AdamW
	// ([train] optimizer_implementation), "" for the others and for plans
	// before format 10. A trainer that applies the plan builds its
	// optimizer with it (torch.optim.AdamW(..., fused=True) or
	// foreach=True), or its step is not the one predicted.
	OptimizerImplementation string `json:"optimizer_implementation,omitempty"`
	OptimizerStateBytes     int64  `json:"optimizer_state_bytes"`
	// MaxGradNorm is the gradient-norm clipping threshold the step was
	// priced with ([train] max_grad_norm; 0: no clipping, and every plan
	// before format 11). A trainer that applies the plan clips with it.
	MaxGradNorm float64 `json:"max_grad_norm,omitempty"`
	// ExpandableSegments: PyTorch's caching allocator maps growing
	// segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) instead
	// of fixed ones; it changes what is reserved (allocator.go).
	ExpandableSegments bool `json:"expandable_segments"`
	// ModelFLOPsPerToken is the model's FLOPs per training token by MFU's
	// convention (ir.Model.FLOPsPerToken: 6N plus the attention core's),
	// so MFU needs nothing but the plan (format 8 on; older plans read 0,
	// and MFU then needs the model file they were made from).
	ModelFLOPsPerToken float64 `json:"model_flops_per_token"`
}

// ReshardKind is reshard_after_forward after defaults are applied.
type ReshardKind uint8

const (
	ReshardTrue  ReshardKind = iota // free unsharded parameters after forward
	ReshardFalse                    // keep them until post-backward
	ReshardTo                       // keep a 1/N slice; re-gather over N ranks in backward
	numReshardKinds
)

// ReduceOp is the reduction a reduce-scatter or all-reduce applies.
type ReduceOp uint8

const (
	ReduceNone ReduceOp = iota // not a reduction
	ReduceAvg
	ReduceSum
	ReducePremulSum // multiply by Factor, then sum
	numReduceOps
)

// Group is one FSDP parameter group (one fully_shard unit): its parameters
// are all-gathered in one collective and reduce-scattered in another.
type Group struct {
	Name string `json:"name"` // the unit's module name; "" is the root
	// Modules are the unit's module names (one, or several merged for tied
	// parameters).
	Modules []string     `json:"modules"`
	Root    bool         `json:"root"`
	Params  []GroupParam `json:"params"`

	// Layout over the shard group of size W: S is the padded shard numel
	// per rank, W·S the all-gather buffer; GradS over the parameters with
	// gradients (the reduce-scatter output per rank).
	ShardNumel     int64 `json:"shard_numel"`
	GradShardNumel int64 `json:"grad_shard_numel"`
	// ShardBytes is a rank's all-gather input in bytes: ShardNumel elements
	// of the gather dtype, or, when parameters gather in different dtypes,
	// their bytes (FSDP2 then gathers as uint8).
	ShardBytes int64 `json:"shard_bytes"`

	Policy GroupPolicy `json:"policy"`
	// DeferredReduce: the unit's inputs need no gradient, so FSDP2 runs its
	// post-backward (reshard and reduce-scatter) only at the end of
	// backward.
	DeferredReduce bool `json:"deferred_reduce"`
}

// Label names the group for people: its module, or "(root)".
func (g *Group) Label() string {
	if g.Root {
		return "(root)"
	}
	return g.Name
}

// GroupPolicy holds the group's resolved settings.
type GroupPolicy struct {
	Reshard   ReshardKind `json:"reshard"`
	ReshardTo int         `json:"reshard_to"` // N for ReshardTo
	// Prefetch depths: 0 means FSDP2's implicit prefetch.
	PrefetchForward  int `json:"prefetch_forward"`
	PrefetchBackward int `json:"prefetch_backward"`
	// Dtypes after FSDP2's clamping: Orig is the sharded parameters' dtype,
	// Param the all-gather and compute dtype, Reduce the reduce-scatter's,
	// Output the cast of outputs (ir.DTypeInvalid: none).
	Orig              ir.DType `json:"orig_dtype"`
	Param             ir.DType `json:"param_dtype"`
	Reduce            ir.DType `json:"reduce_dtype"`
	Output            ir.DType `json:"output_dtype"`
	CastForwardInputs bool     `json:"cast_forward_inputs"`
	Offload           bool     `json:"offload"`
	// Reduce-scatter and all-reduce ops with FSDP2's divide factors.
	ReduceScatterOp ReduceOp `json:"reduce_scatter_op"`
	AllReduceOp     ReduceOp `json:"all_reduce_op"`
	PremulFactor    float64  `json:"premul_factor"`
	PreDivide       float64  `json:"pre_divide"`
	PostDivide      float64  `json:"post_divide"` // 1 means none
}

// GroupParam is one parameter in a group, in FSDP2's order (module
// post-order, then the module's own parameters).
type GroupParam struct {
	Name         string   `json:"name"`
	Shape        []int64  `json:"shape"`
	DType        ir.DType `json:"dtype"`
	RequiresGrad bool     `json:"requires_grad"`
	// Aliases are other names of the same tensor (tied parameters).
	Aliases []string `json:"aliases"`
	// ShardDim is the dimension sharded (0 unless the policy says
	// otherwise); ChunkRows = ceil(shape[ShardDim] / W).
	ShardDim  int   `json:"shard_dim"`
	ChunkRows int64 `json:"chunk_rows"`
	// ShardNumel is the padded per-rank numel (ChunkRows × the other
	// dimensions); Offset where the parameter starts inside a rank's
	// all-gather row; GradOffset inside the reduce-scatter row, or -1
	// without a gradient.
	ShardNumel int64 `json:"shard_numel"`
	Offset     int64 `json:"offset"`
	GradOffset int64 `json:"grad_offset"`
	// GatherDType is the dtype the parameter is all-gathered and computed
	// in: the group's param dtype for floating-point parameters, its own
	// otherwise.
	GatherDType ir.DType `json:"gather_dtype"`
	// StateOrder is the parameter's position in the model's state dict:
	// nn.Module registration order, a module's own parameters before its
	// children's, a tied parameter once. DCP's save plans follow it, and
	// its deduplication decides by it which rank writes a replicated chunk
	// (package checkpoint). -1 when the plan does not say (format 5 and
	// older).
	StateOrder int `json:"state_order"`
}

// Stream is where an operation runs.
type Stream uint8

const (
	StreamCompute       Stream = iota // the default stream: compute, copy-out, RS copy-in
	StreamCopyIn                      // all-gather copy-in and casts, offload H2D
	StreamAllGather                   // all-gather collectives
	StreamReduceScatter               // reduce-scatter, post-reduce work without HSDP
	StreamAllReduce                   // HSDP all-reduce and its post-reduce work
	StreamHost                        // the CPU: blocking syncs, offloaded optimizer step
	numStreams
)

// Pool is the caching-allocator pool a buffer lives in: blocks are tied to
// the stream that allocated them.
type Pool uint8

const (
	PoolCompute Pool = iota
	PoolCopyIn
	PoolReduceScatter
	PoolAllReduce
	PoolHost // pinned host memory
	numPools
)

// BufferKind says what a buffer holds.
type BufferKind uint8

const (
	BufShardedParams    BufferKind = iota // persistent sharded parameters
	BufShardedGrads                       // persistent sharded gradients
	BufOptimizerState                     // persistent optimizer states
	BufCastTemp                           // mixed-precision copy-in temporary
	BufH2DTemp                            // offload: parameters copied to the device
	BufAllGatherOut                       // flat all-gather output, W·S
	BufUnsharded                          // unsharded parameters
	BufPostForwardSlice                   // int reshard: the kept 1/N slice
	BufUnshardedGrads                     // autograd's unsharded gradients
	BufAccumGrads                         // no-sync accumulation in the reduce dtype
	BufReduceScatterIn                    // flat reduce-scatter input, W·S'
	BufReduceScatterOut                   // reduce-scatter output, S'
	BufActivations                        // saved activations of a compute segment
	BufRecompute                          // activations rebuilt by checkpointing
	numBufferKinds
)

// Buffer is one allocation. Persistent buffers live across steps and are
// neither allocated nor freed by the schedule.
type Buffer struct {
	Name       string     `json:"name"`
	Kind       BufferKind `json:"kind"`
	Pool       Pool       `json:"pool"`
	Group      int        `json:"group"` // -1 for none
	Bytes      int64      `json:"bytes"`
	Persistent bool       `json:"persistent"`
}

// OpKind is what an operation does.
type OpKind uint8

const (
	OpAlloc         OpKind = iota // Buffer becomes live
	OpFree                        // Buffer is released to its pool
	OpRecord                      // record Event on the stream
	OpWait                        // the stream waits for Event
	OpCopyIn                      // cast/copy sharded params into the all-gather buffer
	OpH2D                         // offload: host → device copy
	OpAllGather                   // collective
	OpCopyOut                     // split the all-gather output into unsharded params
	OpReshard                     // int reshard: keep a slice of the unsharded params
	OpForward                     // compute: a forward segment
	OpBackward                    // compute: a backward segment (recompute included)
	OpReduceCopyIn                // chunk-cat gradients into the reduce-scatter input
	OpDivide                      // pre- or post-divide a gradient buffer
	OpReduceScatter               // collective
	OpAllReduce                   // collective
	OpCastGrad                    // cast the reduced shard to the original dtype
	OpAccumulate                  // add into accumulated gradients
	OpD2H                         // offload: device → host copy of the gradient shard
	OpSync                        // the host blocks until Event completes
	OpOptimizer                   // optimizer step on a group's shards
	numOpKinds
)

// ProcessGroup is the set of ranks a collective runs over.
type ProcessGroup uint8

const (
	PGNone        ProcessGroup = iota
	PGShard                    // the shard group (all ranks without HSDP)
	PGReplicate                // HSDP's replicate group
	PGPostForward              // int reshard: N consecutive ranks
	numProcessGroups
)

// Phase is the part of the step an operation belongs to.
type Phase uint8

const (
	PhaseForward Phase = iota
	PhaseBackward
	PhaseOptimizer
	numPhases
)

// Op is one operation of the program. Fields not used by its Kind are -1
// (indices) or zero.
type Op struct {
	Kind   OpKind `json:"kind"`
	Stream Stream `json:"stream"`
	Phase  Phase  `json:"phase"`
	Micro  int32  `json:"micro"`  // micro-batch index
	Group  int32  `json:"group"`  // -1 for none
	Module int32  `json:"module"` // index into Plan.Modules, -1 for none
	Buffer int32  `json:"buffer"` // the buffer written (or allocated, freed), -1 for none
	Source int32  `json:"source"` // the buffer read, -1 for none
	Event  int32  `json:"event"`  // -1 for none
	// PG and PGSize for collectives; DType of the data moved or computed;
	// Bytes moved (collectives: the bytes of the full output on one rank),
	// FLOPs computed.
	PG     ProcessGroup `json:"pg"`
	PGSize int32        `json:"pg_size"`
	DType  ir.DType     `json:"dtype"`
	Reduce ReduceOp     `json:"reduce"`
	Factor float64      `json:"factor"` // divide factor, or PREMUL_SUM factor
	Bytes  int64        `json:"bytes"`
	FLOPs  float64      `json:"flops"`
	// AttnFLOPs is the part of a forward's or backward's FLOPs spent in
	// the attention core; ElemBytes the HBM traffic of its element-wise
	// kernels (norms, activations, RoPE, residual adds), which run at
	// memory speed between the matmuls.
	AttnFLOPs float64 `json:"attn_flops"`
	ElemBytes int64   `json:"elem_bytes"`
	// GEMMs locates (in Plan.GEMMTable; read it with Plan.OpGEMMs) the
	// shapes of a forward's or backward's matrix multiplies, merged by
	// shape and sorted (ir.MergeGEMMs); their FLOPs are part of
	// FLOPs − AttnFLOPs. The cost model charges each by its shape (wave
	// quantisation, memory-bound small N or K); FLOPs of matmuls whose
	// shape is not known run at the flat GEMM efficiency.
	GEMMs Span `json:"-"`
	// Uses locates (in Plan.UseTable; read it with Plan.OpUses) further
	// buffers the op reads: a backward reads its
	// activations and recomputes into a scratch buffer besides reading the
	// unsharded parameters (Source) and writing gradients (Buffer).
	Uses Span `json:"-"`
}
