package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/ir/hf"
	"github.com/fsdpc/fsdpc/planner"
)

// maxAutoNodes bounds the nodes import hf tries when no world size is
// given: every count up to 64 nodes (512 GPUs of 8), then doubling to
// 4,096 nodes. Memory per rank is not monotone in the world size (a MoE's
// expert layout, the buffers a wider collective needs), so the counts up
// to 64 are each planned rather than bisected.
const maxAutoNodes = 4096

// smallestWorld is import hf's and import torch's world size when
// --world-size is not given: the fewest whole nodes of opt's GPUs per
// node whose plan fits the memory budget. convert writes the model file
// for a set of options (import hf from the config, import torch from the
// description its one Python run gave); name is the file's name in the
// diagnostics of loading and planning it. It returns opt with that world
// size and the line that says so; when no count up to maxAutoNodes fits,
// one node, and a line that says that and what shows why.
func smallestWorld(name string, opt hf.Options, convert func(hf.Options) ([]byte, error)) (hf.Options, string, error) {
	gpn := opt.GPUsPerNode
	if gpn == 0 {
		gpn = hf.DefaultGPUsPerNode
	}
	gpu := opt.GPU
	if gpu == "" {
		gpu = hf.DefaultGPU
	}
	var firstErr error
	for nodes := 1; nodes <= maxAutoNodes; nodes = nextNodes(nodes) {
		try := opt
		try.WorldSize = nodes * gpn
		text, err := convert(try)
		if err != nil {
			return opt, "", err // the model's own problem: no size helps
		}
		m, err := ir.Load(name, text)
		if err != nil {
			return opt, "", err
		}
		p, err := planner.Plan(m, planner.Options{})
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		fewer := ""
		if nodes > 1 {
			fewer = fmt.Sprintf("; %s do not fit", nodeCount(prevNodes(nodes)))
		}
		return try, fmt.Sprintf("world size %d: %s of %d %s, the fewest whole nodes whose plan fits (reserves %s of the %s budget per GPU%s); --world-size sets another",
			try.WorldSize, nodeCount(nodes), gpn, gpu, ir.FormatBytes(p.Prediction.PeakReserved), ir.FormatBytes(p.Cluster.MemoryBudget), fewer), nil
	}
	opt.WorldSize = gpn
	why := ""
	if firstErr != nil {
		// The message alone: a diagnostic's place is in the TOML the
		// importer generated, not in the config the user gave.
		msg := strings.TrimPrefix(firstErr.Error(), name+": ")
		var ds ir.Diagnostics
		if errors.As(firstErr, &ds) && len(ds) > 0 {
			msg = ds[0].Msg
		}
		why = fmt.Sprintf(" (on one node, %s)", firstLine(msg))
	}
	return opt, fmt.Sprintf("world size %d, one node: no count of whole nodes up to %d fits the memory budget%s; `fsdpc plan` of the model file says what would make it fit", gpn, maxAutoNodes, why), nil
}

// nextNodes is the node count tried after n.
func nextNodes(n int) int {
	if n < 64 {
		return n + 1
	}
	return 2 * n
}

// prevNodes is the node count tried before n (n > 1).
func prevNodes(n int) int {
	if n <= 64 {
		return n - 1
	}
	return n / 2
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
