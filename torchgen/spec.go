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

	"github.com/fsdpc/fsdpc/ir"
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
	// Checkpoint, when set, names the optimizer: the harness takes its
	// step and saves the state with torch.distributed.checkpoint, and rank
	// 0 records DCP's metadata (CompareCheckpoint).
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Node is one module: children in registration order, Exec their local
// names in declaration (execution) order.
type Node struct {
	Name     string      `json:"name"`
	Compute  bool        `json:"compute,omitempty"`
	Children []Node      `json:"children,omitempty"`
	Exec     []string    `json:"exec,omitempty"`
	Params   []ParamSpec `json:"params,omitempty"`
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
	ParamDType  string   `json:"param_dtype"`
	ReduceDType string   `json:"reduce_dtype"`
	Offload     bool     `json:"offload,omitempty"`
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
	for _, id := range m.Forward {
		if m.Modules[id].Inputs != nil && len(m.Modules[id].Inputs) > 1 {
			return nil, fmt.Errorf("module %q reads several inputs; the torch mirror runs containers as chains only", m.Modules[id].Name)
		}
	}
	s.Model = node(m, 0)
	for _, g := range p.Groups {
		pol := g.Policy
		if pol.PrefetchForward > 0 || pol.PrefetchBackward > 0 {
			return nil, fmt.Errorf("group %s: explicit prefetch is not applied by the torch harness yet", g.Label())
		}
		gs := GroupSp{Modules: g.Modules, Root: g.Root, ParamDType: pol.Param.String(), ReduceDType: pol.Reduce.String(), Offload: pol.Offload}
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

func node(m *ir.Model, id ir.ModuleID) Node {
	mod := &m.Modules[id]
	n := Node{Name: mod.Name[strings.LastIndexByte(mod.Name, '.')+1:], Compute: mod.Compute}
	for _, c := range m.RegisteredChildren(id) {
		n.Children = append(n.Children, node(m, c))
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
func BuildModel(m *ir.Model) *Spec {
	return &Spec{World: m.Cluster.WorldSize, Replicate: 1, Shard: m.Cluster.WorldSize, GradAccum: m.Train.GradAccum, Model: node(m, 0)}
}

const specMarker = "SPEC = None  # fsdpc emit torch puts the spec here"

// Emit is a self-contained Python module: build_model() makes the model's
// nn.Module, apply_plan(model, mesh) checks a model against the plan and
// applies it with fully_shard. Run as a script with a spec path and an
// output directory, it is the conformance harness.
func Emit(s *Spec, source string) (string, error) {
	b, err := s.JSON()
	if err != nil {
		return "", err
	}
	if strings.Contains(string(b), "'''") {
		return "", fmt.Errorf("the spec cannot be quoted in Python")
	}
	head := fmt.Sprintf("# Generated by fsdpc emit torch from %s; do not edit.\n", source)
	return head + strings.Replace(harness, specMarker, "SPEC = json.loads(r'''"+string(b)+"''')", 1), nil
}
