package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// runExport writes the plan as the JSON fsdpc's Python package reads
// (docs/torch.md#the-plan-export): a command of its own rather than a
// larger `show -json`, because the export needs the model the plan was
// made from (prefetch targets and named_parameters() order are the
// model's) and holds what FSDP2 is asked to do, derived once here, not the
// plan's operations for Python to interpret.
func runExport(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("export", flag.ContinueOnError)
	fl.SetOutput(stderr)
	model := fl.String("model", "", "the model file or zoo name the plan was made from (found by hash for a zoo model)")
	out := fl.String("o", "", "write the JSON here (default: stdout)")
	scale := fl.Int("scale", 1, "shrink the plan and the model together by this factor, as run --backend cuda --scale does")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc export [--model FILE|ZOO] [--scale K] [-o plan.json] plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "\nWrites the plan as JSON for fsdpc's Python package (fsdpc.load_plan, apply_plan, verify_first_step):")
		fmt.Fprintln(stderr, "the mesh, every fully_shard unit in application order with its settings, the model's parameters,")
		fmt.Fprintln(stderr, "and the collectives of the first step (docs/torch.md).")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	if *scale < 1 || *scale > executor.MaxScale {
		fmt.Fprintf(stderr, "fsdpc export: --scale must be from 1 to %d\n", executor.MaxScale)
		return 2
	}
	e, err := exportPlan(fl.Arg(0), *model, *scale)
	if err != nil {
		return reportErr(stderr, err)
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, e); err != nil {
		return reportErr(stderr, err)
	}
	if *out == "" {
		_, _ = stdout.Write(buf.Bytes())
		return 0
	}
	inputs := []string{fl.Arg(0)}
	if *model != "" {
		inputs = append(inputs, *model)
	}
	if err := writeOutput(*out, buf.Bytes(), inputs); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// exportPlan loads a plan (or plans a model) and its model, and builds
// the export, scaled by k.
func exportPlan(arg, modelArg string, k int) (*torchgen.Export, error) {
	p, m, err := loadPlanModel(arg, modelArg)
	if err != nil {
		return nil, err
	}
	_, _, e, err := scaledExport(arg, p, m, k)
	return e, err
}

// scaledExport is the plan shrunk by k, its model spec and its export.
func scaledExport(arg string, p *schedule.Plan, m *ir.Model, k int) (*schedule.Plan, *torchgen.Spec, *torchgen.Export, error) {
	if m == nil {
		return nil, nil, nil, fmt.Errorf("%s: the plan holds its model's hash, not its module tree: pass --model with the model file it was made from", arg)
	}
	if _, err := schedule.Prove(p); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: refusing a plan that fsdpc verify refuses: %w", arg, err)
	}
	q, spec, err := torchgen.ScalePlan(m, p, k)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", arg, err)
	}
	e, err := torchgen.NewExport(spec, q, k)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", arg, err)
	}
	return q, spec, e, nil
}
