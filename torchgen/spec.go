// Package torchgen turns a model and its plan into a PyTorch program and
// checks what real FSDP2 does against the plan: the model as nn.Modules
// (registration order, ties, frozen parameters), the plan applied with
// fully_shard, and a record of every collective and shard layout. It is
// its own stage because it reads both the IR (the module tree the plan no
// longer holds) and the plan, and writes Python rather than a schedule.
package torchgen

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

//go:embed harness.py
var harness string

// Harness is the Python program that builds, shards and runs a spec.
func Harness() string { return harness }

// Spec is what the harness reads: the module tree and the plan's groups.
type Spec struct {
	World               int       `json:"world"`
	Replicate           int       `json:"replicate"`
	Shard               int       `json:"shard"`
	GradAccum           int64     `json:"grad_accum"`
	AccumulateUnsharded bool      `json:"accumulate_unsharded"`
	Model               Node      `json:"model"`
	Groups              []GroupSp `json:"groups"`
	// ReduceScatterBuffers, when above 1, is the plan's
	// reduce_scatter_buffers: FSDP2 2.14's
	// set_reduce_scatter_max_input_buffers on the root (experimental in
	// torch; 1 is FSDP2's default).
	ReduceScatterBuffers int `json:"reduce_scatter_buffers,omitempty"`
	// Checkpoint, when set, names the optimizer: the harness takes its
	// step and saves the state with torch.distributed.checkpoint, and rank
	// 0 records DCP's metadata (CompareCheckpoint).
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Node is one module: children in registration order, Exec their local
// names in declaration (execution) order. The model's dataflow runs
// through forward's arguments, as in a real model, so FSDP2's hooks see
// what each module reads: Ext names (by compute module) the tensors from
// outside the subtree its compute modules read, in the order forward takes
// them; Outs the compute modules whose outputs leave the subtree, in the
// order forward returns them (for the root: the model's outputs, which
// the loss sums). A compute module's Ext are its inputs; none means it
// reads the batch (token ids, positions).
type Node struct {
	Name     string   `json:"name"`
	Compute  bool     `json:"compute,omitempty"`
	Children []Node   `json:"children,omitempty"`
	Exec     []string `json:"exec,omitempty"`
	Ext      []string `json:"ext,omitempty"`
	Outs     []string `json:"outs,omitempty"`
	// OwnOutput: forward returns tensors of its own made from Outs (the
	// model's output = "own"); otherwise Outs' tensors themselves.
	OwnOutput bool        `json:"own_output,omitempty"`
	Params    []ParamSpec `json:"params,omitempty"`
}

// ParamSpec is one parameter; Tied names the tensor it shares.
type ParamSpec struct {
	Name  string  `json:"name"`
	FQN   string  `json:"fqn"`
	Shape []int64 `json:"shape"`
	DType string  `json:"dtype"`
	Grad  bool    `json:"grad"`
	Tied  string  `json:"tied,omitempty"`
}

// GroupSp is one fully_shard call.
type GroupSp struct {
	Modules     []string `json:"modules"`
	Root        bool     `json:"root"`
	Reshard     any      `json:"reshard"` // true, false or an int
	ParamDType  string   `json:"param_dtype,omitempty"`
	ReduceDType string   `json:"reduce_dtype,omitempty"`
	Offload     bool     `json:"offload,omitempty"`
	// Explicit prefetch: the groups (indices into Groups) this one
	// unshards after its own all-gather in forward, or at its
	// pre-backward; none means FSDP2's implicit prefetch.
	PrefetchForward  []int `json:"prefetch_forward,omitempty"`
	PrefetchBackward []int `json:"prefetch_backward,omitempty"`
	// DivideFactor is set_gradient_divide_factor's argument where the plan
	// divides by anything but the data-parallel size; ForceSum is
	// set_force_sum_reduction_for_comms(True).
	DivideFactor float64 `json:"divide_factor,omitempty"`
	ForceSum     bool    `json:"force_sum,omitempty"`
}

// Build makes the harness's spec for a model and the plan made from it. It
// refuses what the harness cannot express yet, naming it.
func Build(m *ir.Model, p *schedule.Plan) (*Spec, error) {
	if m.SourceHash != p.Header.InputSHA256 {
		return nil, fmt.Errorf("the plan was made from a different model file (input sha256 %.12s, this model %.12s)", p.Header.InputSHA256, m.SourceHash)
	}
	s := &Spec{World: p.Cluster.WorldSize, Replicate: p.Cluster.Replicate, Shard: p.Cluster.Shard,
		GradAccum: p.Train.GradAccum, AccumulateUnsharded: p.Train.AccumulateUnsharded}
	if s.Replicate < 1 {
		s.Replicate = 1
	}
	if s.Shard < 1 {
		s.Shard = s.World
	}
	root, err := mirror(m)
	if err != nil {
		return nil, err
	}
	if err := checkOwnParamsOutput(m, p); err != nil {
		return nil, err
	}
	s.Model = root
	if n := m.Policy.ReduceScatterBuffers; n > 1 {
		s.ReduceScatterBuffers = n
	}
	fwd, bwd, err := planner.PrefetchTargets(m, p)
	if err != nil {
		return nil, err
	}
	for gi, g := range p.Groups {
		pol := g.Policy
		gs := GroupSp{Modules: g.Modules, Root: g.Root, Offload: pol.Offload, PrefetchForward: fwd[gi], PrefetchBackward: bwd[gi]}
		if len(g.Params) > 0 {
			// A group with no parameters has no dtypes (FSDP2 makes no
			// parameter group for it; docs/semantics.md D13): the
			// default MixedPrecisionPolicy.
			gs.ParamDType, gs.ReduceDType = pol.Param.String(), pol.Reduce.String()
		}
		gs.DivideFactor, gs.ForceSum = divideSettings(pol, s.Shard, s.Replicate)
		switch pol.Reshard {
		case schedule.ReshardTrue:
			gs.Reshard = true
		case schedule.ReshardFalse:
			gs.Reshard = false
		default:
			gs.Reshard = pol.ReshardTo
		}
		s.Groups = append(s.Groups, gs)
	}
	return s, nil
}

// checkOwnParamsOutput refuses what the mirror cannot run as the plan
// assumes: the mirror adds a container's own parameters to what it
// returns (they get their gradient that way), which makes its output a
// tensor of its own; where the model says output = "child" and a unit's
// output runs through such a container at a module where another unit
// ends too, the pre-backward order would differ from the plan's.
func checkOwnParamsOutput(m *ir.Model, p *schedule.Plan) error {
	pos := make(map[ir.ModuleID]int, len(m.Forward))
	for i, id := range m.Forward {
		pos[id] = i
	}
	type end struct{ unit, last ir.ModuleID }
	var ends []end
	count := map[ir.ModuleID]int{}
	for _, g := range p.Groups {
		e := end{last: ir.NoModule}
		for _, name := range g.Modules {
			id, err := m.ModuleByName(name)
			if err != nil {
				return fmt.Errorf("group %s: %w", g.Label(), err)
			}
			for _, c := range m.Forward {
				if within(m, c, id) && (e.last == ir.NoModule || pos[c] > pos[e.last]) {
					e = end{unit: id, last: c}
				}
			}
		}
		if e.last != ir.NoModule {
			ends = append(ends, e)
			count[e.last]++
		}
	}
	for _, e := range ends {
		if count[e.last] < 2 {
			continue
		}
		for a := m.Modules[e.last].Parent; a != ir.NoModule && within(m, a, e.unit); a = m.Modules[a].Parent {
			if mod := &m.Modules[a]; !mod.OwnOutput && len(mod.Params) > 0 {
				return fmt.Errorf("module %q has parameters of its own and returns its child's tensor (output = \"child\"), where units end together: the torch mirror adds its parameters to its output, which would make that tensor its own; set output = \"own\" or move the parameters into a child", mod.Name)
			}
		}
	}
	return nil
}

// within reports whether module a is anc or inside it.
func within(m *ir.Model, a, anc ir.ModuleID) bool {
	for ; a != ir.NoModule; a = m.Modules[a].Parent {
		if a == anc {
			return true
		}
	}
	return false
}

// divideSettings recovers the FSDPModule settings that make FSDP2 choose
// the plan's reduce ops and divide factors (the planner's divideFactors
// run backwards): a factor other than the data-parallel size dp, and a
// sum forced where FSDP2 would average.
func divideSettings(pol schedule.GroupPolicy, shard, replicate int) (factor float64, forceSum bool) {
	dp := shard * replicate
	f := float64(dp)
	switch pol.ReduceScatterOp {
	case schedule.ReduceAvg:
		// Under HSDP a factor equal to the shard group's size averages
		// the reduce-scatter and sums the all-reduce.
		if replicate > 1 && pol.AllReduceOp == schedule.ReduceSum {
			f = float64(shard)
		}
	case schedule.ReducePremulSum:
		// Never FSDP2's default, even when 1/f is the data-parallel
		// size (HSDP: the default averages both collectives).
		return 1 / pol.PremulFactor, false
	case schedule.ReduceSum:
		// fp32 and bf16 average unless sums are forced; other reduce
		// dtypes always sum (overflow), dividing before and after.
		forceSum = dp > 1 && (pol.Reduce == ir.FP32 || pol.Reduce == ir.BF16)
		if pol.PreDivide*pol.PostDivide != 1 || dp > 1 {
			f = pol.PreDivide * pol.PostDivide
		}
	}
	if f != float64(dp) {
		factor = f
	}
	return factor, forceSum
}

func node(m *ir.Model, id ir.ModuleID, df *dataflow) Node {
	mod := &m.Modules[id]
	n := Node{Name: mod.Name[strings.LastIndexByte(mod.Name, '.')+1:], Compute: mod.Compute, Ext: df.ext[id], Outs: df.outs[id],
		OwnOutput: mod.OwnOutput}
	for _, c := range m.RegisteredChildren(id) {
		n.Children = append(n.Children, node(m, c, df))
	}
	for _, c := range mod.Children {
		n.Exec = append(n.Exec, m.Modules[c].Name[strings.LastIndexByte(m.Modules[c].Name, '.')+1:])
	}
	if mod.Compute {
		n.Exec = nil // a compute module's children only hold parameters
	}
	for _, pid := range mod.Params {
		p := &m.Params[pid]
		ps := ParamSpec{Name: p.Local, FQN: p.Name, Shape: p.Shape, DType: p.DType.String(), Grad: p.RequiresGrad}
		if p.TiedTo != ir.NoParam {
			ps.Tied = m.Params[p.TiedTo].Name
		}
		n.Params = append(n.Params, ps)
	}
	return n
}

// JSON is the spec as the harness reads it.
func (s *Spec) JSON() ([]byte, error) { return json.MarshalIndent(s, "", " ") }

// BuildModel makes a spec of the model alone, for `fsdpc emit torch
// --model`: build_model() works, apply_plan has no groups to apply.
func BuildModel(m *ir.Model) (*Spec, error) {
	root, err := mirror(m)
	if err != nil {
		return nil, err
	}
	return &Spec{World: m.Cluster.WorldSize, Replicate: 1, Shard: m.Cluster.WorldSize, GradAccum: m.Train.GradAccum, Model: root}, nil
}

// Scale shrinks every parameter dimension of a model-only spec by k
// (rounding up), for `fsdpc emit torch --model --scale K`: the modules,
// names, registration order, ties and dtypes stay; only sizes change. A
// spec with a plan's groups is refused: the plan fixes its shapes.
func (s *Spec) Scale(k int) error {
	if k < 1 {
		return fmt.Errorf("scale %d: it must be at least 1", k)
	}
	if len(s.Groups) > 0 {
		return fmt.Errorf("--scale applies to a model alone: a plan fixes its parameters' shapes")
	}
	var walk func(n *Node)
	walk = func(n *Node) {
		for i := range n.Params {
			shape := make([]int64, len(n.Params[i].Shape))
			for j, d := range n.Params[i].Shape {
				shape[j] = (d + int64(k) - 1) / int64(k)
			}
			n.Params[i].Shape = shape
		}
		for i := range n.Children {
			walk(&n.Children[i])
		}
	}
	walk(&s.Model)
	return nil
}

const specMarker = "SPEC = None  # fsdpc emit torch puts the spec here"

// Emit is a self-contained Python module: build_model() makes the model's
// nn.Module, apply_plan(model, mesh) checks a model against the plan and
// applies it with fully_shard. Run as a script with a spec path and an
// output directory, it is the conformance harness. source says what it was
// made from for the header comment; names of files in it should be quoted
// (safetext.Python), and whatever it holds is escaped so that it stays on
// the comment's line.
func Emit(s *Spec, source string) (string, error) {
	b, err := s.JSON()
	if err != nil {
		return "", err
	}
	// The spec goes in a raw string for people to read. A quote can only
	// be inside a JSON string, where \u0027 means the same, so the literal
	// holds none and ends where it should.
	js := strings.ReplaceAll(string(b), "'", `\u0027`)
	head := "# Generated by fsdpc emit torch from " + safetext.Escape(source) + "; do not edit.\n"
	return head + strings.Replace(harness, specMarker, "SPEC = json.loads(r'''"+js+"''')", 1), nil
}
