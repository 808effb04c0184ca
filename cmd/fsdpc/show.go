package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

func runShow(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("show", flag.ContinueOnError)
	fl.SetOutput(stderr)
	asJSON := fl.Bool("json", false, "print the plan as JSON (docs/json.md)")
	full := fl.Bool("full", false, "print every line of the canonical text, without folding repeated blocks")
	summary := fl.Bool("summary", false, "print the header, the groups without their parameters, the schedule's size and the checkpoint: no operations")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc show [-json | -full | -summary] plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "\nPrints a plan in its canonical text form, then its checkpoint (sizes, files per rank); or the plan as JSON.")
		fmt.Fprintln(stderr, "Blocks that repeat with numbers stepping (layers.0 … layers.31) print once as \"N× { … }\" with ranges; -full prints them all, as textconv and plans/*.plan.txt do.")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	p, m, err := loadPlanModel(fl.Arg(0), "")
	if err != nil {
		return reportErr(stderr, err)
	}
	render := func(w io.Writer, p *schedule.Plan) error {
		return renderShowText(w, fl.Arg(0), p, flopsPerToken(p, m), *full, *summary)
	}
	if *asJSON {
		render = func(w io.Writer, p *schedule.Plan) error { return renderShowJSON(w, p, flopsPerToken(p, m)) }
	}
	if err := render(stdout, p); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// renderShowJSON prints the plan's compute per step and the whole plan
// (docs/json.md), streamed.
func renderShowJSON(w io.Writer, p *schedule.Plan, perToken float64) error {
	sim, err := schedule.Simulate(p, schedule.NewModel(p))
	if err != nil {
		return err
	}
	c := newComputeJSON(p, sim.StepTime, perToken)
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := writePlanJSON(bw, "show", p, &c); err != nil {
		return err
	}
	return bw.Flush()
}

// renderShowText prints the plan's canonical text and its checkpoint,
// folded unless full, cut to the summary if asked; arg names the plan in
// errors.
func renderShowText(w io.Writer, arg string, p *schedule.Plan, perToken float64, full, summary bool) error {
	var text bytes.Buffer
	if err := schedule.WriteText(&text, p); err != nil {
		return err
	}
	// The checkpoint section follows the plan's canonical text (which
	// plans/*.plan.txt pin), derived from it.
	l, err := checkpoint.FromPlan(p)
	if err != nil {
		return fmt.Errorf("%s: checkpoint: %w", arg, err)
	}
	fmt.Fprintln(&text)
	l.WriteSummary(&text)
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	if summary {
		lines = summaryLines(lines)
	}
	if !full {
		// -full is the canonical text (plans/*.plan.txt, textconv).
		if lines, err = foldedText(p, perToken, lines); err != nil {
			return fmt.Errorf("%s: %w", arg, err)
		}
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
	return nil
}

// summaryLines keeps what a reviewer reads first: the header, each
// group's policy lines without its parameters, the schedule's size line
// without its operations, and whatever follows the schedule (the
// checkpoint).
func summaryLines(lines []string) []string {
	var out []string
	inOps := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "schedule "):
			inOps = true
			out = append(out, l)
		case inOps && l == "":
			inOps = false
			out = append(out, l)
		case inOps, strings.HasPrefix(l, "  param "):
		default:
			out = append(out, l)
		}
	}
	return out
}

// foldedText is show's view of a plan's text lines (and whatever follows
// them): repeated blocks folded, and the prediction also in a training
// log's units, after the predicted step's line. textconv -fold prints it
// too, so a review in git reads as show does.
func foldedText(p *schedule.Plan, perToken float64, lines []string) ([]string, error) {
	lines = schedule.FoldRepeats(lines)
	units, err := showUnits(p, perToken)
	if err != nil {
		return nil, err
	}
	return insertAfter(lines, "predicted step ", units), nil
}

// showUnits is the step as the sum of its parts and its throughput, for
// the header of show's folded view.
func showUnits(p *schedule.Plan, perToken float64) ([]string, error) {
	sim, err := schedule.Simulate(p, schedule.NewModel(p))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	printBreakdown(&b, "  ", sim)
	tp := schedule.NewThroughput(p, sim.StepTime, perToken)
	printThroughput(&b, "  ", p, sim.StepTime, tp, 0)
	printCompute(&b, "  ", tp)
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"), nil
}

// insertAfter puts extra after the first line that starts with prefix
// (nowhere if none does).
func insertAfter(lines []string, prefix string, extra []string) []string {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return slices.Insert(lines, i+1, extra...)
		}
	}
	return lines
}

// printCompute prints the step's compute as one figure to compare plans
// and runs by: the model FLOPs one GPU does per step by MFU's count
// (FLOPs per token × its tokens), the cluster's, and the rate achieved.
func printCompute(w io.Writer, indent string, t schedule.Throughput) {
	if t.ModelFLOPsPerToken == 0 {
		// An older plan without its model: the MFU line above says what
		// gives the model's count.
		fmt.Fprintf(w, "%scompute per step: by MFU's count unknown (a plan before format 8 without its model)\n", indent)
		return
	}
	fmt.Fprintf(w, "%scompute per step: %s per GPU by MFU's count (%s over the cluster), %s per GPU achieved, MFU %.1f%%\n", indent,
		ir.FormatFLOP(t.ModelFLOPsPerToken*float64(t.TokensPerStepPerGPU)), ir.FormatFLOP(t.ModelFLOPsPerToken*float64(t.TokensPerStep)), tflops(t.ModelFLOPS), 100*t.MFU)
}

// computeJSON is show -json's compute per step (docs/json.md): null
// model figures for a plan before format 8 whose model is not known.
type computeJSON struct {
	ModelFLOPsPerToken           *float64 `json:"model_flops_per_token"`
	ModelFLOPsPerStep            *float64 `json:"model_flops_per_step"`
	ModelFLOPsPerStepPerGPU      *float64 `json:"model_flops_per_step_per_gpu"`
	ModelFLOPsPerSecondPerGPU    *float64 `json:"model_flops_per_second_per_gpu"`
	MFU                          *float64 `json:"mfu"`
	Step                         float64  `json:"step"`
	TokensPerStep                int64    `json:"tokens_per_step"`
	HardwareFLOPsPerSecondPerGPU float64  `json:"hardware_flops_per_second_per_gpu"`
	HFU                          float64  `json:"hfu"`
}

func newComputeJSON(p *schedule.Plan, step, perToken float64) computeJSON {
	t := schedule.NewThroughput(p, step, perToken)
	c := computeJSON{Step: step, TokensPerStep: t.TokensPerStep, HardwareFLOPsPerSecondPerGPU: t.HardwareFLOPS, HFU: t.HFU}
	if perToken > 0 {
		perStep, perGPU := perToken*float64(t.TokensPerStep), perToken*float64(t.TokensPerStepPerGPU)
		c.ModelFLOPsPerToken, c.ModelFLOPsPerStep, c.ModelFLOPsPerStepPerGPU = &perToken, &perStep, &perGPU
		c.ModelFLOPsPerSecondPerGPU, c.MFU = &t.ModelFLOPS, &t.MFU
	}
	return c
}
