package ir

import (
	"fmt"
	"math"
	"strings"

	"github.com/fsdpc/fsdpc/internal/checked"
)

// Verify checks the IR's invariants. Load runs it on every model it
// returns; passes that build or change a Model run it in tests. A failure is
// a bug in fsdpc, not in the user's file.
func Verify(m *Model) error {
	v := &verifier{m: m}
	v.modules()
	v.params()
	v.dataflow()
	v.settings()
	if len(v.errs) > 0 {
		if len(v.errs) > 10 {
			v.errs = append(v.errs[:10], fmt.Sprintf("… and %d more", len(v.errs)-10))
		}
		return fmt.Errorf("ir.Verify: %s", strings.Join(v.errs, "; "))
	}
	return nil
}

type verifier struct {
	m    *Model
	errs []string
}

func (v *verifier) errorf(format string, args ...any) {
	if len(v.errs) <= 10 {
		v.errs = append(v.errs, fmt.Sprintf(format, args...))
	}
}

func (v *verifier) modules() {
	m := v.m
	if len(m.Modules) == 0 {
		v.errorf("no root module")
		return
	}
	if r := m.Modules[0]; r.Name != "" || r.Parent != NoModule {
		v.errorf("module 0 is not the root: name %q, parent %d", r.Name, r.Parent)
	}
	names := make(map[string]bool, len(m.Modules))
	listed := 0 // every module but the root must be listed as a child exactly once
	for i := range m.Modules {
		mod := &m.Modules[i]
		if mod.ID != ModuleID(i) {
			v.errorf("module %q has ID %d at index %d", mod.Name, mod.ID, i)
		}
		if names[mod.Name] {
			v.errorf("module name %q is not unique", mod.Name)
		}
		names[mod.Name] = true
		if i > 0 {
			if mod.Parent < 0 || mod.Parent >= ModuleID(i) {
				v.errorf("module %q: parent %d does not precede it", mod.Name, mod.Parent)
				continue
			}
			parent := &m.Modules[mod.Parent]
			local := mod.Name[strings.LastIndexByte(mod.Name, '.')+1:]
			if want := joinName(parent.Name, local); want != mod.Name {
				v.errorf("module %q: name does not extend its parent's %q", mod.Name, parent.Name)
			}
			if mod.Compute {
				for p := mod.Parent; p != NoModule; p = m.Modules[p].Parent {
					if m.Modules[p].Compute {
						v.errorf("compute module %q is inside compute module %q", mod.Name, m.Modules[p].Name)
					}
				}
			}
		}
		listed += len(mod.Children)
		for j, c := range mod.Children {
			if c <= ModuleID(i) || int(c) >= len(m.Modules) || m.Modules[c].Parent != ModuleID(i) {
				v.errorf("module %q: child %d is not its child", mod.Name, c)
			} else if j > 0 && c <= mod.Children[j-1] {
				v.errorf("module %q: children out of declaration order", mod.Name)
			}
		}
		if mod.Repeat > 0 && len(mod.Children) != mod.Repeat {
			v.errorf("module %q repeats %d times but has %d children", mod.Name, mod.Repeat, len(mod.Children))
		}
		c := mod.Cost
		for _, x := range []float64{c.FlopsFwd, c.FlopsBwd, c.FlopsRecompute} {
			if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				v.errorf("module %q has a bad FLOP count %v", mod.Name, x)
			}
		}
		if c.ActivationBytes < 0 || c.RecomputeBytes < 0 {
			v.errorf("module %q has negative activation bytes", mod.Name)
		}
		if c.FlopsRecompute > c.FlopsBwd*(1+1e-12) {
			v.errorf("module %q: recompute FLOPs exceed backward FLOPs", mod.Name)
		}
		if !mod.Compute && len(mod.Inputs) > 0 {
			v.errorf("module %q has inputs but is not a compute module", mod.Name)
		}
	}
	if listed != len(m.Modules)-1 {
		v.errorf("%d modules are listed as children, want %d", listed, len(m.Modules)-1)
	}
	// A container's FLOPs are the sum over its children.
	for i := range m.Modules {
		mod := &m.Modules[i]
		if mod.Compute || len(mod.Children) == 0 {
			continue
		}
		var sum float64
		for _, c := range mod.Children {
			sum += m.Modules[c].Cost.FlopsFwd
		}
		if math.Abs(sum-mod.Cost.FlopsFwd) > 1e-9*math.Max(1, sum) {
			v.errorf("module %q: forward FLOPs %g are not the sum of its children's %g", mod.Name, mod.Cost.FlopsFwd, sum)
		}
	}
}

func joinName(parent, local string) string {
	if parent == "" {
		return local
	}
	return parent + "." + local
}

func (v *verifier) params() {
	m := v.m
	names := make(map[string]bool, len(m.Params))
	for i := range m.Params {
		p := &m.Params[i]
		if p.ID != ParamID(i) {
			v.errorf("param %q has ID %d at index %d", p.Name, p.ID, i)
		}
		if names[p.Name] {
			v.errorf("param name %q is not unique", p.Name)
		}
		names[p.Name] = true
		if p.Module < 0 || int(p.Module) >= len(m.Modules) {
			v.errorf("param %q: bad module %d", p.Name, p.Module)
			continue
		}
		mod := &m.Modules[p.Module]
		if joinName(mod.Name, p.Local) != p.Name {
			v.errorf("param %q is not named after its module %q", p.Name, mod.Name)
		}
		found := false
		for _, q := range mod.Params {
			found = found || q == p.ID
		}
		if !found {
			v.errorf("param %q is missing from its module's params", p.Name)
		}
		if len(p.Shape) == 0 {
			v.errorf("param %q is a scalar", p.Name)
		}
		n := int64(1)
		for _, d := range p.Shape {
			var ok bool
			if d < 1 {
				v.errorf("param %q has dimension %d", p.Name, d)
			}
			if n, ok = checked.Mul(n, d); !ok {
				v.errorf("param %q: numel overflows", p.Name)
			}
		}
		if n != p.Numel {
			v.errorf("param %q: numel %d, shape gives %d", p.Name, p.Numel, n)
		}
		if p.DType == DTypeInvalid || p.DType.Size() == 0 {
			v.errorf("param %q has no dtype", p.Name)
		}
		if t := p.TiedTo; t != NoParam {
			switch {
			case t < 0 || int(t) >= len(m.Params) || t == p.ID:
				v.errorf("param %q: bad tie %d", p.Name, t)
			case m.Params[t].TiedTo != NoParam:
				v.errorf("param %q is tied to %q, which is itself an alias", p.Name, m.Params[t].Name)
			case !equalShape(p.Shape, m.Params[t].Shape) || p.DType != m.Params[t].DType || p.RequiresGrad != m.Params[t].RequiresGrad:
				v.errorf("param %q differs from %q, to which it is tied", p.Name, m.Params[t].Name)
			}
		}
	}
}

func (v *verifier) dataflow() {
	m := v.m
	pos := make(map[ModuleID]int, len(m.Forward))
	for i, id := range m.Forward {
		if id < 0 || int(id) >= len(m.Modules) || !m.Modules[id].Compute {
			v.errorf("forward order holds %d, which is not a compute module", id)
			continue
		}
		if _, dup := pos[id]; dup {
			v.errorf("module %q appears twice in the forward order", m.Modules[id].Name)
		}
		pos[id] = i
	}
	for i := range m.Modules {
		mod := &m.Modules[i]
		if !mod.Compute {
			continue
		}
		at, ok := pos[mod.ID]
		if !ok {
			v.errorf("compute module %q is missing from the forward order", mod.Name)
			continue
		}
		needs := false
		for _, in := range mod.Inputs {
			if p, ok := pos[in]; !ok || p >= at {
				v.errorf("module %q runs before its input %q", mod.Name, m.Modules[in].Name)
			} else if m.Modules[in].OutputRequiresGrad {
				needs = true
			}
		}
		if needs != mod.InputsRequireGrad {
			v.errorf("module %q: InputsRequireGrad is %v, its inputs say %v", mod.Name, mod.InputsRequireGrad, needs)
		}
		if !mod.OutputRequiresGrad && mod.Cost.FlopsBwd != 0 {
			v.errorf("module %q has backward FLOPs but no gradient flows through it", mod.Name)
		}
	}
}

func (v *verifier) settings() {
	m := v.m
	t, c := m.Train, m.Cluster
	if t.MicroBatch < 1 || t.SeqLen < 1 || t.GradAccum < 1 {
		v.errorf("train sizes must be positive: %+v", t)
	}
	if !t.ActivationDType.IsFloat() {
		v.errorf("activation dtype %s is not a float", t.ActivationDType)
	}
	if c.WorldSize < 1 || c.GPUsPerNode < 1 {
		v.errorf("cluster sizes must be positive: world %d, per node %d", c.WorldSize, c.GPUsPerNode)
	}
	if c.Mesh != nil && c.Mesh.Replicate*c.Mesh.Shard != c.WorldSize {
		v.errorf("mesh %d×%d does not cover world size %d", c.Mesh.Replicate, c.Mesh.Shard, c.WorldSize)
	}
	if c.MemoryBudget <= 0 {
		v.errorf("memory budget must be positive")
	}
}
