package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// runEmit writes PyTorch code: `emit torch --model FILE` the model as an
// nn.Module (build_model), `emit torch --model FILE plan.bin` also the plan
// as apply_plan(model, mesh). emit torch is parse -> generate -> write:
// parseEmitTorchArgs, makeEmitTorch, writeEmitTorch.
func runEmit(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "launch" {
		return runEmitLaunch(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "accelerate" {
		return runEmitAccelerate(args[1:], stdout, stderr)
	}
	a, code, ok := parseEmitTorchArgs(args, stderr)
	if !ok {
		return code
	}
	e, code, err := makeEmitTorch(a)
	if err != nil {
		if code == 1 {
			return reportErr(stderr, err)
		}
		fmt.Fprintln(stderr, err)
		return code
	}
	if err := writeEmitTorch(stdout, a, e); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// emitTorchArgs is a parsed `fsdpc emit torch` command line.
type emitTorchArgs struct {
	model string // the model file or zoo name
	plan  string // "": the model alone
	out   string // "": stdout
	scale int
	// titan and titanConfig are the torchtitan outputs ("": none).
	titan, titanConfig string
}

// inputs are the files the outputs must not replace.
func (a emitTorchArgs) inputs() []string {
	if a.plan == "" {
		return []string{a.model}
	}
	return []string{a.model, a.plan}
}

// parseEmitTorchArgs parses emit's command line for the torch target.
// When ok is false the command exits with code, having said why on
// stderr: 0 for -h, 2 for bad usage, 1 for an output that is an input.
func parseEmitTorchArgs(args []string, stderr io.Writer) (a emitTorchArgs, code int, ok bool) {
	fl := flag.NewFlagSet("emit", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&a.model, "model", "", "the model file or zoo name (for a plan: the one it was made from)")
	fl.StringVar(&a.out, "o", "", "write the Python module here (default: stdout)")
	fl.IntVar(&a.scale, "scale", 1, "shrink every parameter dimension by this factor, keeping names, order, ties and dtypes; with a plan, the plan shrinks with the model (as run --backend cuda --scale shrinks it)")
	fl.StringVar(&a.titan, "torchtitan", "", "with a plan: also write the plan's torchtitan options here, as the TOML of torchtitan "+torchgen.TorchtitanRelease)
	fl.StringVar(&a.titanConfig, "torchtitan-config", "", "with a plan: also write them here as an entry of torchtitan's Python config registry (commit "+torchgen.TorchtitanCommit[:12]+")")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc emit torch --model FILE|ZOO [--scale K] [plan.bin [--torchtitan job.toml]] [-o out.py]")
		fmt.Fprintln(stderr, "       fsdpc emit accelerate plan.bin --model FILE|ZOO [--hf config.json] [-o config.yaml]")
		fmt.Fprintln(stderr, "       fsdpc emit launch --engine ENGINE plan.bin --script train.py")
		fmt.Fprintln(stderr, "\nWith a plan, writes a training program on fsdpc's Python package: the model (a stand-in with")
		fmt.Fprintln(stderr, "the model file's modules and parameters), fsdpc.apply_plan, an optimizer and training steps,")
		fmt.Fprintln(stderr, "the first checked by fsdpc.verify_first_step; run it with torchrun (docs/torch.md). With the")
		fmt.Fprintln(stderr, "model alone, a Python module whose build_model() makes the model's nn.Module.")
		fl.PrintDefaults()
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fl.Usage()
		return a, 0, false
	}
	if len(args) == 0 || args[0] != "torch" {
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "fsdpc emit: unknown target %q%s (targets: torch, launch)\n\n", args[0], didYouMean(args[0], []string{"torch", "launch"}))
		}
		fl.Usage()
		return a, 2, false
	}
	if code, ok := parseFlags(fl, args[1:]); !ok {
		return a, code, false
	}
	if a.model == "" || fl.NArg() > 1 {
		fl.Usage()
		return a, 2, false
	}
	a.plan = fl.Arg(0)
	if a.scale < 1 || a.scale > executor.MaxScale || (a.titan != "" || a.titanConfig != "") && a.plan == "" {
		fmt.Fprintf(stderr, "fsdpc emit torch: --scale must be from 1 to %d; --torchtitan and --torchtitan-config need a plan\n", executor.MaxScale)
		return a, 2, false
	}
	for _, o := range []string{a.out, a.titan, a.titanConfig} {
		if err := checkOutput(o, a.inputs()...); o != "" && err != nil {
			return a, reportErr(stderr, err), false
		}
	}
	same := func(x, y string) bool { return x != "" && y != "" && atomicfile.Same(x, y) }
	if same(a.out, a.titan) || same(a.out, a.titanConfig) || same(a.titan, a.titanConfig) {
		fmt.Fprintln(stderr, "fsdpc emit torch: -o, --torchtitan and --torchtitan-config name the same file")
		return a, 2, false
	}
	return a, 0, true
}

// emittedTorch is the generated text of emit torch.
type emittedTorch struct {
	py, titan, titanConfig string
}

// makeEmitTorch generates the Python module (and the torchtitan options
// with a plan). An error comes with its exit code: 2 for a --scale the
// model cannot take, 1 otherwise.
func makeEmitTorch(a emitTorchArgs) (*emittedTorch, int, error) {
	m, err := loadModel(a.model)
	if err != nil {
		return nil, 1, err
	}
	source := safetext.Python(a.model)
	if a.scale > 1 {
		source += fmt.Sprintf(" scaled down %d×", a.scale)
	}
	e := &emittedTorch{}
	if a.plan != "" {
		// The training program on fsdpc's Python package, the plan (and
		// with --scale the plan and the model shrunk together) as its
		// export.
		p, err := schedule.ReadFile(a.plan)
		if err != nil {
			return nil, 1, err
		}
		if m.SourceHash != p.Header.InputSHA256 {
			return nil, 1, fmt.Errorf("fsdpc emit torch: the plan was made from a different model file (input sha256 %.12s, %s's %.12s)", p.Header.InputSHA256, a.model, m.SourceHash)
		}
		_, spec, ex, err := scaledExport(a.plan, p, m, a.scale)
		if err != nil {
			return nil, 1, err
		}
		header := safetext.Python(a.plan) + " and " + source
		if e.py, err = torchgen.Program(ex, spec.Model, header, a.plan); err != nil {
			return nil, 1, err
		}
		e.titan = torchgen.Torchtitan(p, a.plan)
		e.titanConfig = torchgen.TorchtitanRegistry(p, a.plan)
		return e, 0, nil
	}
	spec, err := torchgen.BuildModel(m)
	if err != nil {
		return nil, 1, fmt.Errorf("fsdpc emit torch: %w", err)
	}
	if err := spec.Scale(a.scale); err != nil {
		return nil, 2, fmt.Errorf("fsdpc emit torch: %w", err)
	}
	if e.py, err = torchgen.Emit(spec, source); err != nil {
		return nil, 1, fmt.Errorf("fsdpc emit torch: %w", err)
	}
	return e, 0, nil
}

// writeEmitTorch writes the generated files, or the module to stdout.
func writeEmitTorch(stdout io.Writer, a emitTorchArgs, e *emittedTorch) error {
	if a.titan != "" {
		if err := writeOutput(a.titan, []byte(e.titan), a.inputs()); err != nil {
			return err
		}
	}
	if a.titanConfig != "" {
		if err := writeOutput(a.titanConfig, []byte(e.titanConfig), a.inputs()); err != nil {
			return err
		}
	}
	if a.out == "" {
		fmt.Fprint(stdout, e.py) // run's checked writer latches an error
		return nil
	}
	return writeOutput(a.out, []byte(e.py), a.inputs())
}
