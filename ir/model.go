package ir

import "fmt"

// ModuleID indexes Model.Modules. The root module is always 0.
type ModuleID int32

// ParamID indexes Model.Params.
type ParamID int32

// NoParam marks a parameter that is not tied to another.
const NoParam ParamID = -1

// NoModule is the parent of the root.
const NoModule ModuleID = -1

// Model is the lowered, validated model: what every later stage reads. It
// is immutable once Load returns; passes that need to change something copy
// it first.
type Model struct {
	Name string
	// File is the path the model was read from, SourceHash the SHA-256 of its
	// bytes (hex), so a plan can say exactly which input it was made from.
	File       string
	SourceHash string

	// Modules in declaration pre-order: a parent comes before its children,
	// siblings in the order they were declared. Modules[0] is the root.
	Modules []Module
	// Params in declaration order (module pre-order, then the module's own
	// parameters in the order its kind or its [[param]] entries give them).
	Params []Param
	// Forward lists the compute modules in forward execution order: a
	// topological order of the dataflow graph in which the module declared
	// first runs first whenever the graph leaves the choice open.
	Forward []ModuleID

	Train   Train
	Cluster Cluster
	Policy  Policy

	// MFU is what model FLOPs utilization counts of the model (mfu.go).
	MFU MFUCounts

	// Warnings found while lowering; they do not stop anything.
	Warnings Diagnostics

	src []byte // the source, for Relower
	// locs places every key of the source (locate), for KeyPos.
	locs map[string]location
	// changed is what Relower changed in the source's settings, applied
	// again first by a later Relower or Resized of this model.
	changed func(*Model)
	// repeats replace the declared counts of repeated modules, by name
	// (Resized); nil for a model as its file declares it.
	repeats map[string]int
}

// Module is one node of the module tree, named like PyTorch's
// named_modules(): "layers.3.attention.wq".
type Module struct {
	ID       ModuleID
	Name     string // dotted name; "" for the root
	Kind     Kind
	Parent   ModuleID
	Children []ModuleID
	// Registered is Children in the order PyTorch registers them (the
	// model's `register` key), when that differs from the declaration
	// order, which is the order of execution; nil otherwise. FSDP2's
	// parameter order follows registration (children() and
	// named_parameters).
	Registered []ModuleID
	// Params are the module's own parameters (named_parameters(recurse=False)).
	Params []ParamID

	// Repeat is N for a module declared with repeat = N: its children are the
	// N instances "name.0" … "name.N-1". Instance is the index of a module
	// that is one such instance, -1 otherwise.
	Repeat   int
	Instance int
	// Varied marks a repeat whose instances are not all one block (a
	// `blocks` pattern such as DeepSeek's dense, then MoE layers): one
	// instance does not stand for the others.
	Varied bool
	// Block is the [block.NAME] an instance was made from, "" for a
	// module that is no instance or an instance written inline.
	Block string

	// Compute marks the nodes of the dataflow graph: modules of a kind with a
	// cost formula, modules with explicit costs, and parameter-only leaves.
	// Children of a compute module only hold parameters.
	Compute bool
	// Inputs are the compute modules whose outputs this one reads, in the
	// order they were named. Only compute modules have inputs.
	Inputs []ModuleID
	// InputsRequireGrad is false when nothing that flows into the module
	// needs a gradient (token ids, or only frozen modules upstream). FSDP2
	// never fires such a module's post-backward hook from autograd.
	InputsRequireGrad bool
	// OutputRequiresGrad is true when the module's output carries a gradient.
	OutputRequiresGrad bool
	// OwnOutput marks a container whose forward returns a tensor it
	// computes from its children's outputs (torchtitan's TransformerBlock
	// returns h + feed_forward(ffn_norm(h))), the model's `output = "own"`;
	// otherwise a container returns its children's tensors unchanged
	// (nn.Sequential, a Transformer returning output(h)). FSDP2 registers
	// each unit's pre-backward hook on the tensors its forward returns, so
	// this decides which unit's hook backward reaches first.
	OwnOutput bool

	// Checkpoint marks an activation-checkpoint region: its activations are
	// dropped after forward and recomputed in backward.
	Checkpoint bool

	// Cost is per micro-batch on one rank. For a compute module it is the
	// module's own cost; for any other module the sum over its descendants.
	Cost Cost

	Pos Pos // where the module was declared
}

// Cost is the work and memory of one module for one micro-batch on one rank.
type Cost struct {
	FlopsFwd float64
	// FlopsBwd includes FlopsRecompute when the module is recomputed.
	FlopsBwd       float64
	FlopsRecompute float64
	// ActivationBytes is what forward saves for backward under the
	// configured checkpointing.
	ActivationBytes int64
	// RecomputeBytes is, for a checkpoint region, the activations rebuilt
	// transiently while the region's backward runs; for a module holding
	// regions, the largest of theirs.
	RecomputeBytes int64
	// AttnFlopsFwd and AttnFlopsBwd are the parts of FlopsFwd and FlopsBwd
	// spent in the attention core (QKᵀ and PV), which runs at
	// FlashAttention's efficiency, not a GEMM's.
	AttnFlopsFwd, AttnFlopsBwd float64
	// ElemBytesFwd and ElemBytesBwd are the HBM traffic of the
	// memory-bound, element-wise kernels (norms, activations, RoPE,
	// residual adds, layout copies) in forward and in backward's own
	// gradient kernels; ElemBytesRecompute is the forward kernels backward
	// reruns under activation checkpointing. It is kept apart from
	// ElemBytesBwd because forward kernels reach a larger share of HBM
	// bandwidth than gradient kernels (hardware/elementwise.go).
	ElemBytesFwd, ElemBytesBwd, ElemBytesRecompute int64
	// ScratchBwd is memory the module's backward allocates and frees
	// while it runs (the loss's logit gradients).
	ScratchBwd int64
	// GEMMsFwd and GEMMsBwd are the shapes of the module's matrix
	// multiplies in forward and in backward (input and weight gradients,
	// and the recomputed forward under checkpointing), merged by shape.
	// Their FLOPs are part of FlopsFwd and FlopsBwd; FLOPs of matmuls
	// whose shape is not known (explicit flops) are not listed. Only
	// compute modules carry them: containers do not sum them.
	GEMMsFwd, GEMMsBwd []GEMM
}

func (c *Cost) add(o Cost) {
	c.FlopsFwd += o.FlopsFwd
	c.FlopsBwd += o.FlopsBwd
	c.FlopsRecompute += o.FlopsRecompute
	c.AttnFlopsFwd += o.AttnFlopsFwd
	c.AttnFlopsBwd += o.AttnFlopsBwd
	c.ElemBytesFwd = satAdd(c.ElemBytesFwd, o.ElemBytesFwd)
	c.ElemBytesBwd = satAdd(c.ElemBytesBwd, o.ElemBytesBwd)
	c.ElemBytesRecompute = satAdd(c.ElemBytesRecompute, o.ElemBytesRecompute)
	c.ScratchBwd = max(c.ScratchBwd, o.ScratchBwd)
	c.ActivationBytes = satAdd(c.ActivationBytes, o.ActivationBytes)
	// Regions recompute one at a time: above them the figure is the largest.
	c.RecomputeBytes = max(c.RecomputeBytes, o.RecomputeBytes)
}

// Param is one parameter tensor.
type Param struct {
	ID     ParamID
	Name   string // full dotted name: "layers.0.attention.wq.weight"
	Module ModuleID
	Local  string // name inside its module: "weight"
	Shape  []int64
	DType  DType
	// RequiresGrad is false for frozen parameters.
	RequiresGrad bool
	// TiedTo is the parameter this one is the same tensor as, or NoParam.
	// A tied parameter is an alias: it holds no storage of its own and is
	// counted once, under the parameter it is tied to.
	TiedTo ParamID
	Numel  int64
	Pos    Pos
}

// Bytes is the parameter's size in its own dtype.
func (p *Param) Bytes() int64 { return p.Numel * p.DType.Size() }

// Checkpointing is the activation-checkpointing mode of training.
type Checkpointing uint8

// The modes are named as torchtitan names them (activation_checkpoint.mode
// and selective_ac_option): full recomputes every block; selective-op keeps
// what torchtitan's per-op policy keeps (every other matmul's output and
// the attention core's, see opSAC) and recomputes the rest;
// selective-layer fully checkpoints every
// CheckpointInterval-th block and keeps everything of the others.
const (
	CheckpointNone Checkpointing = iota
	CheckpointFull
	CheckpointSelective
	CheckpointSelectiveLayer
)

// CheckpointingModes maps the model format's names to the modes.
var CheckpointingModes = map[string]Checkpointing{"none": CheckpointNone, "full": CheckpointFull,
	"selective-op": CheckpointSelective, "selective-layer": CheckpointSelectiveLayer}

func (c Checkpointing) String() string {
	return [...]string{"none", "full", "selective-op", "selective-layer"}[c]
}

// CheckpointingUnused is true when [train] checkpointing asks for
// checkpointing yet no module is a region: the mode applies to the
// instances of repeated modules, and a model whose layers are written one
// by one would otherwise be planned, and keep its activations, as if it
// said "none".
func (m *Model) CheckpointingUnused() bool {
	if m.Train.Checkpointing == CheckpointNone {
		return false
	}
	for i := range m.Modules {
		if m.Modules[i].Checkpoint {
			return false
		}
	}
	return true
}

// CheckpointingUnusedMessage says what CheckpointingUnused found and how
// to fix it.
func (m *Model) CheckpointingUnusedMessage() string {
	return fmt.Sprintf("train.checkpointing = %q matches no module: it checkpoints the instances of repeated modules (repeat = N), and no instance here is checkpointed, so nothing is recomputed and every activation is kept as with \"none\"; write the layers as a repeat (blocks = [...] when they differ) or mark modules checkpoint = true", m.Train.Checkpointing)
}

// Train is the training setup; sizes are per rank.
type Train struct {
	MicroBatch int64 // sequences per micro-batch per rank
	SeqLen     int64
	GradAccum  int64 // micro-batches per optimizer step
	// AccumulateUnsharded skips gradient reduction on all but the last
	// micro-batch (FSDP2's set_requires_gradient_sync(False)), keeping
	// unsharded gradients meanwhile; otherwise every micro-batch
	// reduce-scatters and sharded gradients accumulate (FSDP2's default).
	AccumulateUnsharded bool
	Checkpointing       Checkpointing
	// CheckpointInterval: under selective-layer, every this-many-th block
	// (the 2nd, 4th, … with 2) is checkpointed.
	CheckpointInterval int64
	// CheckpointingSet is true when the file chose checkpointing; the
	// autotuner only decides it otherwise.
	CheckpointingSet bool
	Optimizer        string
	// OptimizerStateBytes per trainable parameter element (AdamW in fp32: 8).
	OptimizerStateBytes int64
	// OptimizerForeach: the optimizer runs PyTorch's foreach
	// implementation (foreach=True, PyTorch's own default on CUDA), a
	// chain of element-wise passes, instead of one fused kernel
	// (fused=True). Only AdamW is modelled that way (optimizerTraffic).
	OptimizerForeach bool
	// MaxGradNorm is the threshold of gradient-norm clipping before every
	// optimizer step (torch.nn.utils.clip_grad_norm_, FSDP1's
	// FullyShardedDataParallel.clip_grad_norm_); 0, the default, clips
	// nothing. The cost does not depend on the figure: the norm's pass and
	// the multiply by the clamped coefficient run whatever it is
	// (optimizerTraffic's clipping passes).
	MaxGradNorm float64
	// ActivationDType is the dtype activations are held in.
	ActivationDType DType
	// Compile: the model runs under torch.compile, which fuses the
	// element-wise work around the matmuls (norms, activations, RoPE,
	// residual adds) into fewer passes over memory.
	Compile bool
	// AttentionKernel is the fused attention kernel SDPA runs: "flash2"
	// (FlashAttention-2, the default) or "cudnn" (cuDNN's fused attention;
	// attention.go).
	AttentionKernel string
	// ExpandableSegments: the run sets PyTorch's
	// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (default false, as
	// in PyTorch).
	ExpandableSegments bool
}

// Tokens is the number of tokens in one micro-batch on one rank.
func (t Train) Tokens() int64 { return t.MicroBatch * t.SeqLen }

// Cluster is the hardware the plan targets.
type Cluster struct {
	GPU         GPU
	GPUsPerNode int
	WorldSize   int
	// Mesh is the 2-D HSDP mesh, or nil for plain FSDP over all ranks.
	Mesh *Mesh
	// Bandwidths are per GPU, one direction, in bytes per second.
	IntraNodeBandwidth float64
	InterNodeBandwidth float64
	// MemoryBudget is what a rank may use, in bytes.
	MemoryBudget int64
	// HostBandwidth is the host-device link (PCIe) per GPU, one direction.
	HostBandwidth float64
	// Profile is the hardware profile the cluster names (fitted cost-model
	// constants), sorted by name; nil for the GPU's built-in one.
	Profile []ProfileValue
}

// Mesh is an HSDP device mesh: Replicate × Shard = world size. As in
// FSDP2, dim 0 replicates and dim 1 shards.
type Mesh struct {
	Replicate int
	Shard     int
}

// ShardSize is the size of the group parameters are sharded over.
func (c *Cluster) ShardSize() int {
	if c.Mesh != nil {
		return c.Mesh.Shard
	}
	return c.WorldSize
}

// Nodes is the number of hosts.
func (c *Cluster) Nodes() int { return (c.WorldSize + c.GPUsPerNode - 1) / c.GPUsPerNode }

// GPU holds the figures of one accelerator.
type GPU struct {
	Name string
	// Preset is the GPU preset the figures start from ("h100-sxm"), ""
	// for a GPU given only as figures. A preset GPU given another name
	// keeps the preset's chip: its fitted profile and SM count.
	Preset string
	// PeakFLOPS is the dense peak rate per dtype, in FLOP/s; 0 where the GPU
	// has no such rate.
	PeakFLOPS    [len(dtypeInfo)]float64
	HBMBytes     int64
	HBMBandwidth float64 // bytes per second
}

// UnitsMode says how the policy picks FSDP units.
type UnitsMode uint8

const (
	// UnitsBlocks makes each instance of a repeated module a unit and gives
	// the rest to the root, as FSDP2 users wrap transformer blocks.
	UnitsBlocks UnitsMode = iota
	// UnitsAuto leaves the choice to the planner.
	UnitsAuto
	// UnitsPatterns makes every module matched by Policy.Units a unit.
	UnitsPatterns
	// UnitsBlockChildren makes each child of each instance a unit (the
	// attention and the MLP of a transformer block separately).
	UnitsBlockChildren
)

func (u UnitsMode) String() string {
	return [...]string{"blocks", "auto", "patterns", "block-children"}[u]
}

// TiedMode says what to do with tied parameters that land in different
// units.
type TiedMode uint8

const (
	TiedError TiedMode = iota // reject, naming both parameters
	TiedMerge                 // merge the units into one group
)

func (t TiedMode) String() string { return [...]string{"error", "merge"}[t] }

// Policy is what the user fixed; everything left unset the planner decides.
type Policy struct {
	UnitsMode UnitsMode
	Units     []Pattern // for UnitsPatterns
	// Groups are the units written as arrays inside units: each is one
	// unit of every module its patterns match, one fully_shard([a, b])
	// call (accelerate shards the final norm and the output embedding
	// together so).
	Groups []UnitGroup
	// BlocksPerUnit groups k consecutive instances of a repeated module
	// into one unit (fully_shard([layers[i], …, layers[i+k-1]])); 1 is the
	// default, one unit per instance.
	BlocksPerUnit int
	// ReduceScatterBuffers is how many reduce-scatter inputs may be in
	// flight before backward compute waits for the oldest: FSDP2 keeps 1
	// (pytorch PR #186000 proposes more).
	ReduceScatterBuffers int
	Tied                 TiedMode
	// Default applies to every unit; Overrides apply in order to the units
	// whose module name they match, later ones winning field by field.
	Default   GroupPolicy
	Overrides []Override
}

// Pattern is a module-name glob with the place it was written.
type Pattern struct {
	Glob Glob
	Pos  Pos
}

// UnitGroup is one fully_shard call on several modules.
type UnitGroup struct {
	Patterns []Pattern
}

// Override is one [[policy.override]] entry.
type Override struct {
	Match Pattern
	GroupPolicy
}

// GroupPolicy holds per-unit settings. A nil pointer or DTypeInvalid means
// "not set".
type GroupPolicy struct {
	ReshardAfterForward *Reshard
	PrefetchForward     *int
	PrefetchBackward    *int
	ParamDType          DType
	ReduceDType         DType
	OutputDType         DType
	CastForwardInputs   *bool
	Offload             *bool
	// GradientDivideFactor is FSDP2's set_gradient_divide_factor.
	GradientDivideFactor *float64
	// ForceSumReduction is FSDP2's set_force_sum_reduction_for_comms.
	ForceSumReduction *bool
	// ShardDim is the dimension parameters are sharded on (FSDP2's
	// shard_placement_fn returning Shard(i)); parameters with fewer
	// dimensions stay on dim 0.
	ShardDim *int
}

// Reshard is reshard_after_forward: true, false, or an int N (reshard to N
// ranks, ZeRO++ hpZ style).
type Reshard struct {
	Bool bool // when N == 0
	N    int
}

func (r Reshard) String() string {
	if r.N != 0 {
		return itoa(r.N)
	}
	if r.Bool {
		return "true"
	}
	return "false"
}

// RegisteredChildren returns a module's children in registration order.
func (m *Model) RegisteredChildren(id ModuleID) []ModuleID {
	if r := m.Modules[id].Registered; r != nil {
		return r
	}
	return m.Modules[id].Children
}

// OptimizerImplementation names the implementation the optimizer's step
// is priced as (the planner's optimizerTraffic): AdamW's fused kernel or
// its foreach passes; "" for the optimizers priced one way only.
func (t Train) OptimizerImplementation() string {
	switch {
	case t.Optimizer != "adamw":
		return ""
	case t.OptimizerForeach:
		return "foreach"
	}
	return "fused"
}

// OptimizerLabel is how the text forms (plan text, inspect) name an
// optimizer step: "adamw fused, clipping at norm 1".
func OptimizerLabel(optimizer, implementation string, maxGradNorm float64) string {
	if implementation != "" {
		optimizer += " " + implementation
	}
	if maxGradNorm > 0 {
		optimizer += fmt.Sprintf(", clipping at norm %g", maxGradNorm)
	}
	return optimizer
}
