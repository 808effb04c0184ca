package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir/accelerate"
	"github.com/fsdpc/fsdpc/schedule"
)

// runEmitAccelerate writes the accelerate config a plan decides:
// `emit accelerate plan.bin --model FILE [--hf config.json] -o config.yaml`.
func runEmitAccelerate(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("emit accelerate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	model := fl.String("model", "", "the model file or zoo name the plan was made from")
	hfConfig := fl.String("hf", "", "the Hugging Face config.json the model was imported from: its transformers classes name the layers (fsdp_transformer_layer_cls_to_wrap)")
	out := fl.String("o", "", "write the config here (default: stdout)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc emit accelerate plan.bin --model FILE|ZOO [--hf config.json] [-o config.yaml]")
		fmt.Fprintln(stderr, "\nWrites the FSDP2 accelerate config that makes Hugging Face accelerate 1.14 do what the plan")
		fmt.Fprintln(stderr, "decides, with what its keys cannot express listed as comments (docs/accelerate.md).\n\nflags:")
		fl.PrintDefaults()
	}
	flags, pos := splitArgs(fl, args)
	if err := fl.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	pos = append(pos, fl.Args()...)
	if len(pos) != 1 || *model == "" {
		fmt.Fprintf(stderr, "fsdpc emit accelerate: want one plan and --model FILE, got %d arguments\n\n", len(pos))
		fl.Usage()
		return 2
	}
	inputs := []string{pos[0], *model}
	if *hfConfig != "" {
		inputs = append(inputs, *hfConfig)
	}
	if *out != "" && *out != "-" {
		if err := checkOutput(*out, inputs...); err != nil {
			return reportTermErr(stderr, err)
		}
	}
	p, err := schedule.ReadFile(pos[0])
	if err != nil {
		return reportTermErr(stderr, err)
	}
	m, err := loadModel(*model)
	if err != nil {
		return reportTermErr(stderr, err)
	}
	if m.SourceHash != p.Header.InputSHA256 {
		fmt.Fprintf(stderr, "fsdpc emit accelerate: the plan was made from a different model file (input sha256 %.12s, %s's %.12s)\n", p.Header.InputSHA256, safetext.Term(*model), m.SourceHash)
		return 1
	}
	mm := accelerate.FromModelFile(m)
	if *hfConfig != "" {
		src, name, err := readConfig(*hfConfig)
		if err != nil {
			return reportTermErr(stderr, err)
		}
		mt, err := accelerate.ModelType(name, src)
		if err != nil {
			return reportTermErr(stderr, err)
		}
		if mm, err = accelerate.FromTransformers(m, mt); err != nil {
			return reportTermErr(stderr, fmt.Errorf("%s: %w", *hfConfig, err))
		}
	}
	text, err := accelerate.Emit(p, mm, pos[0])
	if err != nil {
		return reportTermErr(stderr, fmt.Errorf("fsdpc emit accelerate: %w", err))
	}
	if *out == "" || *out == "-" {
		if _, err := io.WriteString(stdout, text); err != nil {
			return reportTermErr(stderr, err)
		}
		return 0
	}
	if err := writeOutput(*out, []byte(text), inputs); err != nil {
		return reportTermErr(stderr, err)
	}
	if n := strings.Count(text, "\n#   - "); n > 0 {
		fmt.Fprintf(stderr, "wrote %s: %d things the plan decides that accelerate's keys cannot say are listed in it, for fsdpc.apply_plan\n", safetext.Term(*out), n)
	} else {
		fmt.Fprintf(stderr, "wrote %s: accelerate's keys say the whole plan\n", safetext.Term(*out))
	}
	return 0
}
