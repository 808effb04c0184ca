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
// as apply_plan(model, mesh).
func runEmit(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("emit", flag.ContinueOnError)
	fl.SetOutput(stderr)
	model := fl.String("model", "", "the model file or zoo name (for a plan: the one it was made from)")
	out := fl.String("o", "", "write the Python module here (default: stdout)")
	scale := fl.Int("scale", 1, "shrink every parameter dimension by this factor, keeping names, order, ties and dtypes; with a plan, the plan shrinks with the model (as run --backend cuda --scale shrinks it)")
	titan := fl.String("torchtitan", "", "with a plan: also write the plan's torchtitan options here, as the TOML of torchtitan "+torchgen.TorchtitanRelease)
	titanConfig := fl.String("torchtitan-config", "", "with a plan: also write them here as an entry of torchtitan's Python config registry (commit "+torchgen.TorchtitanCommit[:12]+")")
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
		return 0
	}
	if len(args) > 0 && args[0] == "launch" {
		return runEmitLaunch(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "accelerate" {
		return runEmitAccelerate(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "torch" {
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "fsdpc emit: unknown target %q%s (targets: torch, launch)\n\n", args[0], didYouMean(args[0], []string{"torch", "launch"}))
		}
		fl.Usage()
		return 2
	}
	if code, ok := parseFlags(fl, args[1:]); !ok {
		return code
	}
	if *model == "" || fl.NArg() > 1 {
		fl.Usage()
		return 2
	}
	if *scale < 1 || *scale > executor.MaxScale || (*titan != "" || *titanConfig != "") && fl.NArg() == 0 {
		fmt.Fprintf(stderr, "fsdpc emit torch: --scale must be from 1 to %d; --torchtitan and --torchtitan-config need a plan\n", executor.MaxScale)
		return 2
	}
	inputs := append([]string{*model}, fl.Args()...)
	for _, o := range []string{*out, *titan, *titanConfig} {
		if err := checkOutput(o, inputs...); o != "" && err != nil {
			return reportErr(stderr, err)
		}
	}
	same := func(a, b string) bool { return a != "" && b != "" && atomicfile.Same(a, b) }
	if same(*out, *titan) || same(*out, *titanConfig) || same(*titan, *titanConfig) {
		fmt.Fprintln(stderr, "fsdpc emit torch: -o, --torchtitan and --torchtitan-config name the same file")
		return 2
	}
	m, err := loadModel(*model)
	if err != nil {
		return reportErr(stderr, err)
	}
	source := safetext.Python(*model)
	if *scale > 1 {
		source += fmt.Sprintf(" scaled down %d×", *scale)
	}
	var py, titanText, titanConfigText string
	if fl.NArg() == 1 {
		// The training program on fsdpc's Python package, the plan (and
		// with --scale the plan and the model shrunk together) as its
		// export.
		p, err := schedule.ReadFile(fl.Arg(0))
		if err != nil {
			return reportErr(stderr, err)
		}
		if m.SourceHash != p.Header.InputSHA256 {
			fmt.Fprintf(stderr, "fsdpc emit torch: the plan was made from a different model file (input sha256 %.12s, %s's %.12s)\n", p.Header.InputSHA256, *model, m.SourceHash)
			return 1
		}
		_, spec, e, err := scaledExport(fl.Arg(0), p, m, *scale)
		if err != nil {
			return reportErr(stderr, err)
		}
		header := safetext.Python(fl.Arg(0)) + " and " + source
		if py, err = torchgen.Program(e, spec.Model, header, fl.Arg(0)); err != nil {
			return reportErr(stderr, err)
		}
		titanText = torchgen.Torchtitan(p, fl.Arg(0))
		titanConfigText = torchgen.TorchtitanRegistry(p, fl.Arg(0))
	} else {
		spec, err := torchgen.BuildModel(m)
		if err != nil {
			fmt.Fprintf(stderr, "fsdpc emit torch: %v\n", err)
			return 1
		}
		if err := spec.Scale(*scale); err != nil {
			fmt.Fprintf(stderr, "fsdpc emit torch: %v\n", err)
			return 2
		}
		if py, err = torchgen.Emit(spec, source); err != nil {
			fmt.Fprintf(stderr, "fsdpc emit torch: %v\n", err)
			return 1
		}
	}
	if *titan != "" {
		if err := writeOutput(*titan, []byte(titanText), inputs); err != nil {
			return reportErr(stderr, err)
		}
	}
	if *titanConfig != "" {
		if err := writeOutput(*titanConfig, []byte(titanConfigText), inputs); err != nil {
			return reportErr(stderr, err)
		}
	}
	if *out == "" {
		fmt.Fprint(stdout, py)
		return 0
	}
	if err := writeOutput(*out, []byte(py), inputs); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}
