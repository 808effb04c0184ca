package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
)

func runZoo(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("zoo", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc zoo\n\nLists the built-in models with their size and target cluster.")
	}
	if code, ok := parseOperands(fl, args, 0); !ok {
		return code
	}
	fmt.Fprintf(stdout, "%-20s %18s %10s  %s\n", "MODEL", "PARAMETERS", "GPUS", "GPU")
	for _, name := range plans.Names() {
		src, file, _ := plans.Source(name)
		m, err := ir.Load(file, src)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		s := m.Stats()
		fmt.Fprintf(stdout, "%-20s %18s %10d  %s\n", name, ir.FormatCount(s.Params), m.Cluster.WorldSize, m.Cluster.GPU.Name)
	}
	return 0
}
