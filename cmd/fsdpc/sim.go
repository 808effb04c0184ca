package main

import (
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// fsdpc sim is parse -> simulate -> render, as plan: parseSimArgs,
// makeSim, then renderSimText or renderSimJSON.

func runSim(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseSimArgs(args, stderr)
	if !ok {
		return code
	}
	r, err := makeSim(a)
	if err != nil {
		return reportErr(stderr, err)
	}
	render := renderSimText
	if a.json {
		render = renderSimJSON
	}
	if err := render(stdout, r); err != nil {
		return reportErr(stderr, err)
	}
	if r.traceNote != "" {
		fmt.Fprintf(stderr, "note: %s: %s\n", safetext.Escape(a.trace), r.traceNote)
	}
	if anyFailed(r.gates) {
		return exitGateFailed
	}
	return 0
}

// simArgs is a parsed `fsdpc sim` command line.
type simArgs struct {
	target      string // plan.bin, a model file or a zoo name
	trace       string // "": no trace
	traceRanks  string // the -trace-ranks spec, read against the plan
	trainTokens float64
	model       string // -model, for MFU of an old plan file
	json        bool
	gates       []gate
}

// parseSimArgs parses sim's command line. When ok is false the command
// exits with code, having said why on stderr: 0 for -h, 2 for bad usage,
// 1 for a -train-tokens it cannot read.
func parseSimArgs(args []string, stderr io.Writer) (a simArgs, code int, ok bool) {
	fl := flag.NewFlagSet("sim", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&a.trace, "trace", "", "write a Chrome trace (open it in Perfetto) to this file")
	fl.StringVar(&a.traceRanks, "trace-ranks", "", "ranks the trace draws: all, or a list like 0,3,8-15 (default: all of up to 8 ranks, else the first node)")
	trainTokens := fl.String("train-tokens", "", "also say how long training on this many tokens takes (15T, 300B, 2.5e12)")
	fl.StringVar(&a.model, "model", "", "with a plan file from before format 8: the model it was made from, for MFU (newer plans carry what MFU needs; built-in models are found by themselves)")
	fl.BoolVar(&a.json, "json", false, "print the prediction as JSON (docs/json.md)")
	var failIf gateList
	fl.Var(&failIf, "fail-if", "exit 3 if this holds of the plan, e.g. 'step>1.5s' or 'mfu<35%' (repeatable; docs/json.md)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc sim [-trace trace.json [-trace-ranks all|0,3,8-15]] [-train-tokens N] [-model model.toml] [-json] [-fail-if EXPR]... plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "Exit status: 0 done, 1 error, 2 bad usage, 3 a -fail-if gate failed.")
		fmt.Fprintln(stderr, "\nSimulates one training step of the plan on its target: step time, exposed communication per group, memory.")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return a, code, false
	}
	a.target = fl.Arg(0)
	var err error
	if a.gates, err = parseGates(failIf, false); err != nil {
		fmt.Fprintln(stderr, err)
		return a, 2, false
	}
	if *trainTokens != "" {
		if a.trainTokens, err = parseTokens(*trainTokens); err != nil {
			return a, reportErr(stderr, err), false
		}
	}
	return a, 0, true
}

// simulated is what sim made, the renderers' input.
type simulated struct {
	args     simArgs
	plan     *schedule.Plan
	sim      *schedule.Simulation
	perToken float64 // MFU's FLOPs per token; 0 when unknown
	ranks    []int   // the ranks the trace draws
	// traceNote says what the trace folded to stay readable; "" when
	// it is drawn whole.
	traceNote string
	metrics   metrics
	gates     []gateResult
}

// makeSim loads the plan (planning a model), simulates it, evaluates the
// gates and writes the trace.
func makeSim(a simArgs) (*simulated, error) {
	if err := checkOutput(a.trace, a.target); a.trace != "" && err != nil {
		return nil, err // before any work, which would read as success
	}
	p, m, made, err := loadPlanSim(a.target, a.model)
	if err != nil {
		return nil, err
	}
	r := &simulated{args: a, plan: p, perToken: flopsPerToken(p, m)}
	if r.ranks, err = parseRanks(a.traceRanks, p.Cluster.WorldSize, p.Cluster.GPUsPerNode); err != nil {
		return nil, err
	}
	model := schedule.NewModel(p)
	if r.sim, err = simulate(p, made); err != nil {
		return nil, fmt.Errorf("%s: %w", a.target, err)
	}
	r.metrics = newMetrics(p, r.sim, r.perToken, a.trainTokens)
	if r.gates, err = evalGates(a.gates, nil, &r.metrics); err != nil {
		return nil, err
	}
	if a.trace != "" {
		// Streamed into the file: the trace of a plan of millions of
		// operations is gigabytes.
		err := atomicfile.NotAnInput(a.trace, a.target)
		if err == nil {
			err = atomicfile.WriteFunc(a.trace, func(w io.Writer) error {
				return schedule.WriteTrace(w, p, r.sim, schedule.TraceOptions{Model: model, Ranks: r.ranks})
			})
		}
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", a.trace, err)
		}
		// WriteTrace folds as FoldTrace says (the same decision, cheap).
		fold := schedule.FoldTrace(p, len(r.ranks), 0)
		r.ranks, r.traceNote = r.ranks[:min(fold.Ranks, len(r.ranks))], fold.Note()
	}
	return r, nil
}

// renderSimText prints the step, its breakdown, throughput, the trace
// written and the gates.
func renderSimText(w io.Writer, r *simulated) error {
	printSim(w, r.plan, r.sim, r.perToken, r.args.trainTokens)
	if r.args.trace != "" {
		fmt.Fprintf(w, "trace: %s, %s (open in https://ui.perfetto.dev)\n", r.args.trace, rankList(r.ranks, r.plan.Cluster.WorldSize))
	}
	printGates(w, r.gates)
	return nil
}

// renderSimJSON prints sim's document (docs/json.md).
func renderSimJSON(w io.Writer, r *simulated) error {
	d := newPlanDoc("sim", r.plan, r.sim, r.metrics)
	d.Trace, d.Gates = r.args.trace, r.gates
	return writeJSON(w, d)
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
