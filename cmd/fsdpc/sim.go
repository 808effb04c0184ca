package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

func runSim(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("sim", flag.ContinueOnError)
	fl.SetOutput(stderr)
	trace := fl.String("trace", "", "write a Chrome trace (open it in Perfetto) to this file")
	traceRanks := fl.String("trace-ranks", "", "ranks the trace draws: all, or a list like 0,3,8-15 (default: all of up to 8 ranks, else the first node)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc sim [-trace trace.json [-trace-ranks all|0,3,8-15]] plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "\nSimulates one training step of the plan on its target: step time, exposed communication per group, memory.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if fl.NArg() != 1 {
		fl.Usage()
		return 2
	}
	if err := atomicfile.NotAnInput(*trace, fl.Arg(0)); *trace != "" && err != nil {
		return reportErr(stderr, err) // before the summary, which would read as success
	}
	p, err := loadPlan(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	ranks, err := parseRanks(*traceRanks, p.Cluster.WorldSize, p.Cluster.GPUsPerNode)
	if err != nil {
		return reportErr(stderr, err)
	}
	model := schedule.NewModel(p)
	sim, err := schedule.Simulate(p, model)
	if err != nil {
		return reportErr(stderr, fmt.Errorf("%s: %w", fl.Arg(0), err))
	}
	printSim(stdout, p, sim)
	if *trace != "" {
		var buf bytes.Buffer
		if err := schedule.WriteTrace(&buf, p, sim, schedule.TraceOptions{Model: model, Ranks: ranks}); err != nil {
			return reportErr(stderr, err)
		}
		if err := writeOutput(*trace, buf.Bytes(), fl.Args()); err != nil {
			return reportErr(stderr, fmt.Errorf("writing %s: %w", *trace, err))
		}
		fmt.Fprintf(stdout, "trace: %s, %s (open in https://ui.perfetto.dev)\n", *trace, rankList(ranks, p.Cluster.WorldSize))
	}
	return 0
}

func printSim(w io.Writer, p *schedule.Plan, sim *schedule.Simulation) {
	fmt.Fprintf(w, "plan %s: %d × %s\n", p.Header.Model, p.Cluster.WorldSize, p.Cluster.GPU)
	rows := [][]string{
		{"step time", seconds(sim.StepTime)},
		{"compute alone", seconds(sim.ComputeTime)},
		{"exposed communication", fmt.Sprintf("%s (%.1f%% of the step)", seconds(sim.ExposedComm), 100*sim.ExposedComm/max(sim.StepTime, 1e-12))},
		{"CPU issue", seconds(sim.CPUTime)},
		{"peak memory allocated", ir.FormatBytes(sim.PeakAllocated)},
		{"peak memory reserved", fmt.Sprintf("%s of a %s budget", ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(p.Cluster.MemoryBudget))},
	}
	printTable(w, rows, 1)
	type exposed struct {
		group string
		t     float64
	}
	var ex []exposed
	for g, t := range sim.ExposedByGroup {
		if t > 0 {
			ex = append(ex, exposed{p.Groups[g].Label(), t})
		}
	}
	sort.SliceStable(ex, func(i, j int) bool { return ex[i].t > ex[j].t })
	if len(ex) > 0 {
		fmt.Fprintln(w, "\nexposed communication by group (largest first):")
		rows = [][]string{{"GROUP", "EXPOSED"}}
		for i, e := range ex {
			if i == 10 {
				rows = append(rows, []string{fmt.Sprintf("… %d more", len(ex)-10), ""})
				break
			}
			rows = append(rows, []string{e.group, seconds(e.t)})
		}
		printTable(w, rows, 1)
	}
}

func runVerify(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("verify", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc verify plan.bin|model.toml|zoo-name\n\nProves the plan's schedule safe (happens-before order of every buffer use, collectives against the layout) and within its memory budget.")
	}
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if fl.NArg() != 1 {
		fl.Usage()
		return 2
	}
	p, err := loadPlan(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	if err := schedule.Verify(p); err != nil {
		return reportErr(stderr, fmt.Errorf("%s: %w", fl.Arg(0), err))
	}
	sim, err := schedule.Simulate(p, schedule.NewModel(p))
	if err != nil {
		return reportErr(stderr, fmt.Errorf("%s: %w", fl.Arg(0), err))
	}
	if sim.PeakReserved > p.Cluster.MemoryBudget {
		return reportErr(stderr, fmt.Errorf("%s: the plan reserves %s per rank, over its budget of %s", fl.Arg(0), ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(p.Cluster.MemoryBudget)))
	}
	fmt.Fprintf(stdout, "%s: safe: %d ops on %d streams, every buffer use ordered after its write and before its free; %s of %s budget\n",
		fl.Arg(0), len(p.Ops), 6, ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(p.Cluster.MemoryBudget))
	return 0
}
