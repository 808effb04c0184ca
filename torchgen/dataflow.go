package torchgen

import (
	"fmt"

	"github.com/fsdpc/fsdpc/ir"
)

// dataflow is what each module of the mirror takes and returns, by compute
// module name (see Node).
type dataflow struct {
	ext, outs [][]string
}

// mirror builds the spec's module tree with the model's dataflow. The
// mirror runs children in declaration order, as the model file lists them;
// a module that reads a later sibling's output cannot run that way and is
// refused, naming both.
func mirror(m *ir.Model) (Node, error) {
	for _, mod := range m.Modules[1:] {
		if err := torchName("module", mod.Name); err != nil {
			return Node{}, err
		}
	}
	for _, p := range m.Params {
		if err := torchName("parameter", p.Name); err != nil {
			return Node{}, err
		}
	}
	df, err := flowOf(m)
	if err != nil {
		return Node{}, err
	}
	return node(m, 0, df), nil
}

func flowOf(m *ir.Model) (*dataflow, error) {
	n := len(m.Modules)
	// computeOf[id] lists the compute modules of id's subtree in
	// declaration pre-order (a compute module's children hold parameters
	// only, so its list is itself).
	computeOf := make([][]ir.ModuleID, n)
	var walk func(id ir.ModuleID) []ir.ModuleID
	walk = func(id ir.ModuleID) []ir.ModuleID {
		if m.Modules[id].Compute {
			computeOf[id] = []ir.ModuleID{id}
			return computeOf[id]
		}
		var all []ir.ModuleID
		for _, c := range m.Modules[id].Children {
			all = append(all, walk(c)...)
		}
		computeOf[id] = all
		return all
	}
	walk(0)
	readers := make([]int, n)
	for _, c := range computeOf[0] {
		for _, s := range m.Modules[c].Inputs {
			readers[s]++
		}
	}
	df := &dataflow{ext: make([][]string, n), outs: make([][]string, n)}
	for id := range m.Modules {
		inside := make(map[ir.ModuleID]bool, len(computeOf[id]))
		for _, c := range computeOf[id] {
			inside[c] = true
		}
		seen := map[ir.ModuleID]bool{}
		readOutside := map[ir.ModuleID]bool{}
		for _, c := range computeOf[0] {
			for _, s := range m.Modules[c].Inputs {
				if inside[s] && !inside[c] {
					readOutside[s] = true
				}
			}
		}
		for _, c := range computeOf[id] {
			for _, s := range m.Modules[c].Inputs {
				if !inside[s] && !seen[s] {
					seen[s] = true
					df.ext[id] = append(df.ext[id], m.Modules[s].Name)
				}
			}
			// What leaves the subtree: outputs read outside it, and the
			// model's outputs (read by nothing), which reach the loss.
			if readOutside[c] || readers[c] == 0 {
				df.outs[id] = append(df.outs[id], m.Modules[c].Name)
			}
		}
	}
	// Each child's inputs must exist when it runs: come from outside its
	// parent, or from a sibling declared before it.
	for id := range m.Modules {
		mod := &m.Modules[id]
		if mod.Compute {
			continue
		}
		avail := map[string]bool{}
		for _, s := range df.ext[id] {
			avail[s] = true
		}
		for _, c := range mod.Children {
			for _, s := range df.ext[c] {
				if !avail[s] {
					return nil, fmt.Errorf("module %q reads %q, which is declared after it; the torch mirror runs modules in declaration order", m.Modules[c].Name, s)
				}
			}
			for _, d := range computeOf[c] {
				avail[m.Modules[d].Name] = true
			}
		}
	}
	return df, nil
}
