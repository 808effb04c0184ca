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

func runPlan(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("plan", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "plan.bin", "write the plan here")
	dump := fl.String("d", "", "print the planner state after this pass (\"help\" lists the passes, \"all\" dumps after each)")
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
		return code
	}
	gates, err := parseGates(failIf, false)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *semantics != "" && *semantics != schedule.Semantics {
		fmt.Fprintf(stderr, "fsdpc plan: -semantics %s: this fsdpc models %s only (docs/semantics.md lists how other releases differ)\n", *semantics, schedule.Semantics)
		return 2
	}
	if *dump != "" && (*asJSON || len(gates) > 0) {
		fmt.Fprintln(stderr, "fsdpc plan: -d prints the planner's passes; -json and -fail-if need the summary: drop -d")
		return 2
	}
	if *dump == "help" {
		for _, name := range planner.PassNames() {
			fmt.Fprintf(stdout, "%-10s %s\n", name, planner.PassDoc(name))
		}
		return 0
	}
	if fl.NArg() != 1 {
		fl.Usage()
		return 2
	}
	if *dump != "" && *dump != "all" && planner.PassDoc(*dump) == "" {
		fmt.Fprintf(stderr, "fsdpc plan: no pass %q (passes: %s)\n", *dump, strings.Join(planner.PassNames(), ", "))
		return 2
	}
	var tokens float64
	if *trainTokens != "" {
		if tokens, err = parseTokens(*trainTokens); err != nil {
			return reportErr(stderr, err)
		}
	}
	m, err := loadModel(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	if err := checkOutput(*out, fl.Arg(0)); err != nil {
		return reportErr(stderr, err)
	}
	for _, w := range m.Warnings {
		fmt.Fprintln(stderr, w)
	}
	opts := planner.Options{CheckEveryPass: *check}
	if *dump != "" {
		opts.DumpAfter = func(pass, text string) {
			if *dump == "all" || *dump == pass {
				fmt.Fprintf(stdout, "=== after pass %s\n%s", pass, text)
			}
		}
	}
	var p *schedule.Plan
	var sim *schedule.Simulation
	var warnings ir.Diagnostics
	var tuning *planner.Tuning
	var advice *planner.Advice
	if *tune {
		progress := func(n int) {}
		if isTerminal(stderr) {
			progress = func(n int) { fmt.Fprintf(stderr, "\rtuning: %d candidates evaluated", n) }
		}
		if *headroom < 0 || *headroom >= 100 || math.IsNaN(*headroom) {
			return reportErr(stderr, fmt.Errorf("-headroom %g: give a percentage from 0 to below 100", *headroom))
		}
		topts := planner.TuneOptions{Progress: progress, Margin: max(*headroom/100, 1e-9), FsdpcKnobs: *fsdpcKnobs}
		tuning, err = planner.Tune(m, topts)
		if isTerminal(stderr) {
			fmt.Fprintln(stderr)
		}
		if err != nil {
			return reportErr(stderr, err)
		}
		advice = planner.Advise(m, tuning, topts)
		p, sim, warnings = tuning.Plan, tuning.Sim, tuning.Warnings
	} else {
		r, err := planner.Compile(m, opts)
		if err != nil {
			return reportErr(stderr, err)
		}
		p, sim, warnings = r.Plan, r.Sim, r.Warnings
	}
	if err := schedule.WriteFile(*out, p); err != nil {
		return reportErr(stderr, fmt.Errorf("writing %s: %w", *out, err))
	}
	var size int64
	if st, err := os.Stat(*out); err == nil {
		size = st.Size()
	}
	if *dump != "" {
		return 0
	}
	warnings = plannerOnly(m.Warnings, warnings)
	for _, w := range warnings {
		fmt.Fprintln(stderr, w)
	}
	if w := budgetWarning(p, sim); w != "" {
		fmt.Fprintln(stderr, w)
	}
	mt := newMetrics(p, sim, m.FLOPsPerToken(), tokens)
	results, err := evalGates(gates, nil, &mt)
	if err != nil {
		return reportErr(stderr, err)
	}
	if *asJSON {
		d := newPlanDoc("plan", p, sim, mt)
		d.Output, d.OutputBytes, d.Gates = *out, size, results
		d.Diagnostics = newDiagDocs(m.Warnings, warnings)
		if tuning != nil {
			d.Tuning = newTuningDoc(tuning)
			d.Tuning.Pinned, d.Tuning.PinnedEvaluated = newPinDocs(advice), advice.Evaluated
		}
		if err := writeJSON(stdout, d); err != nil {
			return reportErr(stderr, err)
		}
	} else {
		printPlanSummary(stdout, p, *out, size, sim, m.FLOPsPerToken(), tokens)
		if tuning != nil {
			printTuning(stdout, tuning)
			printAdvice(stdout, tuning, advice)
		}
		printGates(stdout, results)
	}
	if anyFailed(results) {
		return exitGateFailed
	}
	return 0
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
	return fmt.Sprintf("warning: the plan reserves %s of its %s memory budget per GPU (%.0f%%, over %.0f%%): little is left for what the prediction does not see; `fsdpc fit` shows what fits with room",
		ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(budget), 100*float64(sim.PeakReserved)/float64(budget), nearBudget*100)
}
