package torchgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// ExportCommand is the export's "command" under the fsdpc/v1 schema
// (docs/json.md): fsdpc's Python package (python/fsdpc/plan.py) refuses a
// document with another schema or command, and reads only the fields
// below, so Python never decodes plan.bin.
const ExportCommand = "export"

// Export is everything apply_plan and verify_first_step need from a plan
// and the model it was made from (docs/torch.md#the-plan-export).
type Export struct {
	Schema       string `json:"schema"`
	Command      string `json:"command"`
	FsdpcVersion string `json:"fsdpc_version"`
	PlanFormat   int    `json:"plan_format"`
	// Semantics is the FSDP2 release the plan models (schedule.Semantics).
	Semantics string `json:"semantics"`
	// PlanSHA256 identifies the plan: the SHA-256 of its plan.bin
	// encoding (the file's own SHA-256). Every rank compares it at
	// start-up.
	PlanSHA256  string `json:"plan_sha256"`
	Model       string `json:"model"`
	ModelSHA256 string `json:"model_sha256"`
	// Scale is the factor the plan and model were shrunk by (1: as
	// planned); see ExportScaled.
	Scale      int           `json:"scale"`
	Mesh       ExportMesh    `json:"mesh"`
	Train      ExportTrain   `json:"train"`
	Parameters []ExportParam `json:"parameters"`
	// ReduceScatterBuffers is set_reduce_scatter_max_input_buffers' value
	// on the root (1: FSDP2's default, not set).
	ReduceScatterBuffers int `json:"reduce_scatter_buffers"`
	// Environment is what the plan's predictions assume of every rank's
	// environment (Environment): the launch files set it and `python -m
	// fsdpc preflight` names each variable that differs.
	Environment []EnvVar `json:"environment"`
	// Units are the fully_shard calls in the order they are applied:
	// bottom-up, the root last.
	Units []ExportUnit `json:"units"`
	// Collectives are what FSDP2 issues on every rank in the first step,
	// in the plan's program order; collectives over one rank (FSDP2's
	// local copy) are left out.
	Collectives []ExportCollective `json:"collectives"`
}

// ExportMesh is the device mesh the plan assumes: 1-D over Shard ranks,
// or HSDP's 2-D (replicate, shard).
type ExportMesh struct {
	WorldSize   int      `json:"world_size"`
	Shard       int      `json:"shard"`
	Replicate   int      `json:"replicate"`
	Nodes       int      `json:"nodes"`
	GPUsPerNode int      `json:"gpus_per_node"`
	DimNames    []string `json:"dim_names"`
}

// ExportTrain is the step the plan schedules.
type ExportTrain struct {
	MicroBatch int64 `json:"micro_batch"`
	SeqLen     int64 `json:"seq_len"`
	GradAccum  int64 `json:"grad_accum"`
	// AccumulateUnsharded: set_requires_gradient_sync(False) on all but
	// the last micro-batch.
	AccumulateUnsharded bool   `json:"accumulate_unsharded"`
	Optimizer           string `json:"optimizer"`
	// OptimizerImplementation is what the plan priced the step as:
	// "fused" or "foreach" for AdamW, absent for the others and for plans
	// before format 10.
	OptimizerImplementation string `json:"optimizer_implementation,omitempty"`
	// MaxGradNorm is the gradient-norm clipping threshold the step was
	// priced with; absent (0) when it clips nothing, and before format 11.
	MaxGradNorm float64 `json:"max_grad_norm,omitempty"`
}

// ExportParam is one entry of model.named_parameters(), in its order (a
// module's own parameters, then its children's; a tied tensor once, under
// its first name, with its other names as aliases).
type ExportParam struct {
	FQN          string   `json:"fqn"`
	Shape        []int64  `json:"shape"`
	DType        string   `json:"dtype"`
	RequiresGrad bool     `json:"requires_grad"`
	Aliases      []string `json:"aliases"`
}

// ExportUnit is one fully_shard call and the FSDPModule settings made on
// it afterwards.
type ExportUnit struct {
	// Group is the plan's group index: collectives and prefetch lists
	// refer to units by it.
	Group   int      `json:"group"`
	Name    string   `json:"name"` // the module, or "(root)"
	Modules []string `json:"modules"`
	Root    bool     `json:"root"`
	// Params are the parameters FSDP2 puts in the unit's group, in its
	// order; empty for a unit that manages none (docs/semantics.md D13).
	Params []string `json:"params"`
	// ReshardAfterForward is true, false or an int (reshard to that many
	// ranks).
	ReshardAfterForward any                `json:"reshard_after_forward"`
	MixedPrecision      ExportMixed        `json:"mixed_precision"`
	Offload             bool               `json:"offload"`
	PrefetchForward     []int              `json:"prefetch_forward"`
	PrefetchBackward    []int              `json:"prefetch_backward"`
	GradientDivideFact  float64            `json:"gradient_divide_factor"` // 0: not set
	ForceSumReduction   bool               `json:"force_sum_reduction"`
	ShardBytes          int64              `json:"shard_bytes"`
	ParamShards         []ExportParamShard `json:"param_shards"`
}

// ExportMixed is the unit's MixedPrecisionPolicy; an empty dtype is None.
type ExportMixed struct {
	ParamDType        string `json:"param_dtype"`
	ReduceDType       string `json:"reduce_dtype"`
	OutputDType       string `json:"output_dtype"`
	CastForwardInputs bool   `json:"cast_forward_inputs"`
}

// ExportParamShard is one parameter's shard on every rank: padded rows
// per rank on ShardDim, and its elements (the padded shard's numel).
type ExportParamShard struct {
	FQN        string `json:"fqn"`
	ShardDim   int    `json:"shard_dim"`
	ChunkRows  int64  `json:"chunk_rows"`
	ShardNumel int64  `json:"shard_numel"`
}

// ExportCollective is one collective of the first step.
type ExportCollective struct {
	Kind  string `json:"kind"` // all-gather, reduce-scatter, all-reduce
	Micro int    `json:"micro"`
	Phase string `json:"phase"`
	Group int    `json:"group"`
	Unit  string `json:"unit"`
	// Bytes is the larger side on one rank: an all-gather's output, a
	// reduce-scatter's input, an all-reduce's tensor; Numel the same in
	// elements of DType, the dtype FSDP2 passes (uint8 for an all-gather
	// of parameters in several dtypes).
	Bytes        int64   `json:"bytes"`
	Numel        int64   `json:"numel"`
	DType        string  `json:"dtype"`
	Reduce       string  `json:"reduce"` // "" (all-gather), avg, sum, premul-sum
	Factor       float64 `json:"factor"` // premul-sum's factor, else 0
	ProcessGroup string  `json:"process_group"`
	GroupSize    int     `json:"group_size"`
}

// NewExport makes the export of plan p from its spec (Build, and
// ScalePlan for a scaled plan); scale is the factor both were shrunk by.
func NewExport(spec *Spec, p *schedule.Plan, scale int) (*Export, error) {
	if len(spec.Groups) != len(p.Groups) {
		return nil, fmt.Errorf("internal error: the spec has %d groups, the plan %d", len(spec.Groups), len(p.Groups))
	}
	bin, err := schedule.Encode(p)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(bin)
	c := p.Cluster
	e := &Export{
		Schema: "fsdpc/v1", Command: ExportCommand, FsdpcVersion: p.Header.FsdpcVersion, PlanFormat: schedule.FormatVersion,
		Semantics: p.Header.Semantics, PlanSHA256: hex.EncodeToString(sum[:]), Model: p.Header.Model, ModelSHA256: p.Header.InputSHA256,
		Scale: scale,
		Mesh: ExportMesh{WorldSize: spec.World, Shard: spec.Shard, Replicate: spec.Replicate, GPUsPerNode: c.GPUsPerNode,
			DimNames: []string{"shard"}},
		Train: ExportTrain{MicroBatch: p.Train.MicroBatch, SeqLen: p.Train.SeqLen, GradAccum: max(p.Train.GradAccum, 1),
			AccumulateUnsharded: p.Train.AccumulateUnsharded, Optimizer: p.Train.Optimizer,
			OptimizerImplementation: p.Train.OptimizerImplementation, MaxGradNorm: p.Train.MaxGradNorm},
		ReduceScatterBuffers: max(spec.ReduceScatterBuffers, 1),
		Environment:          Environment(p),
	}
	if c.GPUsPerNode > 0 {
		e.Mesh.Nodes = (c.WorldSize + c.GPUsPerNode - 1) / c.GPUsPerNode
	}
	if spec.Replicate > 1 {
		e.Mesh.DimNames = []string{"replicate", "shard"}
	}
	e.Parameters = exportParams(spec.Model)
	order := make([]int, len(p.Groups))
	for i := range order {
		order[i] = i
	}
	// fully_shard bottom-up: a unit's parameters are those not already
	// under a nested unit, so deeper units go first and the root last.
	sort.SliceStable(order, func(a, b int) bool {
		ga, gb := p.Groups[order[a]], p.Groups[order[b]]
		if ga.Root != gb.Root {
			return gb.Root
		}
		return depth(ga.Modules) > depth(gb.Modules)
	})
	for _, gi := range order {
		g, gs := &p.Groups[gi], spec.Groups[gi]
		u := ExportUnit{Group: gi, Name: g.Label(), Modules: append([]string{}, g.Modules...), Root: g.Root,
			Params: []string{}, ReshardAfterForward: gs.Reshard, Offload: gs.Offload,
			PrefetchForward: append([]int{}, gs.PrefetchForward...), PrefetchBackward: append([]int{}, gs.PrefetchBackward...),
			GradientDivideFact: gs.DivideFactor, ForceSumReduction: gs.ForceSum, ShardBytes: g.ShardBytes,
			ParamShards: []ExportParamShard{}}
		u.MixedPrecision.CastForwardInputs = g.Policy.CastForwardInputs
		if len(g.Params) > 0 {
			u.MixedPrecision.ParamDType, u.MixedPrecision.ReduceDType = gs.ParamDType, gs.ReduceDType
			if g.Policy.Output != ir.DTypeInvalid {
				u.MixedPrecision.OutputDType = g.Policy.Output.String()
			}
		}
		for _, gp := range g.Params {
			u.Params = append(u.Params, gp.Name)
			u.ParamShards = append(u.ParamShards, ExportParamShard{FQN: gp.Name, ShardDim: gp.ShardDim, ChunkRows: gp.ChunkRows, ShardNumel: gp.ShardNumel})
		}
		e.Units = append(e.Units, u)
	}
	e.Collectives = []ExportCollective{}
	for _, op := range p.Ops {
		kind := op.Kind.String()
		if (op.Kind != schedule.OpAllGather && op.Kind != schedule.OpReduceScatter && op.Kind != schedule.OpAllReduce) || op.PGSize <= 1 {
			continue
		}
		if op.Group < 0 || int(op.Group) >= len(p.Groups) {
			return nil, fmt.Errorf("%s op of no group (group %d)", kind, op.Group)
		}
		g := &p.Groups[op.Group]
		dt := op.DType
		if op.Kind == schedule.OpAllGather {
			dt = gatherDType(g)
		}
		size := dt.Size()
		if size <= 0 || op.Bytes%size != 0 {
			return nil, fmt.Errorf("%s of group %s: %d bytes is not a whole number of %s elements", kind, g.Label(), op.Bytes, dt)
		}
		col := ExportCollective{Kind: kind, Micro: int(op.Micro), Phase: op.Phase.String(), Group: int(op.Group), Unit: g.Label(),
			Bytes: op.Bytes, Numel: op.Bytes / size, DType: dt.String(), ProcessGroup: op.PG.String(), GroupSize: int(op.PGSize)}
		if op.Kind != schedule.OpAllGather {
			col.Reduce = op.Reduce.String()
			if op.Reduce == schedule.ReducePremulSum {
				col.Factor = op.Factor
			}
		}
		e.Collectives = append(e.Collectives, col)
	}
	return e, nil
}

// gatherDType is the dtype of a group's all-gather as FSDP2 issues it:
// the parameters' common gather dtype, or bytes (uint8) when they differ.
func gatherDType(g *schedule.Group) ir.DType {
	if len(g.Params) == 0 {
		return g.Policy.Param
	}
	dt := g.Params[0].GatherDType
	for _, gp := range g.Params[1:] {
		if gp.GatherDType != dt {
			return ir.UINT8
		}
	}
	return dt
}

func depth(modules []string) int {
	d := 0
	for _, m := range modules {
		n := 0
		if m != "" {
			n = strings.Count(m, ".") + 1
		}
		d = max(d, n)
	}
	return d
}

// exportParams lists the model's parameters in named_parameters() order:
// registration order, a module's own parameters first, a tied tensor once.
func exportParams(root Node) []ExportParam {
	out := []ExportParam{}
	index := map[string]int{}
	var walk func(n *Node)
	walk = func(n *Node) {
		for _, p := range n.Params {
			if p.Tied != "" {
				if i, ok := index[p.Tied]; ok {
					out[i].Aliases = append(out[i].Aliases, p.FQN)
					continue
				}
			}
			index[p.FQN] = len(out)
			out = append(out, ExportParam{FQN: p.FQN, Shape: append([]int64{}, p.Shape...), DType: p.DType, RequiresGrad: p.Grad, Aliases: []string{}})
		}
		for i := range n.Children {
			walk(&n.Children[i])
		}
	}
	walk(&root)
	return out
}

// ScalePlan shrinks a plan and the model spec built from it together, by
// k on every dimension, for `emit torch --scale` and `run --backend torch
// --scale`: the plan as `run --backend cuda --scale` shrinks it
// (executor.Scale keeps the groups, the program and each parameter's
// pattern of rows per rank, and resizes every collective), and the model's
// parameters to the scaled plan's shapes, so both describe one smaller
// model whose FSDP2 run the scaled plan predicts.
func ScalePlan(m *ir.Model, p *schedule.Plan, k int) (*schedule.Plan, *Spec, error) {
	q := p
	if k != 1 {
		var err error
		if q, _, err = executor.Scale(p, k); err != nil {
			return nil, nil, err
		}
	}
	s, err := Build(m, q)
	if err != nil {
		return nil, nil, err
	}
	shapes := map[string][]int64{}
	for _, g := range q.Groups {
		for _, gp := range g.Params {
			shapes[gp.Name] = gp.Shape
			for _, a := range gp.Aliases {
				shapes[a] = gp.Shape
			}
		}
	}
	var missing []string
	var walk func(n *Node)
	walk = func(n *Node) {
		for i := range n.Params {
			sh, ok := shapes[n.Params[i].FQN]
			if !ok {
				missing = append(missing, n.Params[i].FQN)
				continue
			}
			n.Params[i].Shape = append([]int64{}, sh...)
		}
		for i := range n.Children {
			walk(&n.Children[i])
		}
	}
	walk(&s.Model)
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("the plan has no parameter %s of the model", strings.Join(missing, ", "))
	}
	return q, s, nil
}
