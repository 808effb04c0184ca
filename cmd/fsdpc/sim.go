package main

import (
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
	trainTokens := fl.String("train-tokens", "", "also say how long training on this many tokens takes (15T, 300B, 2.5e12)")
	modelFile := fl.String("model", "", "with a plan file from before format 8: the model it was made from, for MFU (newer plans carry what MFU needs; built-in models are found by themselves)")
	asJSON := fl.Bool("json", false, "print the prediction as JSON (docs/json.md)")
	var failIf gateList
	fl.Var(&failIf, "fail-if", "exit 3 if this holds of the plan, e.g. 'step>1.5s' or 'mfu<35%' (repeatable; docs/json.md)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc sim [-trace trace.json [-trace-ranks all|0,3,8-15]] [-train-tokens N] [-model model.toml] [-json] [-fail-if EXPR]... plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "Exit status: 0 done, 1 error, 2 bad usage, 3 a -fail-if gate failed.")
		fmt.Fprintln(stderr, "\nSimulates one training step of the plan on its target: step time, exposed communication per group, memory.")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	if err := checkOutput(*trace, fl.Arg(0)); *trace != "" && err != nil {
		return reportErr(stderr, err) // before the summary, which would read as success
	}
	gates, err := parseGates(failIf, false)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var tokens float64
	if *trainTokens != "" {
		if tokens, err = parseTokens(*trainTokens); err != nil {
			return reportErr(stderr, err)
		}
	}
	p, m, err := loadPlanModel(fl.Arg(0), *modelFile)
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
	mt := newMetrics(p, sim, flopsPerToken(p, m), tokens)
	results, err := evalGates(gates, nil, &mt)
	if err != nil {
		return reportErr(stderr, err)
	}
	if *trace != "" {
		// Streamed into the file: the trace of a plan of millions of
		// operations is gigabytes.
		err := atomicfile.NotAnInput(*trace, fl.Args()...)
		if err == nil {
			err = atomicfile.WriteFunc(*trace, func(w io.Writer) error {
				return schedule.WriteTrace(w, p, sim, schedule.TraceOptions{Model: model, Ranks: ranks})
			})
		}
		if err != nil {
			return reportErr(stderr, fmt.Errorf("writing %s: %w", *trace, err))
		}
	}
	if *asJSON {
		d := newPlanDoc("sim", p, sim, mt)
		d.Trace, d.Gates = *trace, results
		if err := writeJSON(stdout, d); err != nil {
			return reportErr(stderr, err)
		}
	} else {
		printSim(stdout, p, sim, flopsPerToken(p, m), tokens)
		if *trace != "" {
			fmt.Fprintf(stdout, "trace: %s, %s (open in https://ui.perfetto.dev)\n", *trace, rankList(ranks, p.Cluster.WorldSize))
		}
		printGates(stdout, results)
	}
	if anyFailed(results) {
		return exitGateFailed
	}
	return 0
}

func printSim(w io.Writer, p *schedule.Plan, sim *schedule.Simulation, perToken, trainTokens float64) {
	fmt.Fprintf(w, "plan %s: %d × %s\n", p.Header.Model, p.Cluster.WorldSize, p.Cluster.GPU)
	step := max(sim.StepTime, 1e-12)
	rows := [][]string{{"step time", seconds(sim.StepTime), ""}}
	for _, part := range sim.Breakdown.Parts() {
		rows = append(rows, []string{"  " + part.Label, seconds(part.Seconds), fmt.Sprintf("%.1f%%", 100*part.Seconds/step)})
	}
	rows = append(rows,
		[]string{"compute alone (no communication)", seconds(sim.ComputeTime), ""},
		[]string{"CPU done issuing", seconds(sim.CPUTime), ""},
		[]string{"peak memory allocated", ir.FormatBytes(sim.PeakAllocated), ""},
		[]string{"peak memory reserved", ir.FormatBytes(sim.PeakReserved), "of a " + ir.FormatBytes(p.Cluster.MemoryBudget) + " budget"})
	printTable(w, rows, 1)
	fmt.Fprintln(w)
	printThroughput(w, "", p, sim.StepTime, schedule.NewThroughput(p, sim.StepTime, perToken), trainTokens)
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
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	p, err := loadPlan(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	sim, err := schedule.Prove(p)
	if err != nil {
		return reportErr(stderr, fmt.Errorf("%s: %w", fl.Arg(0), err))
	}
	fmt.Fprintf(stdout, "%s: safe: %d ops on %d streams, every buffer use ordered after its write and before its free; %s of %s budget\n",
		fl.Arg(0), len(p.Ops), 6, ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(p.Cluster.MemoryBudget))
	return 0
}
