package ir

import (
	"fmt"

	"github.com/fsdpc/fsdpc/internal/checked"
)

// Before expanding anything, lowering counts what the declarations expand
// to, so that a few lines (repeat = 1000000 around a block that repeats a
// million times, or a chain of blocks each using the next twice) are
// refused at once, at the module that multiplies, instead of after
// building millions of modules.

// extent is how many modules and parameter tensors a declaration expands
// to, saturating far above the limits.
type extent struct{ modules, params int64 }

const extentCap = 1 << 61

func (e extent) plus(o extent) extent {
	return extent{min(e.modules+o.modules, extentCap), min(e.params+o.params, extentCap)}
}

func (e extent) times(n int64) extent {
	mul := func(a int64) int64 {
		if p, ok := checked.Mul(a, n); ok {
			return min(p, extentCap)
		}
		return extentCap
	}
	return extent{mul(e.modules), mul(e.params)}
}

func (e extent) tooBig() bool { return e.modules > maxModules || e.params > maxParams }

type extents struct {
	blocks  map[string]*blockDecl
	modules map[*moduleDecl]extent
	memo    map[string]extent
	active  map[string]bool
}

func (x *extents) module(md *moduleDecl) extent {
	if e, ok := x.modules[md]; ok {
		return e
	}
	one := extent{modules: 1, params: int64(len(md.params))}
	switch {
	case md.spec != nil:
		if shape, err := md.kind.shape(md.attrs); err == nil {
			one = one.plus(specExtent(shape.params, shape.children))
		}
		for _, c := range md.children {
			one = one.plus(x.module(c))
		}
	case md.block != "":
		one = one.plus(x.block(md.block))
	default:
		for _, c := range md.children {
			one = one.plus(x.module(c))
		}
	}
	e := one
	switch {
	case md.repeat > 0 && len(md.blocks) > 0:
		// Instance i is blocks[i mod n]: whole cycles, then a part.
		n := int64(len(md.blocks))
		cycle, part := extent{}, extent{}
		for i, b := range md.blocks {
			inst := extent{modules: 1, params: int64(len(md.params))}.plus(x.block(b))
			cycle = cycle.plus(inst)
			if int64(i) < md.repeat%n {
				part = part.plus(inst)
			}
		}
		e = extent{modules: 1}.plus(cycle.times(md.repeat / n)).plus(part)
	case md.repeat > 0:
		e = extent{modules: 1}.plus(one.times(md.repeat))
	}
	x.modules[md] = e
	return e
}

func specExtent(params []paramSpec, children []childSpec) extent {
	e := extent{params: int64(len(params))}
	for _, c := range children {
		e = e.plus(extent{modules: 1}).plus(specExtent(c.params, c.children))
	}
	return e
}

func (x *extents) block(name string) extent {
	if e, ok := x.memo[name]; ok {
		return e
	}
	b, ok := x.blocks[name]
	if !ok || x.active[name] {
		return extent{} // an unknown or self-including block: expansion reports it
	}
	x.active[name] = true
	e := extent{params: int64(len(b.params))}
	for _, md := range b.modules {
		e = e.plus(x.module(md))
	}
	delete(x.active, name)
	x.memo[name] = e
	return e
}

// checkSize refuses a model that expands to more modules or parameter
// tensors than the limits, naming the innermost declaration that alone
// expands too far. It returns the model's extent and whether it is within
// the limits.
func (l *lowerer) checkSize(modules []*moduleDecl, params []*paramDecl) (extent, bool) {
	x := &extents{blocks: l.blocks, modules: map[*moduleDecl]extent{}, memo: map[string]extent{}, active: map[string]bool{}}
	total := extent{modules: 1, params: int64(len(params))}
	for _, md := range modules {
		total = total.plus(x.module(md))
		if !total.tooBig() {
			continue
		}
		if !x.module(md).tooBig() {
			what, n, limit := describe(total)
			l.d.keyErrorf(md.path, "with module %q the model expands to %s %s; at most %d are supported", displayName(md), n, what, limit)
			return total, false
		}
		culprit := md
		for depth := 0; depth <= maxNesting; depth++ {
			inner := culprit.children
			if culprit.block != "" {
				if b, ok := l.blocks[culprit.block]; ok {
					inner = b.modules
				}
			}
			next := culprit
			for _, c := range inner {
				if x.module(c).tooBig() {
					next = c
					break
				}
			}
			if next == culprit {
				break
			}
			culprit = next
		}
		what, n, limit := describe(x.module(culprit))
		if culprit.repeat > 0 {
			l.d.errorf(childPath(culprit.path, "repeat"), "module %q expands to %s %s (%d repeats); at most %d are supported", displayName(culprit), n, what, culprit.repeat, limit)
		} else {
			l.d.keyErrorf(culprit.path, "module %q expands to %s %s; at most %d are supported", displayName(culprit), n, what, limit)
		}
		return total, false
	}
	return total, true
}

// describe says which limit an extent exceeds: what, how many, the limit.
func describe(e extent) (what, count string, limit int64) {
	what, n, limit := "modules", e.modules, int64(maxModules)
	if e.modules <= maxModules {
		what, n, limit = "parameter tensors", e.params, int64(maxParams)
	}
	count = fmt.Sprint(n)
	if n >= extentCap {
		count = "more than 2^61"
	}
	return what, count, limit
}

func displayName(md *moduleDecl) string {
	if md.name != "" {
		return md.name
	}
	return md.path
}
