package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/fsdpc/fsdpc/internal/inputfile"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// Exit codes of diff, as diff(1): 0 identical, 1 different, 2 trouble.
// It is parse -> compare -> render: parseDiffArgs, makeDiff, then the
// renderer of -format.
func runDiff(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseDiffArgs(args, stderr)
	if !ok {
		return code
	}
	r, err := makeDiff(a)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if !a.quiet {
		render := diffRenderers[a.format]
		if err := render(stdout, r); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	switch {
	case len(a.gates) > 0 && anyFailed(r.gates):
		return exitGateFailed
	case len(a.gates) > 0 && !a.detailed || r.report.Identical:
		return 0
	}
	return 1
}

// diffArgs is a parsed `fsdpc diff` command line.
type diffArgs struct {
	old, new string // plan files, model files or zoo names
	format   string // a key of diffRenderers
	color    string // auto, always or never: colour the text
	quiet    bool
	detailed bool // -detailed-exitcode, which run maps (detailedExitcode)
	gates    []gate
}

// parseDiffArgs parses diff's command line. When ok is false the command
// exits with code, having said why on stderr: 0 for -h, 2 for bad usage.
func parseDiffArgs(args []string, stderr io.Writer) (a diffArgs, code int, ok bool) {
	fl := flag.NewFlagSet("diff", flag.ContinueOnError)
	fl.SetOutput(stderr)
	format := fl.String("format", "text", "text, markdown (a pull-request comment) or json")
	color := fl.String("color", "auto", "colour the text: auto (on a terminal), always, never")
	quiet := fl.Bool("quiet", false, "print nothing; only the exit code says whether the plans differ")
	// Read again by run (detailedExitcode), which maps the codes.
	detailed := fl.Bool("detailed-exitcode", false, "terraform plan's exit codes: 0 the same, 1 an error, 2 different (3 a gate failed)")
	var failIf gateList
	fl.Var(&failIf, "fail-if", "a CI gate: exit 3 if this holds, e.g. 'step>+5%' (against OLD) or 'reserved>70GiB' (of NEW); repeatable (docs/json.md)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc diff [-format text|markdown|json] [-color auto|always|never] [-quiet] [-detailed-exitcode] [-fail-if EXPR]... OLD NEW")
		fmt.Fprintln(stderr, "\nCompares two plans: groups added, removed, split or merged; policy, layout and schedule changes;")
		fmt.Fprintln(stderr, "predicted time and memory deltas with their causes. OLD and NEW are plan.bin files or models")
		fmt.Fprintln(stderr, "(model.toml or a zoo name), compiled on the fly. Exit status: 0 same, 1 different, 2 error;")
		fmt.Fprintln(stderr, "with -fail-if: 0 every gate passed, 3 a gate failed, 2 error. -detailed-exitcode: 0 same, 1 error,")
		fmt.Fprintln(stderr, "2 different (with -fail-if, when every gate passed), 3 a gate failed, as terraform plan -detailed-exitcode.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return a, code, false
	}
	if diffRenderers[*format] == nil {
		fmt.Fprintf(stderr, "fsdpc diff: -format %s: the formats are text, markdown and json\n", *format)
		return a, 2, false
	}
	if fl.NArg() != 2 ||
		(*color != "auto" && *color != "always" && *color != "never") {
		fl.Usage()
		return a, 2, false
	}
	gates, err := parseGates(failIf, true)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return a, 2, false
	}
	return diffArgs{old: fl.Arg(0), new: fl.Arg(1), format: *format, color: *color, quiet: *quiet, detailed: *detailed, gates: gates}, 0, true
}

// diffed is what diff found, the renderers' input.
type diffed struct {
	args   diffArgs
	report *diff.Result
	// both are each plan's metrics, for the JSON and the gates.
	both struct {
		Old metrics `json:"old"`
		New metrics `json:"new"`
	}
	gates []gateResult
}

// makeDiff loads (or plans) both sides, compares them and evaluates the
// gates.
func makeDiff(a diffArgs) (*diffed, error) {
	old, oldModel, oldSim, err := loadPlanSim(a.old, "")
	if err != nil {
		return nil, err
	}
	new, newModel, newSim, err := loadPlanSim(a.new, "")
	if err != nil {
		return nil, err
	}
	r := &diffed{args: a, report: diff.Compare(a.old, old, a.new, new)}
	for _, side := range []struct {
		p   *schedule.Plan
		m   *ir.Model
		sim *schedule.Simulation
		out *metrics
	}{{old, oldModel, oldSim, &r.both.Old}, {new, newModel, newSim, &r.both.New}} {
		sim, err := simulate(side.p, side.sim)
		if err != nil {
			return nil, err
		}
		*side.out = newMetrics(side.p, sim, flopsPerToken(side.p, side.m), 0)
	}
	if r.gates, err = evalGates(a.gates, &r.both.Old, &r.both.New); err != nil {
		return nil, err
	}
	return r, nil
}

// diffRenderers print a diff in each -format.
var diffRenderers = map[string]func(w io.Writer, r *diffed) error{
	"text": func(w io.Writer, r *diffed) error {
		diff.Text(w, r.report, r.args.color == "always" || r.args.color == "auto" && isTerminal(w))
		printGates(w, r.gates)
		return nil
	},
	"markdown": func(w io.Writer, r *diffed) error {
		diff.Markdown(w, r.report)
		printGates(w, r.gates)
		return nil
	},
	"json": func(w io.Writer, r *diffed) error {
		var g any
		if r.gates != nil {
			g = r.gates
		}
		return diff.JSON(w, r.report, r.both, g)
	},
}

// loadPlan reads a plan.bin, or compiles a model file or zoo model.
func loadPlan(arg string) (*schedule.Plan, error) {
	if isPlanFile(arg) {
		return schedule.ReadFile(arg)
	}
	m, err := loadModel(arg)
	if err != nil {
		return nil, err
	}
	return planner.Plan(m, planner.Options{})
}

// loadPlanModel is loadPlan that also returns the model the plan was
// made from when it can be had (see modelFor): the argument itself, the
// file modelFile names, or the built-in model a plan file was made from.
func loadPlanModel(arg, modelFile string) (*schedule.Plan, *ir.Model, error) {
	p, m, _, err := loadPlanSim(arg, modelFile)
	return p, m, err
}

// loadPlanSim is loadPlanModel that also returns, for a plan made here
// from a model, the planner's simulation of it (nil for a plan file), so
// a command that shows the step need not simulate the plan again.
func loadPlanSim(arg, modelFile string) (*schedule.Plan, *ir.Model, *schedule.Simulation, error) {
	if isPlanFile(arg) {
		p, err := schedule.ReadFile(arg)
		if err != nil {
			return nil, nil, nil, err
		}
		m, err := modelFor(p, modelFile)
		return p, m, nil, err
	}
	if modelFile != "" {
		return nil, nil, nil, fmt.Errorf("-model is for a plan file; %s is a model already", arg)
	}
	m, err := loadModel(arg)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := planner.Compile(m, planner.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	return r.Plan, m, r.Sim, nil
}

// simulate returns sim, the planner's simulation of p when it made p
// here, or simulates p.
func simulate(p *schedule.Plan, sim *schedule.Simulation) (*schedule.Simulation, error) {
	if sim != nil {
		return sim, nil
	}
	return schedule.Simulate(p, schedule.NewModel(p))
}

// isPlanFile reports whether a regular file starts with plan.bin's magic
// (anything else is read as a model, which says what is wrong with it).
func isPlanFile(path string) bool {
	f, err := inputfile.Open(path, "a plan")
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return bytes.Equal(head, []byte("\x89FSP"))
}

// runTextconv prints a plan as text for git: with the attributes and the
// setting of docs/diff.md's git section, git diff and git log -p show
// plan.bin files as their canonical text, or with -fold as show folds it
// (a change to every layer reads once, not 32 times).
func runTextconv(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("textconv", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fold := fl.Bool("fold", false, "fold repeated blocks and add the step's breakdown and throughput, as show prints them")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc textconv [-fold] plan.bin   (git's textconv driver; see the git section of docs/diff.md)")
		fmt.Fprintln(stderr, "\nPrints the plan's canonical text (fsdpc show -full without the checkpoint section), or with -fold")
		fmt.Fprintln(stderr, "as fsdpc show folds it. A file that is not a plan (a deleted file's empty blob) prints as it is.")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	arg := fl.Arg(0)
	p, err := schedule.ReadFile(arg)
	if errors.Is(err, fs.ErrNotExist) {
		// Not a file: a built-in model's name, compiled as elsewhere.
		p, err = loadPlan(arg)
	}
	if errors.Is(err, schedule.ErrBadMagic) {
		// git may hand over an empty or foreign blob (a deleted file): show
		// it as it is rather than failing the whole diff.
		raw, rerr := inputfile.ReadFile(arg, "a plan.bin file", 1<<20)
		if rerr == nil && len(raw) < 1<<20 {
			stdout.Write(raw)
			return 0
		}
	}
	if err != nil {
		return reportErr(stderr, err)
	}
	if !*fold {
		if err := schedule.WriteText(stdout, p); err != nil {
			return reportErr(stderr, err)
		}
		return 0
	}
	m, err := modelFor(p, "")
	if err != nil {
		return reportErr(stderr, err)
	}
	var text bytes.Buffer
	if err := schedule.WriteText(&text, p); err != nil {
		return reportErr(stderr, err)
	}
	lines, err := foldedText(p, flopsPerToken(p, m), strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n"))
	if err != nil {
		return reportErr(stderr, fmt.Errorf("%s: %w", arg, err))
	}
	fmt.Fprintln(stdout, strings.Join(lines, "\n"))
	return 0
}
