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
// It is parse -> generate -> write: parseEmitAccelerateArgs,
// makeEmitAccelerate, writeEmitAccelerate.
func runEmitAccelerate(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseEmitAccelerateArgs(args, stderr)
	if !ok {
		return code
	}
	text, err := makeEmitAccelerate(a)
	if err != nil {
		return reportTermErr(stderr, err)
	}
	if err := writeEmitAccelerate(stdout, stderr, a, text); err != nil {
		return reportTermErr(stderr, err)
	}
	return 0
}

// emitAccelerateArgs is a parsed `fsdpc emit accelerate` command line.
type emitAccelerateArgs struct {
	plan  string
	model string // the model file or zoo name the plan was made from
	hf    string // the config.json the model was imported from; "": none
	out   string // "" or "-": stdout
}

// inputs are the files the config must not replace.
func (a emitAccelerateArgs) inputs() []string {
	if a.hf == "" {
		return []string{a.plan, a.model}
	}
	return []string{a.plan, a.model, a.hf}
}

// toStdout reports whether the config goes to stdout.
func (a emitAccelerateArgs) toStdout() bool { return a.out == "" || a.out == "-" }

// parseEmitAccelerateArgs parses emit accelerate's command line. When ok
// is false the command exits with code, having said why on stderr: 0 for
// -h, 2 for bad usage, 1 for an output that is an input.
func parseEmitAccelerateArgs(args []string, stderr io.Writer) (a emitAccelerateArgs, code int, ok bool) {
	fl := flag.NewFlagSet("emit accelerate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&a.model, "model", "", "the model file or zoo name the plan was made from")
	fl.StringVar(&a.hf, "hf", "", "the Hugging Face config.json the model was imported from: its transformers classes name the layers (fsdp_transformer_layer_cls_to_wrap)")
	fl.StringVar(&a.out, "o", "", "write the config here (default: stdout)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc emit accelerate plan.bin --model FILE|ZOO [--hf config.json] [-o config.yaml]")
		fmt.Fprintln(stderr, "\nWrites the FSDP2 accelerate config that makes Hugging Face accelerate 1.14 do what the plan")
		fmt.Fprintln(stderr, "decides, with what its keys cannot express listed as comments (docs/accelerate.md).\n\nflags:")
		fl.PrintDefaults()
	}
	flags, pos := splitArgs(fl, args)
	if err := fl.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return a, 0, false
		}
		return a, 2, false
	}
	pos = append(pos, fl.Args()...)
	if len(pos) != 1 || a.model == "" {
		fmt.Fprintf(stderr, "fsdpc emit accelerate: want one plan and --model FILE, got %d arguments\n\n", len(pos))
		fl.Usage()
		return a, 2, false
	}
	a.plan = pos[0]
	if !a.toStdout() {
		if err := checkOutput(a.out, a.inputs()...); err != nil {
			return a, reportTermErr(stderr, err), false
		}
	}
	return a, 0, true
}

// makeEmitAccelerate reads the plan and its model (and the config.json
// the model came from, whose classes name the layers) and generates the
// accelerate config.
func makeEmitAccelerate(a emitAccelerateArgs) (string, error) {
	p, err := schedule.ReadFile(a.plan)
	if err != nil {
		return "", err
	}
	m, err := loadModel(a.model)
	if err != nil {
		return "", err
	}
	if m.SourceHash != p.Header.InputSHA256 {
		return "", fmt.Errorf("fsdpc emit accelerate: the plan was made from a different model file (input sha256 %.12s, %s's %.12s)", p.Header.InputSHA256, safetext.Term(a.model), m.SourceHash)
	}
	mm := accelerate.FromModelFile(m)
	if a.hf != "" {
		src, name, err := readConfig(a.hf)
		if err != nil {
			return "", err
		}
		mt, err := accelerate.ModelType(name, src)
		if err != nil {
			return "", err
		}
		if mm, err = accelerate.FromTransformers(m, mt); err != nil {
			return "", fmt.Errorf("%s: %w", a.hf, err)
		}
	}
	text, err := accelerate.Emit(p, mm, a.plan)
	if err != nil {
		return "", fmt.Errorf("fsdpc emit accelerate: %w", err)
	}
	return text, nil
}

// writeEmitAccelerate writes the config, to stdout or to -o's file
// saying on stderr how much of the plan accelerate's keys carry.
func writeEmitAccelerate(stdout, stderr io.Writer, a emitAccelerateArgs, text string) error {
	if a.toStdout() {
		_, err := io.WriteString(stdout, text)
		return err
	}
	if err := writeOutput(a.out, []byte(text), a.inputs()); err != nil {
		return err
	}
	if n := strings.Count(text, "\n#   - "); n > 0 {
		fmt.Fprintf(stderr, "wrote %s: %d things the plan decides that accelerate's keys cannot say are listed in it, for fsdpc.apply_plan\n", safetext.Term(a.out), n)
	} else {
		fmt.Fprintf(stderr, "wrote %s: accelerate's keys say the whole plan\n", safetext.Term(a.out))
	}
	return nil
}
