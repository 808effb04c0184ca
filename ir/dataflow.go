package ir

import (
	"container/heap"
	"fmt"
	"sort"
	"strings"

	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

// The dataflow graph has one node per compute module. A module reads the
// output of its previous sibling, or its parent's input when it is the first
// child, unless it names its inputs; a container's output is its last
// child's.

// exits computes, for every module, the compute modules whose outputs make
// up its output: itself for a compute module; for a container, the exits of
// the children nothing else inside the container reads. In a chain that is
// the last child; in a block whose MLP and attention both read the norm,
// both branches; a stack-level table read only from inside its blocks is
// not part of the stack's output.
func (m *Model) exits(explicit map[ModuleID][]ModuleID) [][]ModuleID {
	consumed := make([]bool, len(m.Modules))
	for id := range m.Modules {
		mod := &m.Modules[id]
		if mod.Parent == NoModule {
			continue
		}
		srcs, ok := explicit[ModuleID(id)]
		if !ok {
			// Implicitly, a module reads its previous sibling.
			siblings := m.Modules[mod.Parent].Children
			if i := sort.Search(len(siblings), func(i int) bool { return siblings[i] >= ModuleID(id) }); i > 0 {
				consumed[siblings[i-1]] = true
			}
			continue
		}
		for _, src := range srcs {
			if c, ok := m.childTowards(ModuleID(id), src); ok {
				consumed[c] = true
			}
		}
	}
	out := make([][]ModuleID, len(m.Modules))
	for id := len(m.Modules) - 1; id >= 0; id-- {
		mod := &m.Modules[id]
		if mod.Compute {
			out[id] = []ModuleID{ModuleID(id)}
			continue
		}
		for _, c := range mod.Children {
			if !consumed[c] {
				out[id] = append(out[id], out[c]...)
			}
		}
	}
	return out
}

// childTowards returns, for a reader and the module it reads, the child of
// their lowest common ancestor on the way to the module read: the one the
// read consumes. There is none when one contains the other.
func (m *Model) childTowards(reader, src ModuleID) (ModuleID, bool) {
	depth := func(x ModuleID) int {
		d := 0
		for ; x != 0; x = m.Modules[x].Parent {
			d++
		}
		return d
	}
	a, b := reader, src
	da, db := depth(a), depth(b)
	var belowB ModuleID = -1
	for db > da {
		belowB, b = b, m.Modules[b].Parent
		db--
	}
	for da > db {
		a = m.Modules[a].Parent
		da--
	}
	for a != b {
		a = m.Modules[a].Parent
		belowB, b = b, m.Modules[b].Parent
	}
	return belowB, belowB >= 0 && a != src
}

// ParentInput in a module's inputs names its container's own input: what
// the container reads, not a module. Inside a repeated block it is each
// instance's input (the previous layer's output), so a block whose norm
// reads the residual stream beside its attention (GPT-NeoX's parallel
// residual) is one body for every layer. No module is named "..": a
// name has no dot (ValidName), as in PyTorch.
const ParentInput = ".."

func (l *lowerer) buildDataflow() {
	m := l.m
	// Resolve the names in inputs to modules first: which siblings are read
	// decides what a container outputs.
	explicit := make(map[ModuleID][]ModuleID, len(l.inputs))
	// readsParent: modules whose inputs name ParentInput, the input of
	// the container they sit in (a block's residual stream).
	readsParent := map[ModuleID]bool{}
	for _, p := range l.inputs {
		var srcs []ModuleID
		parent := m.Modules[p.module].Parent
		for i, name := range p.names {
			path := indexPath(p.path, i)
			if name == ParentInput {
				readsParent[p.module] = true
				continue
			}
			src, ok := l.resolveModule(parent, name)
			if !ok {
				l.d.errorf(path, "inputs: no module %q%s", name, l.nearModule(parent, name))
				continue
			}
			if src == p.module {
				l.d.errorf(path, "module %q lists itself in inputs", m.Modules[src].Name)
				continue
			}
			// A module's input feeds its first children, and a container's
			// output is its children's: reading a module inside it, or one
			// it sits inside, is a cycle through the hierarchy.
			if isAncestor(m, p.module, src) {
				l.d.errorf(path, "module %q reads %q, which is inside it: its inputs feed its children, so this is a cycle; read a module outside it", m.Modules[p.module].Name, m.Modules[src].Name)
				continue
			}
			if isAncestor(m, src, p.module) {
				l.d.errorf(path, "module %q reads %q, which it is inside: that module's output is made by its children, this one among them, so this is a cycle", m.Modules[p.module].Name, m.Modules[src].Name)
				continue
			}
			srcs = append(srcs, src)
		}
		explicit[p.module] = srcs
	}
	if l.d.diags.HasErrors() {
		return
	}
	exits := m.exits(explicit)
	for _, p := range l.inputs {
		for i, src := range explicit[p.module] {
			if len(exits[src]) == 0 {
				l.d.errorf(indexPath(p.path, i), "inputs: module %q computes nothing", m.Modules[src].Name)
			}
		}
	}
	if l.d.diags.HasErrors() {
		return
	}

	// inputsOf walks the tree once, handing each module its input set: the
	// exits of what it names, of its previous sibling, or its parent's.
	inputsOf := make([][]ModuleID, len(m.Modules))
	for id := range m.Modules {
		mod := &m.Modules[id]
		if mod.Parent == NoModule {
			continue
		}
		if srcs, ok := explicit[ModuleID(id)]; ok {
			if readsParent[ModuleID(id)] {
				// A parent's id is below its children's: its set is made.
				inputsOf[id] = append(inputsOf[id], inputsOf[mod.Parent]...)
			}
			for _, s := range srcs {
				inputsOf[id] = append(inputsOf[id], exits[s]...)
			}
			continue
		}
		siblings := m.Modules[mod.Parent].Children
		idx := sort.Search(len(siblings), func(i int) bool { return siblings[i] >= ModuleID(id) })
		if idx > 0 && len(exits[siblings[idx-1]]) > 0 {
			inputsOf[id] = exits[siblings[idx-1]]
			continue
		}
		inputsOf[id] = inputsOf[mod.Parent]
	}

	for id := range m.Modules {
		mod := &m.Modules[id]
		if !mod.Compute {
			continue
		}
		var seen map[ModuleID]bool // for many inputs: a linear search would be quadratic
		if len(inputsOf[id]) > 64 {
			seen = make(map[ModuleID]bool, len(inputsOf[id]))
		}
		for _, src := range inputsOf[id] {
			if src == ModuleID(id) || seen != nil && seen[src] || seen == nil && containsModule(mod.Inputs, src) {
				continue
			}
			if seen != nil {
				seen[src] = true
			}
			mod.Inputs = append(mod.Inputs, src)
		}
	}
	l.order()
}

func containsModule(ids []ModuleID, id ModuleID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (l *lowerer) resolveModule(parent ModuleID, name string) (ModuleID, bool) {
	if pn := l.m.Modules[parent].Name; pn != "" {
		if id, ok := l.moduleByName[pn+"."+name]; ok {
			return id, true
		}
	}
	id, ok := l.moduleByName[name]
	return id, ok && name != ""
}

func (l *lowerer) nearModule(parent ModuleID, name string) string {
	var cands []string
	for _, c := range l.m.Modules[parent].Children {
		n := l.m.Modules[c].Name
		cands = append(cands, n[strings.LastIndexByte(n, '.')+1:])
	}
	for _, c := range l.m.Modules[0].Children {
		cands = append(cands, l.m.Modules[c].Name)
	}
	if s := suggest(name, cands); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	if n := len(l.m.Modules[parent].Children); n > 0 && n <= 12 {
		return fmt.Sprintf(" (the modules at this level: %s)", strings.Join(cands[:n], ", "))
	}
	return ""
}

// idHeap pops the smallest module ID, i.e. the one declared first.
type idHeap []ModuleID

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(ModuleID)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// order computes the forward order: Kahn's algorithm, always taking the
// ready module declared first, so a file whose declaration order is already
// a valid order runs in exactly that order.
func (l *lowerer) order() {
	m := l.m
	indeg := make([]int, len(m.Modules))
	users := make([][]ModuleID, len(m.Modules))
	h := &idHeap{}
	for id := range m.Modules {
		mod := &m.Modules[id]
		if !mod.Compute {
			continue
		}
		indeg[id] = len(mod.Inputs)
		for _, src := range mod.Inputs {
			users[src] = append(users[src], ModuleID(id))
		}
		if indeg[id] == 0 {
			*h = append(*h, ModuleID(id))
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		id := heap.Pop(h).(ModuleID)
		m.Forward = append(m.Forward, id)
		for _, u := range users[id] {
			if indeg[u]--; indeg[u] == 0 {
				heap.Push(h, u)
			}
		}
	}
	compute := 0
	for id := range m.Modules {
		if m.Modules[id].Compute {
			compute++
		}
	}
	if len(m.Forward) != compute {
		l.reportCycles()
	}
}

// reportCycles names every cycle's modules in order, starting and ending at
// the module declared first. It runs only on failure, so building the gonum
// graph here costs a valid model nothing.
func (l *lowerer) reportCycles() {
	g := simple.NewDirectedGraph()
	for id := range l.m.Modules {
		if l.m.Modules[id].Compute {
			g.AddNode(simple.Node(id))
		}
	}
	for id := range l.m.Modules {
		for _, src := range l.m.Modules[id].Inputs {
			g.SetEdge(g.NewEdge(simple.Node(src), simple.Node(id)))
		}
	}
	// Where each module's inputs key is, for the first of a cycle's members
	// (or their ancestors) to have one.
	inputsAt := make(map[ModuleID]int, len(l.inputs))
	for i, p := range l.inputs {
		if _, ok := inputsAt[p.module]; !ok {
			inputsAt[p.module] = i
		}
	}
	type cycle struct {
		start int64
		path  string
		names []string
	}
	var cycles []cycle
	for _, scc := range topo.TarjanSCC(g) {
		if len(scc) < 2 {
			continue
		}
		in := map[int64]bool{}
		start := scc[0].ID()
		for _, n := range scc {
			in[n.ID()] = true
			start = min(start, n.ID())
		}
		ids := l.findCycle(start, in)
		names := make([]string, len(ids))
		for i, id := range ids {
			names[i] = l.m.Modules[id].Name
		}
		first := len(l.inputs)
		for _, n := range scc {
			for p := ModuleID(n.ID()); p != NoModule; p = l.m.Modules[p].Parent {
				if i, ok := inputsAt[p]; ok {
					first = min(first, i)
				}
			}
		}
		path := ""
		if first < len(l.inputs) {
			path = l.inputs[first].path
		}
		cycles = append(cycles, cycle{start, path, names})
	}
	// The graph hands components over in no fixed order.
	sort.Slice(cycles, func(i, j int) bool { return cycles[i].start < cycles[j].start })
	for _, c := range cycles {
		l.d.errorf(c.path, "the module inputs form a cycle: %s", strings.Join(c.names, " -> "))
	}
}

// findCycle walks from start along edges inside the component, always to
// the smallest successor, until it returns to start. Following inputs
// backwards (users forwards) is equivalent; users give the forward reading.
func (l *lowerer) findCycle(start int64, in map[int64]bool) []ModuleID {
	users := map[int64][]int64{}
	for id := range in {
		for _, src := range l.m.Modules[id].Inputs {
			if in[int64(src)] {
				users[int64(src)] = append(users[int64(src)], id)
			}
		}
	}
	for id := range users {
		sort.Slice(users[id], func(i, j int) bool { return users[id][i] < users[id][j] })
	}
	// Breadth-first search for the shortest path back to start.
	prev := map[int64]int64{}
	queue := []int64{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, u := range users[cur] {
			if u == start {
				path := []ModuleID{ModuleID(start)}
				for c := cur; c != start; c = prev[c] {
					path = append(path, ModuleID(c))
				}
				path = append(path, ModuleID(start))
				// Reverse the middle so the path reads start -> ... -> start.
				for i, j := 1, len(path)-2; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			if _, seen := prev[u]; !seen && u != start {
				prev[u] = cur
				queue = append(queue, u)
			}
		}
	}
	return []ModuleID{ModuleID(start)}
}

// isAncestor reports whether a is a proper ancestor of b.
func isAncestor(m *Model, a, b ModuleID) bool {
	for p := m.Modules[b].Parent; p != NoModule; p = m.Modules[p].Parent {
		if p == a {
			return true
		}
	}
	return false
}
