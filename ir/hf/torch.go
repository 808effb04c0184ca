package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// TorchFormat is the version the Python importer (python/fsdpc/importer)
// writes; a description in any other is refused.
const TorchFormat = "fsdpc-import-torch/1"

// TorchMarker precedes the description in the importer's standard output:
// native libraries may print there while torch loads.
const TorchMarker = "--- fsdpc import torch: description ---"

// TorchDescription is what `python -m fsdpc.importer` says about a model
// built on the meta device and traced once (docs/import.md).
type TorchDescription struct {
	Format     string         `json:"format"`
	Source     map[string]any `json:"source"`
	MicroBatch int64          `json:"micro_batch"`
	SeqLen     int64          `json:"seq_len"`
	Torch      string         `json:"torch"`
	Modules    []TorchModule  `json:"modules"`
	// Numel is sum(p.numel() for p in model.parameters()): each Parameter
	// once.
	Numel    int64          `json:"numel"`
	Problems []TorchProblem `json:"problems"`
}

// TorchModule is one module holding parameters, under its dotted name,
// in pre-order over registration.
type TorchModule struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// AliasOf is the first name of a module object reachable at several
	// places; FSDP2 manages it once, there.
	AliasOf  string       `json:"alias_of"`
	Params   []TorchParam `json:"params"`
	Children []string     `json:"children"` // registration order, only those holding parameters
	// Kind is the importer's proposal (kinds.py); Convert drops it where
	// the kind does not make exactly these parameters. HeldChildren are
	// children the module holds beside the kind's, registered after them
	// (T5's relative_attention_bias; docs/model-format.md).
	Kind         map[string]any `json:"kind"`
	HeldChildren []string       `json:"held_children"`
	// Calls is how often forward called it; Reads the modules whose
	// outputs reached its inputs; Forward its children in the order
	// their subtrees first ran.
	Calls   int      `json:"calls"`
	Reads   []string `json:"reads"`
	Forward []string `json:"forward"`
	// Measured in the traced pass, this module and everything under it,
	// per micro-batch.
	FlopsFwd        float64 `json:"flops_fwd"`
	FlopsBwd        float64 `json:"flops_bwd"`
	ActivationBytes float64 `json:"activation_bytes"`
	MeasuredBecause string  `json:"measured_because"`
	// KindNote says what Kind leaves out of the module's cost (ALiBi,
	// partial rotary, an unfused core: kinds.not_modelled), for the
	// file's header.
	KindNote string `json:"kind_note"`
	// ParamsUsed: never called, but forward read its parameters directly
	// (an nn.ParameterList indexed by its parent).
	ParamsUsed bool `json:"params_used"`
	// InputShape is the shape of the first tensor forward received.
	InputShape []int64 `json:"input_shape"`
	// OwnOutput: its first call returned a tensor it made, not one a
	// module inside it returned (the model file's output = "own").
	OwnOutput bool `json:"own_output"`
}

// TorchParam is one parameter as registered (named_parameters(recurse=False)).
type TorchParam struct {
	Name         string  `json:"name"`
	Shape        []int64 `json:"shape"`
	DType        string  `json:"dtype"`
	RequiresGrad bool    `json:"requires_grad"`
	TiedTo       string  `json:"tied_to"`
}

// TorchProblem is something the trace could not see, by module.
type TorchProblem struct {
	Module string `json:"module"`
	What   string `json:"what"`
}

// ParseTorchDescription reads the importer's standard output.
func ParseTorchDescription(out []byte) (*TorchDescription, error) {
	i := bytes.LastIndex(out, []byte(TorchMarker+"\n"))
	if i < 0 {
		return nil, fmt.Errorf("the importer wrote no description (no %q line in its output)", TorchMarker)
	}
	dec := json.NewDecoder(bytes.NewReader(out[i+len(TorchMarker)+1:]))
	dec.DisallowUnknownFields()
	var d TorchDescription
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("the importer's description: %w", err)
	}
	if d.Format != TorchFormat {
		return nil, fmt.Errorf("the importer's description is %q; this fsdpc reads %q (a Python package from another fsdpc version?)", d.Format, TorchFormat)
	}
	return &d, d.validate()
}

// validate checks what the writer relies on: a tree whose names are
// unique, whose children exist, and whose figures are finite.
func (d *TorchDescription) validate() error {
	if len(d.Modules) == 0 || d.Modules[0].Name != "" {
		return fmt.Errorf("the importer's description has no root module")
	}
	if d.MicroBatch <= 0 || d.SeqLen <= 0 {
		return fmt.Errorf("the importer's description has micro_batch %d, seq_len %d", d.MicroBatch, d.SeqLen)
	}
	seen := make(map[string]bool, len(d.Modules))
	for i := range d.Modules {
		m := &d.Modules[i]
		if seen[m.Name] {
			return fmt.Errorf("the importer's description lists module %q twice", m.Name)
		}
		seen[m.Name] = true
		for _, f := range []float64{m.FlopsFwd, m.FlopsBwd, m.ActivationBytes} {
			if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return fmt.Errorf("module %q: a measured cost is %v", m.Name, f)
			}
		}
		for _, p := range m.Params {
			if len(p.Shape) == 0 {
				return fmt.Errorf("parameter %q is a scalar: FSDP2 shards dimension 0 and refuses scalars", joinName(m.Name, p.Name))
			}
		}
	}
	for i := range d.Modules {
		m := &d.Modules[i]
		for _, c := range m.Children {
			if !seen[joinName(m.Name, c)] {
				return fmt.Errorf("module %q: child %q is not described", m.Name, c)
			}
		}
		if n := len(m.HeldChildren); n > 0 && (n > len(m.Children) || !slices.Equal(m.HeldChildren, m.Children[len(m.Children)-n:])) {
			return fmt.Errorf("module %q: held children %q are not its last children", m.Name, m.HeldChildren)
		}
		if !slices.Equal(sortedCopy(m.Forward), sortedCopy(intersect(m.Forward, m.Children))) {
			return fmt.Errorf("module %q: forward order names a module that is not its child", m.Name)
		}
	}
	return nil
}

func joinName(parent, local string) string {
	if parent == "" {
		return local
	}
	return parent + "." + local
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// describeSourceLine says where the model came from, for the header.
func (d *TorchDescription) describeSourceLine() string {
	s := func(k string) string {
		v, _ := d.Source[k].(string)
		return clean(v)
	}
	var parts []string
	if f := s("factory"); f != "" {
		parts = append(parts, "factory "+f)
		if args, ok := d.Source["args"].([]any); ok && len(args) > 0 {
			var a []string
			for _, x := range args {
				if xs, ok := x.(string); ok {
					a = append(a, clean(xs))
				}
			}
			parts = append(parts, "--arg "+strings.Join(a, " --arg "))
		}
	}
	if h := s("hf"); h != "" {
		parts = append(parts, "config "+h)
	}
	if c := s("class"); c != "" {
		parts = append(parts, "class "+c)
	}
	if t := clean(d.Torch); t != "" {
		parts = append(parts, "torch "+t)
	}
	if t := s("transformers"); t != "" {
		parts = append(parts, "transformers "+t)
	}
	return strings.Join(parts, ", ")
}
