package ir

import (
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
)

// The syntax tree: the model file decoded and checked key by key, before
// repeats, blocks and names are expanded. Every declaration keeps its TOML
// path so later errors can point at it.

type blockDecl struct {
	path     string
	name     string
	modules  []*moduleDecl
	params   []*paramDecl
	register registration
	output   outputDecl
	used     bool
}

type moduleDecl struct {
	path   string
	name   string
	kind   Kind
	spec   *kindSpec
	repeat int64
	block  string
	// blocks is a repeat's per-instance bodies: instance i is
	// blocks[i mod len(blocks)] (DeepSeek's dense then MoE layers).
	blocks       []string
	children     []*moduleDecl
	params       []*paramDecl
	inputs       []string
	hasInputs    bool
	requiresGrad *bool
	dtype        DType
	tiedTo       string
	biasTiedTo   string // bias_tied_to: BERT's MLM decoder.bias is its head's bias
	flopsFwd     *float64
	flopsBwd     *float64
	actBytes     *int64
	checkpoint   *bool
	attrs        attrValues
	// register is the order the implementation registers the children in
	// (its __init__), when that differs from the order they run in.
	register registration
	// output says whether the module's forward returns its children's
	// tensors unchanged or computes its own (a residual add).
	output outputDecl
}

// outputDecl is an `output = "own" | "child"` key; path is empty when the
// key is absent.
type outputDecl struct {
	own  bool
	path string
}

// registration is a `register = [names]` key: the children of a container
// in the order PyTorch registers them, which fixes FSDP2's parameter order
// (named_parameters and children() follow it) while the declaration order
// stays the order of execution.
type registration struct {
	names []string
	path  string
}

type paramDecl struct {
	path         string
	name         string
	shape        []int64
	dtype        DType
	requiresGrad *bool
	tiedTo       string
}

// attrValues holds a module's kind attributes, already type-checked:
// int64, bool, string, []int64, []string or map[string]string.
type attrValues map[string]any

func (a attrValues) int(k string, def int64) int64 {
	if v, ok := a[k].(int64); ok {
		return v
	}
	return def
}

func (a attrValues) has(k string) bool { _, ok := a[k]; return ok }

func (a attrValues) bool(k string, def bool) bool {
	if v, ok := a[k].(bool); ok {
		return v
	}
	return def
}

func (a attrValues) str(k, def string) string {
	if v, ok := a[k].(string); ok {
		return v
	}
	return def
}

func (a attrValues) ints(k string) []int64 {
	v, _ := a[k].([]int64)
	return v
}

func (a attrValues) strs(k string) []string {
	v, _ := a[k].([]string)
	return v
}

func (a attrValues) names(k string) map[string]string {
	v, _ := a[k].(map[string]string)
	return v
}

// Limits that keep a hostile file from exhausting memory.
const (
	maxRepeat  = 1 << 20
	maxDims    = 8
	maxDim     = 1 << 40
	maxModules = 1 << 20 // a million modules take seconds and a gigabyte to build
	maxParams  = 1 << 20
	// maxModelElements bounds the parameter elements of a whole model
	// (docs/model-format.md, Limits).
	maxModelElements = 1 << 44
	maxNesting       = 64
	maxWorldSize     = 1 << 24
	maxSeqTokens     = 1 << 40
	maxNameLength    = 256
	maxFlop          = 1e30 // explicit FLOPs of one module per micro-batch
	// maxActivationBytes bounds one module's explicit activation_bytes:
	// 1 TiB, so the sum over at most maxModules modules stays inside int64.
	maxActivationBytes = 1 << 40
)

var moduleKeys = []string{"name", "kind", "repeat", "block", "blocks", "module", "param", "inputs",
	"requires_grad", "dtype", "tied_to", "bias_tied_to", "flops_fwd", "flops_bwd", "activation_bytes", "checkpoint", "register", "output"}

var paramKeys = []string{"name", "shape", "dtype", "requires_grad", "tied_to"}

// ValidName is the model format's rule for a module's or parameter's own
// name: letters, digits, '_' and '-', at most maxNameLength characters.
// Dotted names are paths of these (ValidPath); plan.bin's names are held to
// the same rule when a plan is read, so a name cannot carry code, markup or
// terminal escapes into what fsdpc writes.
func ValidName(s string) error {
	if s == "" {
		return fmt.Errorf("name must not be empty")
	}
	if len(s) > maxNameLength {
		return fmt.Errorf("name is longer than %d characters", maxNameLength)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			return fmt.Errorf("name %q must not contain a dot; nest modules instead", s)
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("name %q may contain only letters, digits, '_' and '-'", s)
		}
	}
	return nil
}

// ValidPath checks a module's or parameter's full dotted name ("layers.0.wq"):
// ValidNames joined by dots. The root module's is "".
func ValidPath(s string) error {
	if s == "" {
		return nil
	}
	for part := range strings.SplitSeq(s, ".") {
		if err := ValidName(part); err != nil {
			return fmt.Errorf("in %q: %w", s, err)
		}
	}
	return nil
}

// ValidLabel checks a free-text name (the model's, a GPU's): printable
// characters only (safetext.Printable), so a name cannot add lines to
// show's or textconv's output (a reviewer would read forged text) or break
// the trace's JSON.
func ValidLabel(s string) error {
	if len(s) > maxNameLength {
		return fmt.Errorf("name is longer than %d characters", maxNameLength)
	}
	if !safetext.Printable(s) {
		return fmt.Errorf("name %q may contain only printable characters (no control characters, line breaks or tabs)", s)
	}
	return nil
}

func (d *decoder) moduleList(t *tbl, depth int) []*moduleDecl {
	raw, ok := t.tables("module")
	if !ok {
		return nil
	}
	if depth > maxNesting {
		d.errorf(t.at("module"), "modules nest deeper than %d levels", maxNesting)
		return nil
	}
	out := make([]*moduleDecl, 0, len(raw))
	seen := map[string]string{} // name -> path of the first
	for i, m := range raw {
		md := d.module(indexPath(t.at("module"), i), m, depth)
		if md.name != "" {
			if first, dup := seen[md.name]; dup {
				d.errorf(childPath(md.path, "name"), "duplicate module name %q%s", md.name, d.firstAt(first))
			} else {
				seen[md.name] = md.path
			}
		}
		out = append(out, md)
	}
	return out
}

func (d *decoder) paramList(t *tbl) []*paramDecl {
	raw, ok := t.tables("param")
	if !ok {
		return nil
	}
	out := make([]*paramDecl, 0, len(raw))
	seen := map[string]string{} // name -> path of the first
	for i, m := range raw {
		p := d.param(indexPath(t.at("param"), i), m)
		if p.name != "" {
			if first, dup := seen[p.name]; dup {
				d.errorf(childPath(p.path, "name"), "duplicate parameter name %q%s", p.name, d.firstAt(first))
			} else {
				seen[p.name] = p.path
			}
		}
		out = append(out, p)
	}
	return out
}

// firstAt says where the first of two declarations is, when known.
func (d *decoder) firstAt(path string) string {
	if loc, ok := d.locs[path]; ok {
		return fmt.Sprintf(" (the first is at line %d)", loc.key.Line)
	}
	return ""
}

func (d *decoder) module(path string, raw map[string]any, depth int) *moduleDecl {
	md := &moduleDecl{path: path, attrs: attrValues{}}
	// Decide the kind first: it says which other keys are allowed.
	allowed := append([]string(nil), moduleKeys...)
	pre := &tbl{d: d, path: path, m: raw}
	kindName, hasKind := pre.str("kind")
	if hasKind {
		spec, ok := kindSpecs[kindName]
		if ok {
			md.spec = &spec
			md.kind = spec.kind
			for _, a := range spec.attrs {
				allowed = append(allowed, a.key)
			}
		} else {
			msg := fmt.Sprintf("unknown module kind %q", kindName)
			if s := suggest(kindName, KindNames()); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			d.errorf(pre.at("kind"), "%s (allowed: linear, embedding, norm, attention, mlp, moe, conv; leave kind out for a container or a module with explicit params)", msg)
			allowed = append(allowed, allAttrKeys()...)
		}
	} else if pre.has("kind") { // kind of the wrong type, reported: its attributes are not unknown
		allowed = append(allowed, allAttrKeys()...)
	}
	t := d.table(path, raw, "module", allowed...)

	if name, ok := t.str("name"); ok {
		if err := ValidName(name); err != nil {
			d.errorf(t.at("name"), "%v", err)
		} else {
			md.name = name
		}
	} else if !t.has("name") {
		d.keyErrorf(path, "module has no name")
	}
	if n, ok := t.integer("repeat", 1, maxRepeat); ok {
		md.repeat = n
	}
	if b, ok := t.str("block"); ok {
		md.block = b
	}
	if bs, ok := t.strList("blocks"); ok {
		md.blocks = bs
	}
	if t.has("module") {
		md.children = d.moduleList(t, depth+1)
	}
	md.params = d.paramList(t)
	if in, ok := t.strList("inputs"); ok {
		md.inputs, md.hasInputs = in, true
	} else if t.has("inputs") {
		md.hasInputs = true
	}
	md.requiresGrad, _ = t.boolean("requires_grad")
	md.checkpoint, _ = t.boolean("checkpoint")
	md.register = t.registration()
	md.output = t.outputKey()
	if dt, ok := t.dtype("dtype"); ok {
		md.dtype = dt
	}
	if s, ok := t.str("tied_to"); ok {
		md.tiedTo = s
	}
	if s, ok := t.str("bias_tied_to"); ok {
		md.biasTiedTo = s
	}
	for _, k := range []string{"flops_fwd", "flops_bwd"} {
		f, ok := t.number(k, ParseFLOP)
		switch {
		case !ok:
		case f > maxFlop: // sums of a few such must stay finite
			d.errorf(t.at(k), "%s must be at most %g FLOP, not %g", k, maxFlop, f)
		case k == "flops_fwd":
			md.flopsFwd = &f
		default:
			md.flopsBwd = &f
		}
	}
	if b, ok := t.bytes("activation_bytes"); ok {
		if b > maxActivationBytes {
			d.errorf(t.at("activation_bytes"), "activation_bytes must be at most 1 TiB (%d bytes) per module, not %d", int64(maxActivationBytes), b)
		} else {
			md.actBytes = &b
		}
	}

	switch {
	case t.has("blocks") && (md.block != "" || t.has("module") || md.spec != nil):
		d.keyErrorf(t.at("blocks"), "module %q has blocks and also block, kind or [[module]] children; use one", md.name)
	case t.has("blocks") && md.repeat == 0:
		d.keyErrorf(t.at("blocks"), "module %q has blocks but no repeat: blocks gives the body of each of the repeat instances", md.name)
	case md.blocks != nil && (len(md.blocks) == 0 || int64(len(md.blocks)) > md.repeat):
		d.errorf(t.at("blocks"), "blocks of module %q must name 1 to repeat (%d) blocks, not %d", md.name, md.repeat, len(md.blocks))
	case md.block != "" && t.has("module"):
		d.keyErrorf(t.at("block"), "module %q has both block and [[module]] children; use one", md.name)
	case md.spec != nil && md.block != "":
		d.keyErrorf(t.at("kind"), "module %q of kind %s cannot have a block: its kind makes its children", md.name, kindName)
	case md.spec != nil && md.output.path != "":
		d.keyErrorf(t.at("output"), "module %q of kind %s computes its own output; output applies to containers (modules without a kind)", md.name, kindName)
	case md.spec != nil && md.register.path != "":
		d.keyErrorf(t.at("register"), "module %q of kind %s cannot set register: its kind registers its children in the order of the implementation it stands for", md.name, kindName)
	case md.tiedTo != "" && md.spec == nil:
		d.keyErrorf(t.at("tied_to"), "tied_to on a module ties its weight, and only modules of a kind have one; tie a [[param]] instead")
	case md.biasTiedTo != "" && md.spec == nil:
		d.keyErrorf(t.at("bias_tied_to"), "bias_tied_to on a module ties its bias, and only modules of a kind have one; tie a [[param]] instead")
	}
	if md.spec != nil {
		d.kindAttrs(t, md)
		for _, c := range md.children {
			d.heldChild(md, c, kindName)
		}
	}
	return md
}

// heldChild checks a child a module of a kind declares beside the ones its
// kind makes (T5's relative_attention_bias inside its first attention): it
// only holds parameters, since the kind's formula is the whole module's
// cost and the module is one node of the dataflow.
func (d *decoder) heldChild(md, c *moduleDecl, kindName string) {
	why := ""
	switch {
	case c.hasInputs:
		why = "inputs"
	case c.repeat > 0 || len(c.blocks) > 0:
		why = "repeat"
	case c.flopsFwd != nil || c.flopsBwd != nil || c.actBytes != nil:
		why = "explicit costs"
	case c.checkpoint != nil:
		why = "checkpoint"
	case c.output.path != "":
		why = "output"
	}
	if why != "" {
		d.keyErrorf(c.path, "module %q inside module %q of kind %s has %s: children a kind module declares beside its kind's only hold parameters", c.name, md.name, kindName, why)
	}
}

func (d *decoder) kindAttrs(t *tbl, md *moduleDecl) {
	for _, a := range md.spec.attrs {
		if !t.has(a.key) {
			if a.required {
				d.keyErrorf(t.path, "module %q of kind %s needs %s", md.name, md.kind, a.key)
			}
			continue
		}
		switch a.typ {
		case attrInt:
			if n, ok := t.integer(a.key, 1, maxDim); ok {
				md.attrs[a.key] = n
			}
		case attrCount:
			if n, ok := t.integer(a.key, 0, maxDim); ok {
				md.attrs[a.key] = n
			}
		case attrBool:
			if b, ok := t.boolean(a.key); ok && b != nil {
				md.attrs[a.key] = *b
			}
		case attrEnum:
			if s, ok := t.enum(a.key, a.enum...); ok {
				md.attrs[a.key] = s
			}
		case attrInts:
			lo := int64(1)
			if a.key == "padding" {
				lo = 0
			}
			if v, ok := t.intList(a.key, lo, maxDim); ok {
				md.attrs[a.key] = v
			}
		case attrStrings:
			list, ok := t.strList(a.key)
			if !ok {
				continue
			}
			for i, s := range list {
				if !contains(a.roles, s) {
					d.errorf(indexPath(t.at(a.key), i), "%q is not a role of %s (roles: %s)", s, md.kind, strings.Join(a.roles, ", "))
					ok = false
				}
			}
			if ok {
				md.attrs[a.key] = list
			}
		case attrNames:
			nt := d.table(t.at(a.key), t.m[a.key], a.key, a.roles...)
			names := map[string]string{}
			for _, role := range a.roles {
				if s, ok := nt.str(role); ok {
					if err := ValidName(s); err != nil {
						d.errorf(nt.at(role), "%v", err)
						continue
					}
					names[role] = s
				}
			}
			md.attrs[a.key] = names
		}
	}
}

func (d *decoder) param(path string, raw map[string]any) *paramDecl {
	t := d.table(path, raw, "param", paramKeys...)
	p := &paramDecl{path: path}
	if name, ok := t.str("name"); ok {
		if err := ValidName(name); err != nil {
			d.errorf(t.at("name"), "%v", err)
		} else {
			p.name = name
		}
	} else if !t.has("name") {
		d.keyErrorf(path, "param has no name")
	}
	if v, ok := t.m["shape"]; ok {
		if arr, isArr := v.([]any); isArr && len(arr) == 0 {
			d.errorf(t.at("shape"), "shape must have at least one dimension: FSDP shards on dim 0 and rejects scalar parameters")
		} else if shape, ok := t.intList("shape", 1, maxDim); ok {
			if len(shape) > maxDims {
				d.errorf(t.at("shape"), "shape has %d dimensions; at most %d are supported", len(shape), maxDims)
			} else {
				p.shape = shape
			}
		}
	} else {
		d.keyErrorf(path, "param %q has no shape", p.name)
	}
	if dt, ok := t.dtype("dtype"); ok {
		p.dtype = dt
	}
	p.requiresGrad, _ = t.boolean("requires_grad")
	if s, ok := t.str("tied_to"); ok {
		p.tiedTo = s
	}
	return p
}

func (d *decoder) blocks(root *tbl) map[string]*blockDecl {
	v, ok := root.m["block"]
	if !ok {
		return nil
	}
	m, isTable := v.(map[string]any)
	if !isTable {
		d.errorf("block", "block must be a table of named blocks ([block.NAME]), not %s", tomlType(v))
		return nil
	}
	bt := &tbl{d: d, path: "block", m: m}
	out := map[string]*blockDecl{}
	for _, name := range sortedKeys(bt.m) {
		path := bt.at(name)
		if err := ValidName(name); err != nil {
			d.keyErrorf(path, "block %v", err)
			continue
		}
		t := d.table(path, bt.m[name], "["+path+"]", "module", "param", "register", "output")
		b := &blockDecl{path: path, name: name, modules: d.moduleList(t, 1), params: d.paramList(t), register: t.registration(), output: t.outputKey()}
		if len(b.modules) == 0 && len(b.params) == 0 {
			d.keyErrorf(path, "block %q is empty: give it [[block.%s.module]] or [[block.%s.param]] entries", name, name, name)
		}
		out[name] = b
	}
	return out
}

// positive reports a missing-or-invalid integer setting with a default.
func (t *tbl) intOr(k string, def, lo, hi int64) int64 {
	if n, ok := t.integer(k, lo, hi); ok {
		return n
	}
	return def
}

// registration reads an optional register key.
func (t *tbl) registration() registration {
	if names, ok := t.strList("register"); ok {
		return registration{names: names, path: t.at("register")}
	}
	return registration{}
}

// outputKey reads an optional output key: "own" when the module's forward
// returns a tensor it computes from its children's (h + ffn(norm(h))),
// "child" when it returns their tensors unchanged (nn.Sequential).
func (t *tbl) outputKey() outputDecl {
	if s, ok := t.enum("output", "own", "child"); ok {
		return outputDecl{own: s == "own", path: t.at("output")}
	}
	return outputDecl{}
}
