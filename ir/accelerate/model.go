package accelerate

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/ir/hf"
)

// Model is what accelerate's FSDP2 path reads of a model besides its
// modules and parameters: each module's class (what
// fsdp_transformer_layer_cls_to_wrap names), _no_split_modules, the
// input and output embeddings (get_input_embeddings,
// get_output_embeddings) and the final norm accelerate finds.
type Model struct {
	IR *ir.Model
	// Class of each module by ModuleID; "" where unknown.
	Class []string
	// Unmodelled maps the classes of modules fsdpc does not model (they
	// hold no parameters: rotary embeddings, activations, dropout) to
	// their names, so a class name accelerate finds there is known.
	Unmodelled map[string][]string
	// NoSplit is the model's _no_split_modules; NoSplitNone when the
	// attribute is None or absent.
	NoSplit     []string
	NoSplitNone bool
	// InputEmbed, OutputEmbed and FinalNorm are modules, or ir.NoModule.
	InputEmbed, OutputEmbed, FinalNorm ir.ModuleID
	// Source says where the classes come from, for messages.
	Source string
}

// transformersJSON is what accelerate's FSDP2 path reads of each model
// type, recorded from transformers 5.12.1 and accelerate 1.14.0 by
// record_classes.py (the torch root's; TestTransformersTable regenerates
// it): classes by module name with layer indices as *, alternatives
// joined by |, _no_split_modules, the embeddings and accelerate's own
// _find_final_norm.
//
//go:embed transformers.json
var transformersJSON []byte

type family struct {
	Class           string            `json:"class"`
	NoSplitModules  *[]string         `json:"no_split_modules"`
	InputEmbedding  *string           `json:"input_embeddings"`
	OutputEmbedding *string           `json:"output_embeddings"`
	FinalNorm       *string           `json:"final_norm"`
	Modules         map[string]string `json:"modules"`
}

type table struct {
	Transformers string            `json:"transformers"`
	Accelerate   string            `json:"accelerate"`
	Families     map[string]family `json:"families"`
}

func loadTable() (*table, error) {
	var t table
	if err := json.Unmarshal(transformersJSON, &t); err != nil {
		return nil, fmt.Errorf("internal error: the embedded transformers table: %w", err)
	}
	return &t, nil
}

var layerIndex = regexp.MustCompile(`(^|\.)\d+(\.|$)`)

// normalName writes a module's layer indices as *: model.layers.3.mlp is
// model.layers.*.mlp.
func normalName(name string) string {
	for {
		n := layerIndex.ReplaceAllString(name, "${1}*${2}")
		if n == name {
			return n
		}
		name = n
	}
}

// FromTransformers describes a model fsdpc imported from a transformers
// config.json of modelType: its modules are named as transformers names
// them, and the classes come from the recorded table.
func FromTransformers(m *ir.Model, modelType string) (*Model, error) {
	t, err := loadTable()
	if err != nil {
		return nil, err
	}
	f, ok := t.Families[modelType]
	if !ok {
		return nil, fmt.Errorf("model_type %q: fsdpc has no record of its transformers classes (it has %s)", modelType, strings.Join(keysOf(t.Families), ", "))
	}
	mm := &Model{IR: m, Class: make([]string, len(m.Modules)), Unmodelled: map[string][]string{},
		InputEmbed: ir.NoModule, OutputEmbed: ir.NoModule, FinalNorm: ir.NoModule,
		Source: fmt.Sprintf("%s of transformers %s", f.Class, t.Transformers)}
	if f.NoSplitModules == nil {
		mm.NoSplitNone = true
	} else {
		mm.NoSplit = *f.NoSplitModules
	}
	byName := map[string]ir.ModuleID{}
	modelled := map[string]bool{}
	for i := range m.Modules {
		byName[m.Modules[i].Name] = ir.ModuleID(i)
		modelled[normalName(m.Modules[i].Name)] = true
	}
	for i := range m.Modules {
		c, ok := f.Modules[normalName(m.Modules[i].Name)]
		if !ok {
			continue
		}
		if strings.Contains(c, "|") {
			c = chooseByKind(c, m.Modules[i].Kind)
		}
		mm.Class[i] = c
	}
	for _, name := range keysOf(f.Modules) {
		c := f.Modules[name]
		if !modelled[name] {
			for _, alt := range strings.Split(c, "|") {
				mm.Unmodelled[alt] = append(mm.Unmodelled[alt], name)
			}
		}
	}
	for _, e := range []struct {
		name *string
		to   *ir.ModuleID
	}{{f.InputEmbedding, &mm.InputEmbed}, {f.OutputEmbedding, &mm.OutputEmbed}, {f.FinalNorm, &mm.FinalNorm}} {
		if e.name == nil {
			continue
		}
		id, ok := byName[*e.name]
		if !ok {
			return nil, fmt.Errorf("the model has no module %q, which transformers' %s has", *e.name, f.Class)
		}
		*e.to = id
	}
	return mm, nil
}

// chooseByKind picks, among the classes transformers uses at one place
// in different layers (DeepSeek's dense DeepseekV3MLP and routed
// DeepseekV3MoE), the one of this module's kind.
func chooseByKind(alts string, k ir.Kind) string {
	moe := k.String() == "moe"
	for _, c := range strings.Split(alts, "|") {
		l := strings.ToLower(c)
		if (strings.Contains(l, "moe") || strings.Contains(l, "sparse")) == moe {
			return c
		}
	}
	return ""
}

// FromModelFile describes a model written as an fsdpc model file, which
// has no Python classes: a repeated module's instances have its block's
// name as their class (block = "decoder": decoder), the repeated module
// itself is a ModuleList, any other module has its kind as its class
// (norm, attention, mlp, linear, embedding; container for a module of
// children). There is no _no_split_modules and no get_input_embeddings,
// as for a plain nn.Module; the final norm is the last child of the root
// of kind norm (accelerate's _find_final_norm looks for a class named
// *Norm* among the root's children).
func FromModelFile(m *ir.Model) *Model {
	mm := &Model{IR: m, Class: make([]string, len(m.Modules)), Unmodelled: map[string][]string{},
		NoSplitNone: true, InputEmbed: ir.NoModule, OutputEmbed: ir.NoModule, FinalNorm: ir.NoModule,
		Source: "the model file (a block's name is its instances' class, a kind the class of other modules)"}
	for i := range m.Modules {
		md := &m.Modules[i]
		switch {
		case md.Repeat > 0:
			mm.Class[i] = "ModuleList"
		case md.Instance >= 0 && md.Block != "":
			mm.Class[i] = md.Block
		default:
			mm.Class[i] = md.Kind.String()
		}
	}
	for _, c := range m.Modules[0].Children {
		if m.Modules[c].Kind.String() == "norm" {
			mm.FinalNorm = c
		}
	}
	return mm
}

// classes returns every class in the model with its modules' names.
func (mm *Model) classes() map[string][]string {
	out := map[string][]string{}
	for i, c := range mm.Class {
		if c != "" {
			out[c] = append(out[c], mm.IR.Modules[i].Name)
		}
	}
	return out
}

func sortedClasses(m map[string][]string) []string {
	out := keysOf(m)
	sort.Strings(out)
	return out
}

// FromTorch describes a model `fsdpc import torch` built from a PyTorch
// factory: each module's class is its Python class as the importer
// recorded it, and the importer's accelerate view gives
// _no_split_modules, the embeddings and the final norm as accelerate
// finds them. Modules without parameters are not in the description, so
// a class only they have is not known.
func FromTorch(m *ir.Model, d *hf.TorchDescription) (*Model, error) {
	mm := &Model{IR: m, Class: make([]string, len(m.Modules)), Unmodelled: map[string][]string{},
		NoSplitNone: true, InputEmbed: ir.NoModule, OutputEmbed: ir.NoModule, FinalNorm: ir.NoModule}
	class, _ := d.Source["class"].(string)
	mm.Source = fmt.Sprintf("%s as built by `fsdpc import torch` (Python classes)", class)
	byName := map[string]ir.ModuleID{}
	for i := range m.Modules {
		byName[m.Modules[i].Name] = ir.ModuleID(i)
	}
	for _, tm := range d.Modules {
		if id, ok := byName[tm.Name]; ok && tm.AliasOf == "" {
			mm.Class[id] = tm.Type
		}
	}
	view, ok := d.Source["accelerate"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the importer's description has no accelerate view (an older fsdpc Python package?)")
	}
	if ns, ok := view["no_split_modules"].([]any); ok {
		mm.NoSplitNone = false
		for _, x := range ns {
			if s, ok := x.(string); ok {
				mm.NoSplit = append(mm.NoSplit, s)
			}
		}
	}
	for _, e := range []struct {
		key string
		to  *ir.ModuleID
	}{{"input_embeddings", &mm.InputEmbed}, {"output_embeddings", &mm.OutputEmbed}, {"final_norm", &mm.FinalNorm}} {
		name, ok := view[e.key].(string)
		if !ok {
			continue
		}
		id, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("the importer names %s %q, which the model file lacks", e.key, name)
		}
		*e.to = id
	}
	return mm, nil
}
