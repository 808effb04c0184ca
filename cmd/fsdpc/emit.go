package main

import (
	"flag"
	"fmt"
	"io"

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
	scale := fl.Int("scale", 1, "model alone: shrink every parameter dimension by this factor (rounding up), keeping names, order, ties and dtypes")
	titan := fl.String("torchtitan", "", "with a plan: also write the plan's torchtitan options here, as the TOML of torchtitan "+torchgen.TorchtitanRelease)
	titanConfig := fl.String("torchtitan-config", "", "with a plan: also write them here as an entry of torchtitan's Python config registry (commit "+torchgen.TorchtitanCommit[:12]+")")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc emit torch --model FILE|ZOO [--scale K] [plan.bin [--torchtitan job.toml]] [-o out.py]")
		fmt.Fprintln(stderr, "\nWrites a Python module: build_model() makes the model's nn.Module (registration order,")
		fmt.Fprintln(stderr, "ties, frozen parameters); with a plan, apply_plan(model, mesh) checks a model's parameter")
		fmt.Fprintln(stderr, "names, shapes and order against the plan and applies it with fully_shard, bottom-up, with")
		fmt.Fprintln(stderr, "the plan's explicit prefetch lists and gradient divide factors.")
		fl.PrintDefaults()
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fl.Usage()
		return 0
	}
	if len(args) > 0 && args[0] == "launch" {
		return runEmitLaunch(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "torch" {
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
	if *scale < 1 || *scale > 1<<20 || *scale > 1 && fl.NArg() == 1 || (*titan != "" || *titanConfig != "") && fl.NArg() == 0 {
		fmt.Fprintln(stderr, "fsdpc emit torch: --scale (1 to 1048576) applies to --model alone, since a plan fixes its shapes; --torchtitan and --torchtitan-config need a plan")
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
	spec, err := torchgen.BuildModel(m)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc emit torch: %v\n", err)
		return 1
	}
	if err := spec.Scale(*scale); err != nil {
		fmt.Fprintf(stderr, "fsdpc emit torch: %v\n", err)
		return 2
	}
	source := safetext.Python(*model)
	if *scale > 1 {
		source += fmt.Sprintf(" scaled down %d×", *scale)
	}
	var titanText, titanConfigText string
	if fl.NArg() == 1 {
		p, err := schedule.ReadFile(fl.Arg(0))
		if err != nil {
			return reportErr(stderr, err)
		}
		if spec, err = torchgen.Build(m, p); err != nil {
			fmt.Fprintf(stderr, "fsdpc emit torch: %v\n", err)
			return 1
		}
		source = safetext.Python(fl.Arg(0)) + " and " + safetext.Python(*model)
		titanText = torchgen.Torchtitan(p, fl.Arg(0))
		titanConfigText = torchgen.TorchtitanRegistry(p, fl.Arg(0))
	}
	py, err := torchgen.Emit(spec, source)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc emit torch: %v\n", err)
		return 1
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
