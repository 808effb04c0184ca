package ir

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/internal/checked"
)

// Lowering expands the syntax tree into the flat module and parameter
// arrays: repeats become numbered instances, blocks are inlined, kinds make
// their parameter children, and names become dotted paths.

type lowerer struct {
	d            *decoder
	m            *Model
	blocks       map[string]*blockDecl
	defaultDType DType
	moduleByName map[string]ModuleID
	paramByName  map[string]ParamID
	// Per module: the declaration it came from (for kinds, attributes and
	// explicit costs) and the TOML path of its inputs key.
	decl      []*moduleDecl
	inputs    []pendingInputs
	ties      []pendingTie
	blockPath []string
	tooBig    bool
	// tooLarge: the model passed maxModelElements (reported once).
	tooLarge bool
	// numel counts the elements of every parameter made so far, against
	// maxModelElements.
	numel int64
	// resized names the repeated modules whose count Model.repeats set.
	resized map[string]bool
}

type pendingInputs struct {
	module ModuleID
	names  []string
	path   string
}

type pendingTie struct {
	param               ParamID
	target              string
	path                string
	explicitDType       bool
	explicitGrad        bool
	declaredDType       DType
	declaredRequireGrad bool
}

// inherited is what flows from a module to its descendants.
type inherited struct {
	dtype        DType
	requiresGrad bool
	explicitDT   bool
	explicitRG   bool
	inCompute    bool // inside a compute module: children only hold parameters
	inRegion     bool // inside a checkpoint region
}

func (l *lowerer) lowerModules(rootModules []*moduleDecl, rootParams []*paramDecl, rootReg registration) {
	size, ok := l.checkSize(rootModules, rootParams)
	if !ok {
		return
	}
	// The count is exact for a valid model: no array grows.
	l.m.Modules = make([]Module, 0, size.modules)
	l.decl = make([]*moduleDecl, 0, size.modules)
	l.m.Params = make([]Param, 0, size.params)
	l.moduleByName = make(map[string]ModuleID, size.modules)
	l.paramByName = make(map[string]ParamID, size.params)
	l.m.Modules = append(l.m.Modules, Module{ID: 0, Kind: KindContainer, Parent: NoModule, Instance: -1})
	l.decl = append(l.decl, nil)
	l.moduleByName[""] = 0
	inh := inherited{dtype: l.defaultDType, requiresGrad: true}
	l.addParams(0, rootParams, inh)
	for _, md := range rootModules {
		l.expand(md, 0, inh)
	}
	l.register(0, rootReg)
	if len(rootModules) == 0 && len(rootParams) == 0 && !l.d.diags.HasErrors() {
		l.d.keyErrorf("", "the model declares no modules: add [[module]] entries")
	}
}

func (l *lowerer) newModule(parent ModuleID, local string, kind Kind, md *moduleDecl) ModuleID {
	if len(l.m.Modules) >= maxModules {
		if !l.tooBig {
			l.tooBig = true
			path := ""
			if md != nil {
				path = md.path
			}
			l.d.limitErrorf(path, "the model expands to more than %d modules, fsdpc's limit", maxModules)
		}
		return -1
	}
	name := local
	if pn := l.m.Modules[parent].Name; pn != "" {
		name = pn + "." + local
	}
	_, dup := l.moduleByName[name]
	_, clash := l.paramByName[name]
	switch {
	case (dup || clash) && md != nil:
		what := "module %q is declared twice"
		if !dup {
			what = "module %q has the name of a parameter"
		}
		l.d.errorf(childPath(md.path, "name"), what, name)
		return -1
	case dup || clash:
		// A child a kind makes: two roles given one name in names, or a
		// [[param]] of the kind module named like a child.
		decl := l.declOf(parent)
		l.d.keyErrorf(decl.path, "module %q of kind %s would have two children, or a child and a parameter, named %q; check names and [[param]] entries", l.m.Modules[parent].Name, decl.kind, local)
		return -1
	}
	id := ModuleID(len(l.m.Modules))
	var pos Pos
	if md != nil {
		pos = l.d.locs[md.path].key
	}
	l.m.Modules = append(l.m.Modules, Module{ID: id, Name: name, Kind: kind, Parent: parent, Instance: -1, Pos: pos})
	l.decl = append(l.decl, md)
	l.m.Modules[parent].Children = append(l.m.Modules[parent].Children, id)
	l.moduleByName[name] = id
	return id
}

// declOf returns the declaration a module comes from: its own, or for a
// module a kind makes, that of the module of that kind.
func (l *lowerer) declOf(id ModuleID) *moduleDecl {
	for ; id > 0; id = l.m.Modules[id].Parent {
		if l.decl[id] != nil {
			return l.decl[id]
		}
	}
	return &moduleDecl{}
}

func (l *lowerer) inherit(md *moduleDecl, inh inherited) inherited {
	if md.dtype != DTypeInvalid {
		inh.dtype, inh.explicitDT = md.dtype, true
	}
	if md.requiresGrad != nil {
		inh.requiresGrad, inh.explicitRG = *md.requiresGrad, true
	}
	return inh
}

// isRegion decides whether an instance or module becomes a checkpoint
// region: instances of repeated modules by default when training
// checkpoints, any module that says checkpoint = true.
func (l *lowerer) isRegion(md *moduleDecl, instance bool, inh inherited) bool {
	if inh.inRegion || inh.inCompute && !instance {
		return false
	}
	if md.checkpoint != nil {
		return *md.checkpoint
	}
	return instance && l.m.Train.Checkpointing != CheckpointNone
}

func (l *lowerer) expand(md *moduleDecl, parent ModuleID, inh inherited) {
	if md.name == "" || l.tooBig {
		return
	}
	inh = l.inherit(md, inh)
	if md.repeat == 0 {
		id := l.newModule(parent, md.name, md.kind, md)
		if id < 0 {
			return
		}
		l.pendInputs(id, md)
		l.fill(id, md, inh, false)
		return
	}
	holder := l.newModule(parent, md.name, KindContainer, md)
	if holder < 0 {
		return
	}
	count := md.repeat
	if n, ok := l.m.repeats[l.m.Modules[holder].Name]; ok {
		count = int64(n)
		if l.resized == nil {
			l.resized = map[string]bool{}
		}
		l.resized[l.m.Modules[holder].Name] = true
	}
	l.m.Modules[holder].Repeat = int(count)
	for _, b := range md.blocks {
		l.m.Modules[holder].Varied = l.m.Modules[holder].Varied || b != md.blocks[0]
	}
	l.pendInputs(holder, md)
	for i := int64(0); i < count && !l.tooBig; i++ {
		id := l.newModule(holder, strconv.FormatInt(i, 10), md.kind, md)
		if id < 0 {
			return
		}
		l.m.Modules[id].Instance = int(i)
		l.fill(id, md, inh, true)
	}
}

func (l *lowerer) pendInputs(id ModuleID, md *moduleDecl) {
	if md.hasInputs {
		l.inputs = append(l.inputs, pendingInputs{module: id, names: md.inputs, path: childPath(md.path, "inputs")})
	}
}

// fill gives a module its parameters and children from its declaration.
func (l *lowerer) fill(id ModuleID, md *moduleDecl, inh inherited, instance bool) {
	region := l.isRegion(md, instance, inh)
	if region && instance && md.checkpoint == nil && l.m.Train.Checkpointing == CheckpointSelectiveLayer {
		// torchtitan counts blocks from 1 and wraps every interval-th.
		region = int64(l.m.Modules[id].Instance+1)%max(l.m.Train.CheckpointInterval, 1) == 0
	}
	l.m.Modules[id].Checkpoint = region
	inh.inRegion = inh.inRegion || region

	explicitCost := md.flopsFwd != nil || md.flopsBwd != nil || md.actBytes != nil
	block := md.block
	if len(md.blocks) > 0 && instance {
		block = md.blocks[l.m.Modules[id].Instance%len(md.blocks)]
	}
	if instance {
		l.m.Modules[id].Block = block
	}
	switch {
	case md.spec != nil:
		shape, err := md.kind.shape(md.attrs)
		if err != nil {
			l.d.keyErrorf(md.path, "module %q: %v", l.m.Modules[id].Name, err)
			return
		}
		l.m.Modules[id].Compute = !inh.inCompute
		inh.inCompute = true
		l.addParams(id, md.params, inh)
		l.addSpecParams(id, shape.params, inh)
		l.addSpecChildren(id, shape.children, inh)
		// Children of its own, registered after the kind's (T5's
		// relative_attention_bias): parameter holders inside the node.
		for _, c := range md.children {
			l.expand(c, id, inh)
		}
	case block != "":
		b, ok := l.blocks[block]
		if !ok {
			msg := fmt.Sprintf("unknown block %q", block)
			if s := suggest(block, sortedKeys(l.blocks)); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			l.d.errorf(l.blockKey(md), "%s", msg)
			return
		}
		for i, name := range l.blockPath {
			if name == block {
				cycle := append(append([]string(nil), l.blockPath[i:]...), block)
				l.d.errorf(l.blockKey(md), "block %q contains itself: %s", block, strings.Join(cycle, " -> "))
				return
			}
		}
		b.used = true
		l.m.Modules[id].Compute = explicitCost && !inh.inCompute
		inh.inCompute = inh.inCompute || explicitCost
		l.blockPath = append(l.blockPath, block)
		l.addParams(id, md.params, inh)
		l.addParams(id, b.params, inh)
		for _, c := range b.modules {
			l.expand(c, id, inh)
		}
		l.blockPath = l.blockPath[:len(l.blockPath)-1]
		reg := md.register
		if reg.path == "" {
			reg = b.register
		}
		l.register(id, reg)
		out := md.output
		if out.path == "" {
			out = b.output
		}
		l.output(id, out, inh)
	default:
		leaf := len(md.children) == 0
		if leaf && len(md.params) == 0 && !explicitCost {
			l.d.keyErrorf(md.path, "module %q is empty: give it a kind, child modules, params or explicit costs", l.m.Modules[id].Name)
		}
		if leaf {
			l.m.Modules[id].Kind = KindCustom
		}
		l.m.Modules[id].Compute = (leaf || explicitCost) && !inh.inCompute
		inh.inCompute = inh.inCompute || l.m.Modules[id].Compute
		l.addParams(id, md.params, inh)
		for _, c := range md.children {
			l.expand(c, id, inh)
		}
		l.register(id, md.register)
		l.output(id, md.output, inh)
	}
	if md.tiedTo != "" {
		l.tieOwn(id, md, "weight", md.tiedTo, "tied_to")
	}
	if md.biasTiedTo != "" {
		l.tieOwn(id, md, "bias", md.biasTiedTo, "bias_tied_to")
	}
}

// blockKey is where a module names its block, for messages.
func (l *lowerer) blockKey(md *moduleDecl) string {
	if len(md.blocks) > 0 {
		return childPath(md.path, "blocks")
	}
	return childPath(md.path, "block")
}

// output records whether a container returns a tensor of its own. A
// compute module always does, and the children of one only hold
// parameters, so the key is refused on both.
func (l *lowerer) output(id ModuleID, out outputDecl, inh inherited) {
	if out.path == "" {
		return
	}
	mod := &l.m.Modules[id]
	if mod.Compute || inh.inCompute {
		what := "is a node of the dataflow graph (explicit costs or a parameter-only leaf) and computes its own output"
		if !mod.Compute {
			what = "sits inside a compute module, whose children only hold parameters"
		}
		l.d.errorf(out.path, "module %s %s; output applies to containers", displayModule(mod.Name), what)
		return
	}
	mod.OwnOutput = out.own
}

// register gives a container its children in registration order: reg must
// name every child exactly once.
func (l *lowerer) register(id ModuleID, reg registration) {
	if reg.path == "" {
		return
	}
	mod := &l.m.Modules[id]
	byLocal := make(map[string]ModuleID, len(mod.Children))
	locals := make([]string, 0, len(mod.Children))
	for _, c := range mod.Children {
		local := l.m.Modules[c].Name[strings.LastIndexByte(l.m.Modules[c].Name, '.')+1:]
		byLocal[local] = c
		locals = append(locals, local)
	}
	order := make([]ModuleID, 0, len(reg.names))
	seen := map[string]bool{}
	for _, n := range reg.names {
		c, ok := byLocal[n]
		switch {
		case !ok:
			msg := fmt.Sprintf("register names %q, which is not a child of %s (children: %s)", n, displayModule(mod.Name), strings.Join(locals, ", "))
			if s := suggest(n, locals); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			l.d.errorf(reg.path, "%s", msg)
			return
		case seen[n]:
			l.d.errorf(reg.path, "register names %q twice", n)
			return
		}
		seen[n] = true
		order = append(order, c)
	}
	for _, n := range locals {
		if !seen[n] {
			l.d.errorf(reg.path, "register must name every child of %s once; %q is missing", displayModule(mod.Name), n)
			return
		}
	}
	mod.Registered = order
}

func displayModule(name string) string {
	if name == "" {
		return "the model"
	}
	return fmt.Sprintf("%q", name)
}

// tieOwn ties the kind module's own parameter local ("weight", "bias") to
// target, as its key (tied_to, bias_tied_to) says.
func (l *lowerer) tieOwn(id ModuleID, md *moduleDecl, local, target, key string) {
	for _, pid := range l.m.Modules[id].Params {
		if l.m.Params[pid].Local == local {
			l.ties = append(l.ties, pendingTie{param: pid, target: target, path: childPath(md.path, key),
				explicitDType: md.dtype != DTypeInvalid, declaredDType: md.dtype,
				explicitGrad: md.requiresGrad != nil, declaredRequireGrad: md.requiresGrad != nil && *md.requiresGrad})
			return
		}
	}
	if l.tooLarge {
		return // its weight was refused for the limit, already reported
	}
	l.d.keyErrorf(childPath(md.path, key), "module %q has no %s to tie", l.m.Modules[id].Name, local)
}

func (l *lowerer) addSpecChildren(parent ModuleID, children []childSpec, inh inherited) {
	for _, c := range children {
		id := l.newModule(parent, c.name, c.kind, nil)
		if id < 0 {
			return
		}
		l.m.Modules[id].Pos = l.m.Modules[parent].Pos
		l.addSpecParams(id, c.params, inh)
		l.addSpecChildren(id, c.children, inh)
	}
}

func (l *lowerer) addSpecParams(module ModuleID, specs []paramSpec, inh inherited) {
	for _, s := range specs {
		rg := inh.requiresGrad || s.trainable
		l.newParam(module, s.local, s.shape, inh.dtype, rg, "")
	}
}

func (l *lowerer) addParams(module ModuleID, decls []*paramDecl, inh inherited) {
	for _, p := range decls {
		if p.name == "" || p.shape == nil {
			continue
		}
		dt, rg := inh.dtype, inh.requiresGrad
		if p.dtype != DTypeInvalid {
			dt = p.dtype
		}
		if p.requiresGrad != nil {
			rg = *p.requiresGrad
		}
		id := l.newParam(module, p.name, p.shape, dt, rg, p.path)
		if id >= 0 && p.tiedTo != "" {
			l.ties = append(l.ties, pendingTie{param: id, target: p.tiedTo, path: childPath(p.path, "tied_to"),
				explicitDType: p.dtype != DTypeInvalid || inh.explicitDT, declaredDType: dt,
				explicitGrad: p.requiresGrad != nil || inh.explicitRG, declaredRequireGrad: rg})
		}
	}
}

func (l *lowerer) newParam(module ModuleID, local string, shape []int64, dt DType, rg bool, path string) ParamID {
	if len(l.m.Params) >= maxParams {
		if !l.tooBig {
			l.tooBig = true
			l.d.limitErrorf(path, "the model has more than %d parameter tensors, fsdpc's limit", maxParams)
		}
		return -1
	}
	mod := &l.m.Modules[module]
	name := local
	if mod.Name != "" {
		name = mod.Name + "." + local
	}
	// A problem is placed at the [[param]] entry's key or, for a parameter
	// a kind makes, at the module of that kind.
	report := func(key, format string, args ...any) {
		if path != "" {
			l.d.errorf(childPath(path, key), format, args...)
		} else {
			l.d.keyErrorf(l.declOf(module).path, format, args...)
		}
	}
	numel := int64(1)
	for _, d := range shape {
		var ok bool
		if numel, ok = checked.Mul(numel, d); !ok {
			report("shape", "parameter %q: shape %s has more elements than fit in 64 bits", name, formatShape(shape))
			return -1
		}
	}
	if _, ok := checked.Mul(numel, dt.Size()); !ok {
		report("shape", "parameter %q: %d elements of %s overflow 64-bit byte counts", name, numel, dt)
		return -1
	}
	// The planner multiplies element counts by bytes per element, by the
	// optimizer's states and by micro-batches and sums them over the whole
	// model; capping the model's elements keeps every such figure far
	// inside int64 instead of letting it wrap to a negative "fits".
	if l.numel += numel; l.numel > maxModelElements {
		if !l.tooLarge { // once: every later parameter is past it too
			l.tooLarge = true
			at := l.declOf(module).path
			if path != "" {
				at = childPath(path, "shape")
			}
			l.d.limitErrorf(at, "parameter %q takes the model past %d parameter elements (2^44, about 17.6 trillion), fsdpc's limit", name, int64(maxModelElements))
		}
		return -1
	}
	// PyTorch refuses requires_grad on integer and bool tensors, so such a
	// parameter can only be frozen; training it would plan gradients and
	// optimizer states that cannot exist.
	if rg && !dt.IsFloat() {
		report("name", "parameter %q is %s and requires a gradient, but only floating-point parameters can (PyTorch refuses requires_grad on %s tensors): set requires_grad = false or a floating-point dtype", name, dt, dt)
		return -1
	}
	if _, clash := l.moduleByName[name]; clash {
		report("name", "parameter %q has the name of a module", name)
		return -1
	}
	if _, dup := l.paramByName[name]; dup {
		if path == "" {
			report("name", "parameter %q is made by the module's kind and also declared by a [[param]]", name)
		} else {
			report("name", "parameter %q is declared twice", name)
		}
		return -1
	}
	id := ParamID(len(l.m.Params))
	var pos Pos
	if path != "" {
		pos = l.d.locs[path].key
	} else {
		pos = mod.Pos
	}
	l.m.Params = append(l.m.Params, Param{ID: id, Name: name, Module: module, Local: local,
		Shape: append([]int64(nil), shape...), DType: dt, RequiresGrad: rg, TiedTo: NoParam, Numel: numel, Pos: pos})
	mod.Params = append(mod.Params, id)
	l.paramByName[name] = id
	return id
}

// resolveTies links each tied parameter to the parameter that owns the
// storage, following chains.
func (l *lowerer) resolveTies() {
	for _, t := range l.ties {
		target, ok := l.paramByName[t.target]
		if !ok {
			msg := fmt.Sprintf("tied_to %q: no such parameter", t.target)
			if len(l.m.Params) <= 100_000 {
				if s := suggest(t.target, paramNames(l.m.Params)); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
			}
			l.d.errorf(t.path, "%s", msg)
			continue
		}
		l.m.Params[t.param].TiedTo = target
	}
	// Follow chains to the owner; a chain that returns to where it started
	// is a cycle.
	for _, t := range l.ties {
		p := &l.m.Params[t.param]
		if p.TiedTo == NoParam {
			continue
		}
		owner, steps := p.TiedTo, 0
		for l.m.Params[owner].TiedTo != NoParam && owner != t.param && steps <= len(l.ties) {
			owner = l.m.Params[owner].TiedTo
			steps++
		}
		if owner == t.param || steps > len(l.ties) {
			switch {
			case p.TiedTo == t.param:
				l.d.errorf(t.path, "parameter %q is tied to itself", p.Name)
			case owner == t.param:
				l.d.errorf(t.path, "parameter %q is tied to itself through a cycle of tied_to: %s", p.Name, l.tieChain(t.param))
			default:
				l.d.errorf(t.path, "parameter %q is tied into a cycle of tied_to: %s", p.Name, l.tieChain(t.param))
			}
			p.TiedTo = NoParam
			continue
		}
		o := &l.m.Params[owner]
		switch {
		case !equalShape(p.Shape, o.Shape):
			l.d.errorf(t.path, "parameter %q has shape %s but is tied to %q of shape %s", p.Name, formatShape(p.Shape), o.Name, formatShape(o.Shape))
			p.TiedTo = NoParam
			continue
		case t.explicitDType && t.declaredDType != o.DType:
			l.d.errorf(t.path, "parameter %q is declared %s but is tied to %q, which is %s", p.Name, t.declaredDType, o.Name, o.DType)
		case t.explicitGrad && t.declaredRequireGrad != o.RequiresGrad:
			l.d.errorf(t.path, "parameter %q sets requires_grad = %v but is tied to %q, which has %v: a tied parameter is one tensor", p.Name, t.declaredRequireGrad, o.Name, o.RequiresGrad)
		}
		p.TiedTo, p.DType, p.RequiresGrad = owner, o.DType, o.RequiresGrad
	}
}

// tieChain spells the tied_to chain from p until it repeats: "a -> b -> a".
func (l *lowerer) tieChain(p ParamID) string {
	var names []string
	seen := map[ParamID]bool{}
	for q := p; q != NoParam; q = l.m.Params[q].TiedTo {
		if len(names) == 10 {
			names = append(names, "…")
			break
		}
		names = append(names, l.m.Params[q].Name)
		if seen[q] {
			break
		}
		seen[q] = true
	}
	return strings.Join(names, " -> ")
}

// formatShape writes a shape as a model file does: [4096, 128256].
func formatShape(shape []int64) string {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(dims, ", ") + "]"
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func paramNames(ps []Param) []string {
	out := make([]string, len(ps))
	for i := range ps {
		out[i] = ps[i].Name
	}
	return out
}
