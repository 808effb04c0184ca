package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// fsdpc plan is three steps, as every command that renders a document:
// parsePlanArgs reads the command line (usage problems exit 2 there),
// makePlan does the work (loads, plans or tunes, writes plan.bin,
// evaluates the gates; diagnostics go to stderr as they are found), and
// a renderer prints the result, as text or as JSON (docs/json.md).

func runPlan(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parsePlanArgs(args, stderr)
	if !ok {
		return code
	}
	if a.dump == "help" {
		for _, name := range planner.PassNames() {
			fmt.Fprintf(stdout, "%-10s %s\n", name, planner.PassDoc(name))
		}
		return 0
	}
	r, err := makePlan(a, stdout, stderr)
	if err != nil {
		return reportErr(stderr, err)
	}
	if a.dump != "" {
		return 0 // the dumps were the output
	}
	render := renderPlanText
	if a.json {
		render = renderPlanJSON
	}
	if err := render(stdout, r); err != nil {
		return reportErr(stderr, err)
	}
	if a.timing {
		r.times.Write(stderr)
	}
	if anyFailed(r.gates) {
		return exitGateFailed
	}
	return 0
}

// planArgs is a parsed `fsdpc plan` command line.
type planArgs struct {
	model string // a model file or zoo name; "" only with -d help
	out   string
	// dump is "" (no dump), "help", "all" or a pass name.
	dump string
	// timing (-d time) prints each pass's time on stderr after the plan.
	timing      bool
	check       bool
	tune        bool
	fsdpcKnobs  bool
	margin      float64 // with tune: the share of the budget kept free
	trainTokens float64 // 0: not asked
	json        bool
	gates       []gate
}

// parsePlanArgs parses plan's command line. When ok is false the command
// exits with code, having said why on stderr: 0 for -h, 2 for bad usage,
// 1 for a value it cannot read (-train-tokens, -headroom).
func parsePlanArgs(args []string, stderr io.Writer) (a planArgs, code int, ok bool) {
	fl := flag.NewFlagSet("plan", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "plan.bin", "write the plan here")
	dump := fl.String("d", "", "print the planner state after this pass (\"help\" lists the passes, \"all\" dumps after each, \"time\" times each pass)")
	check := fl.Bool("check", false, "check the plan after every pass, not only at the end")
	tune := fl.Bool("tune", false, "search the decisions the policy leaves open for the fastest plan that fits")
	fsdpcKnobs := fl.Bool("fsdpc-knobs", false, "with -tune: also try decisions FSDP2 offers only as experimental APIs (reduce_scatter_buffers: set_reduce_scatter_max_input_buffers)")
	headroom := fl.Float64("headroom", planner.DefaultHeadroom*100, "with -tune: the percentage of the memory budget to keep free")
	trainTokens := fl.String("train-tokens", "", "also say how long training on this many tokens takes (15T, 300B, 2.5e12)")
	asJSON := fl.Bool("json", false, "print the summary as JSON (docs/json.md)")
	semantics := fl.String("semantics", "", "refuse to plan unless fsdpc models this FSDP version (it models "+schedule.Semantics+"; docs/semantics.md)")
	var failIf gateList
	fl.Var(&failIf, "fail-if", "exit 3 if this holds of the plan, e.g. 'reserved>70GiB' or 'mfu<35%' (repeatable; docs/json.md)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc plan [-o plan.bin] [-d pass] [-check] [-tune [-fsdpc-knobs] [-headroom PCT]] [-train-tokens N] [-json] [-fail-if EXPR]... [-semantics torch-fsdp2/V] model.toml|zoo-name")
		fmt.Fprintln(stderr, "\nCompiles the model into an FSDP plan, writes plan.bin and prints a summary.")
		fmt.Fprintln(stderr, "Exit status: 0 done, 1 error, 2 bad usage, 3 a -fail-if gate failed.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return a, code, false
	}
	gates, err := parseGates(failIf, false)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return a, 2, false
	}
	if *semantics != "" && *semantics != schedule.Semantics {
		fmt.Fprintf(stderr, "fsdpc plan: -semantics %s: this fsdpc models %s only (docs/semantics.md lists how other releases differ)\n", *semantics, schedule.Semantics)
		return a, 2, false
	}
	timing := *dump == "time"
	if timing {
		*dump = "" // the plan's usual output, then the passes' times on stderr
	}
	if *dump != "" && (*asJSON || len(gates) > 0) {
		fmt.Fprintln(stderr, "fsdpc plan: -d prints the planner's passes; -json and -fail-if need the summary: drop -d")
		return a, 2, false
	}
	a = planArgs{out: *out, dump: *dump, timing: timing, check: *check, tune: *tune, fsdpcKnobs: *fsdpcKnobs, json: *asJSON, gates: gates}
	if *dump == "help" {
		return a, 0, true
	}
	if fl.NArg() != 1 {
		fl.Usage()
		return a, 2, false
	}
	a.model = fl.Arg(0)
	if *dump != "" && *dump != "all" && planner.PassDoc(*dump) == "" {
		fmt.Fprintf(stderr, "fsdpc plan: no pass %q (passes: %s)\n", *dump, strings.Join(planner.PassNames(), ", "))
		return a, 2, false
	}
	if *trainTokens != "" {
		if a.trainTokens, err = parseTokens(*trainTokens); err != nil {
			return a, reportErr(stderr, err), false
		}
	}
	if *tune {
		if *headroom < 0 || *headroom >= 100 || math.IsNaN(*headroom) {
			return a, reportErr(stderr, fmt.Errorf("-headroom %g: give a percentage from 0 to below 100", *headroom)), false
		}
		a.margin = max(*headroom/100, 1e-9)
	}
	return a, 0, true
}

// planned is what plan made, the renderers' input.
type planned struct {
	args  planArgs
	model *ir.Model
	plan  *schedule.Plan
	// sim is the planner's own simulation of the plan (planner.Compile):
	// plan simulates once.
	sim *schedule.Simulation
	// warnings are the planner's, less those the model's already give.
	warnings ir.Diagnostics
	tuning   *planner.Tuning // with -tune
	advice   *planner.Advice // with -tune: what the file pins
	size     int64           // of the plan file written
	metrics  metrics
	gates    []gateResult
	times    *planner.PassTimes // with -d time
}

// makePlan loads the model, plans (or tunes) it, writes plan.bin and
// evaluates the gates. The model's and the planner's warnings go to
// stderr as they are found (the model's before a long tune), and with -d
// the planner's state after each pass to stdout.
func makePlan(a planArgs, stdout, stderr io.Writer) (*planned, error) {
	m, err := loadModel(a.model)
	if err != nil {
		return nil, err
	}
	if err := checkOutput(a.out, a.model); err != nil {
		return nil, err
	}
	for _, w := range m.Warnings {
		fmt.Fprintln(stderr, w)
	}
	r := &planned{args: a, model: m}
	if a.timing {
		r.times = &planner.PassTimes{}
	}
	if a.tune {
		progress := func(n int) {}
		if isTerminal(stderr) {
			progress = func(n int) { fmt.Fprintf(stderr, "\rtuning: %d candidates evaluated", n) }
		}
		topts := planner.TuneOptions{Progress: progress, Margin: a.margin, FsdpcKnobs: a.fsdpcKnobs, Times: r.times}
		r.tuning, err = planner.Tune(m, topts)
		if isTerminal(stderr) {
			fmt.Fprintln(stderr)
		}
		if err != nil {
			return nil, err
		}
		r.advice = planner.Advise(m, r.tuning, topts)
		r.plan, r.sim, r.warnings = r.tuning.Plan, r.tuning.Sim, r.tuning.Warnings
	} else {
		opts := planner.Options{CheckEveryPass: a.check, Times: r.times}
		if a.dump != "" {
			opts.DumpAfter = func(pass, text string) {
				if a.dump == "all" || a.dump == pass {
					fmt.Fprintf(stdout, "=== after pass %s\n%s", pass, text)
				}
			}
		}
		c, err := planner.Compile(m, opts)
		if err != nil {
			return nil, err
		}
		r.plan, r.sim, r.warnings = c.Plan, c.Sim, c.Warnings
	}
	if err := schedule.WriteFile(a.out, r.plan); err != nil {
		return nil, fmt.Errorf("writing %s: %w", a.out, err)
	}
	if st, err := os.Stat(a.out); err == nil {
		r.size = st.Size()
	}
	if a.dump != "" {
		return r, nil
	}
	r.warnings = plannerOnly(m.Warnings, r.warnings)
	for _, w := range r.warnings {
		fmt.Fprintln(stderr, w)
	}
	if w := budgetWarning(r.plan, r.sim); w != "" {
		d := ir.Diagnostic{Severity: ir.Warning, File: m.File, Pos: m.BudgetPos(), Msg: w}
		fmt.Fprintln(stderr, d)
		r.warnings = append(r.warnings, d)
	}
	r.metrics = newMetrics(r.plan, r.sim, m.FLOPsPerToken(), a.trainTokens)
	if r.gates, err = evalGates(a.gates, nil, &r.metrics); err != nil {
		return nil, err
	}
	return r, nil
}

// renderPlanText prints plan's summary, the tuner's choices and the gates.
func renderPlanText(w io.Writer, r *planned) error {
	printPlanSummary(w, r.plan, r.args.out, r.size, r.sim, r.model.FLOPsPerToken(), r.args.trainTokens)
	if r.tuning != nil {
		printTuning(w, r.tuning)
		printAdvice(w, r.tuning, r.advice)
	}
	printGates(w, r.gates)
	return nil
}

// renderPlanJSON prints plan's document (docs/json.md).
func renderPlanJSON(w io.Writer, r *planned) error {
	d := newPlanDoc("plan", r.plan, r.sim, r.metrics)
	d.Output, d.OutputBytes, d.Gates = r.args.out, r.size, r.gates
	d.Diagnostics = newDiagDocs(r.model.Warnings, r.warnings)
	if r.tuning != nil {
		d.Tuning = newTuningDoc(r.tuning)
		d.Tuning.Pinned, d.Tuning.PinnedEvaluated = newPinDocs(r.advice), r.advice.Evaluated
	}
	return writeJSON(w, d)
}

// printTuning explains what the autotuner chose and why.
func printTuning(w io.Writer, t *planner.Tuning) {
	b, best := t.Baseline, t.Best
	fmt.Fprintf(w, "\ntuned: %d candidates in %s\n", t.Evaluated, t.Elapsed.Round(time.Millisecond))
	line := func(label string, c planner.Candidate) {
		fits := ""
		if !c.Fits {
			fits = " (does not fit)"
		}
		fmt.Fprintf(w, "  %-9s step %s, exposed communication %s, peak %s reserved%s\n", label, seconds(c.StepTime), seconds(c.ExposedComm), ir.FormatBytes(c.PeakReserved), fits)
	}
	line("baseline", b)
	line("tuned", best)
	for _, f := range t.Failed {
		fmt.Fprintf(w, "  skipped %d candidate(s) that did not plan (first: %s): %s\n", f.Count, strings.Join(f.Decisions, "; "), f.Reason)
	}
	if b.StepTime > 0 {
		fmt.Fprintf(w, "  gain      %.1f%% faster than the file's own (FSDP2-default) plan", 100*t.Gain())
		if !t.Significant() {
			fmt.Fprintf(w, ", within the model's ±%.0f%% uncertainty: not a reliable improvement", 100*planner.Uncertainty)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  binding   %s", t.Binding)
	switch t.Binding {
	case "memory":
		fmt.Fprintf(w, ": a faster candidate does not fit in the %s usable (the budget less the headroom, or the file's own plan's peak if that is larger)", ir.FormatBytes(t.Usable))
	case "communication":
		fmt.Fprintf(w, ": %s of communication stays exposed", seconds(best.ExposedComm))
	}
	fmt.Fprintln(w)
	if len(best.Decisions) == 0 {
		fmt.Fprintln(w, "decisions: none; the file's own plan is the fastest that fits")
	} else {
		fmt.Fprintln(w, "decisions (add to [policy] or [train] to keep them):")
		for _, d := range best.Decisions {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	if len(t.Alternatives) > 0 {
		fmt.Fprintln(w, "next best:")
		for i, a := range t.Alternatives {
			desc := strings.Join(a.Decisions, "; ")
			if desc == "" {
				desc = "the file's own plan"
			}
			fmt.Fprintf(w, "  %d. step %s, peak %s: %s\n", i+1, seconds(a.StepTime), ir.FormatBytes(a.PeakReserved), desc)
		}
	}
}

// printPlanSummary says in a few lines what the plan decided.
func printPlanSummary(w io.Writer, p *schedule.Plan, path string, size int64, sim *schedule.Simulation, perToken, trainTokens float64) {
	c := p.Cluster
	fmt.Fprintf(w, "plan %s -> %s (%s)\n", p.Header.Model, path, ir.FormatBytes(size))
	mesh := fmt.Sprintf("FSDP over %d ranks", c.Shard)
	if c.Replicate > 1 {
		mesh = fmt.Sprintf("HSDP %d replicas × %d shards", c.Replicate, c.Shard)
	}
	fmt.Fprintf(w, "  %d × %s, %s\n", c.WorldSize, c.GPU, mesh)
	fmt.Fprintf(w, "  %d groups: %s\n", len(p.Groups), groupRange(p))
	// Policies, folded: "reshard true ×32, false ×1".
	count := func(f func(g *schedule.Group) string) string {
		n := map[string]int{}
		for i := range p.Groups {
			n[f(&p.Groups[i])]++
		}
		var keys []string
		for k := range n {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, n[k]))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "  reshard_after_forward: %s\n", count(func(g *schedule.Group) string {
		if g.Policy.Reshard == schedule.ReshardTo {
			return fmt.Sprintf("%d", g.Policy.ReshardTo)
		}
		return g.Policy.Reshard.String()
	}))
	fmt.Fprintf(w, "  dtypes (param/reduce): %s\n", count(func(g *schedule.Group) string {
		if len(g.Params) == 0 {
			return "no parameters" // FSDP2 makes no parameter group (docs/semantics.md D13)
		}
		return g.Policy.Param.String() + "/" + g.Policy.Reduce.String()
	}))
	fmt.Fprintf(w, "  schedule: %d ops, %d buffers, %d events per rank\n", len(p.Ops), len(p.Buffers), p.Events)
	fmt.Fprintf(w, "predicted per rank: step %s, peak memory %s allocated, %s reserved of a %s budget\n",
		seconds(sim.StepTime), ir.FormatBytes(sim.PeakAllocated), ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(c.MemoryBudget))
	printBreakdown(w, "  ", sim)
	printThroughput(w, "  ", p, sim.StepTime, schedule.NewThroughput(p, sim.StepTime, perToken), trainTokens)
}

// seconds prints a duration with a sensible unit.
func seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}

func groupRange(p *schedule.Plan) string {
	var names []string
	for i := range p.Groups {
		names = append(names, p.Groups[i].Label())
	}
	if len(names) <= 4 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, %s … %s", names[0], names[1], names[len(names)-1])
}

// reorderFlags moves flags after the positional arguments to the front, so
// `fsdpc plan model.toml -o x.bin` works as users expect. Whether a flag
// takes the next argument as its value is read from fl itself: a boolean flag
// (`--virtual`) never does, so `run plan.bin --virtual --scale 16` parses.
func reorderFlags(fl *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && takesValue(fl, name) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

// takesValue reports whether fl defines name as a flag that needs a value.
func takesValue(fl *flag.FlagSet, name string) bool {
	f := fl.Lookup(name)
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}

// parseFlags parses args with flags anywhere on the line. When ok is false
// the command returns code: 0 for -h/--help (usage was printed), 2 for a bad
// flag (the flag package named it).
func parseFlags(fl *flag.FlagSet, args []string) (code int, ok bool) {
	if !unknownFlag(fl, args, fl.Output()) {
		return 2, false
	}
	if err := fl.Parse(reorderFlags(fl, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// parseOperands is parseFlags for a command that takes exactly n operands:
// any other count prints the usage and returns code 2.
func parseOperands(fl *flag.FlagSet, args []string, n int) (code int, ok bool) {
	if code, ok := parseFlags(fl, args); !ok {
		return code, false
	}
	if fl.NArg() != n {
		fl.Usage()
		return 2, false
	}
	return 0, true
}

// nearBudget is the share of the memory budget above which plan warns: the
// prediction's memory error on published runs is a few percent
// (docs/cost-model.md, "Fidelity"), and allocator fragmentation a job
// meets later is not in it.
const nearBudget = 0.90

// budgetWarning says when a plan reserves more than nearBudget of its
// budget, "" otherwise.
func budgetWarning(p *schedule.Plan, sim *schedule.Simulation) string {
	budget := p.Cluster.MemoryBudget
	if budget <= 0 || float64(sim.PeakReserved) <= nearBudget*float64(budget) {
		return ""
	}
	return fmt.Sprintf("the plan reserves %s of its %s memory budget per GPU (%.0f%%, over %.0f%%): little is left for what the prediction does not see; `fsdpc fit` shows what fits with room",
		ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(budget), 100*float64(sim.PeakReserved)/float64(budget), nearBudget*100)
}
