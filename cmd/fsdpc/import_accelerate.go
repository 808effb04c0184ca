package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/internal/inputfile"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/ir/accelerate"
	"github.com/fsdpc/fsdpc/ir/hf"
	"github.com/fsdpc/fsdpc/plans"
)

// fsdpc import accelerate is parse -> import -> write:
// parseImportAccelerateArgs, importAccelerate (its notes said on
// stderr), writeModelFile.
func runImportAccelerate(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseImportAccelerateArgs(args, stderr)
	if !ok {
		return code
	}
	text, notes, err := importAccelerate(a.config, a.model, a.opt, a.kv, a.python)
	if err != nil {
		return reportTermErr(stderr, fmt.Errorf("fsdpc import accelerate: %w", err))
	}
	for _, n := range notes {
		fmt.Fprintln(stderr, "note: "+safetext.Escape(n))
	}
	m, err := writeModelFile(stdout, a.out, text, []string{a.config, a.model})
	if err != nil {
		return reportTermErr(stderr, err)
	}
	if m != nil {
		fmt.Fprintf(stderr, "wrote %s: %s, %s parameters, %d ranks\n", safetext.Term(a.out), safetext.Term(m.Name), ir.FormatCount(m.Stats().Params), m.Cluster.WorldSize)
	}
	return 0
}

// importAccelerateArgs is a parsed `fsdpc import accelerate` command line.
type importAccelerateArgs struct {
	config string // the accelerate config
	model  string // a zoo name, a model file, a config.json or a PyTorch factory
	out    string // "" or "-": stdout
	// opt is the shape of a config.json's or a factory's model.
	opt    hf.Options
	kv     []string // a factory's key=value arguments
	python string   // for a factory: "" the torch root's python3
}

// parseImportAccelerateArgs parses import accelerate's command line. When
// ok is false the command exits with code, having said why on stderr: 0
// for -h, 2 for bad usage, 1 for an output that is an input.
func parseImportAccelerateArgs(args []string, stderr io.Writer) (a importAccelerateArgs, code int, ok bool) {
	fl := flag.NewFlagSet("import accelerate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&a.out, "o", "", "write the model to this file instead of stdout")
	fl.StringVar(&a.model, "model", "", "the model: a zoo name, a model file, or a Hugging Face config.json")
	fl.Int64Var(&a.opt.SeqLen, "seq-len", 0, fmt.Sprintf("for a config.json: tokens per sequence (default min(max_position_embeddings, %d))", hf.DefaultMaxSeqLen))
	fl.StringVar(&a.opt.GPU, "gpu", hf.DefaultGPU, "for a config.json: GPU preset: "+strings.Join(hardware.PresetNames(), ", "))
	fl.IntVar(&a.opt.MicroBatch, "micro-batch", 1, "for a config.json: sequences per micro-batch")
	var kv argList
	fl.Var(&kv, "arg", "for a PyTorch factory: key=value passed to it, as import torch takes; repeatable")
	fl.StringVar(&a.python, "python", "", "for a PyTorch factory: run this python3 instead of the torch root's")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc import accelerate [flags] accelerate.yaml --model MODEL [-o model.toml]")
		fmt.Fprintln(stderr, "\nWrites the model file whose policy is what Hugging Face accelerate 1.14's FSDP2 path does")
		fmt.Fprintln(stderr, "with MODEL under the accelerate config (docs/accelerate.md). An FSDP1 config is read through")
		fmt.Fprintln(stderr, "accelerate to-fsdp2's mapping, each dropped or changed key reported on stderr.\n\nflags:")
		fl.PrintDefaults()
	}
	pos, code, ok := parseSplitFlags(fl, args)
	if !ok {
		return a, code, false
	}
	if len(pos) != 1 || a.model == "" {
		fmt.Fprintf(stderr, "fsdpc import accelerate: want one accelerate config and --model MODEL, got %d arguments%s\n\n", len(pos), map[bool]string{true: " and no --model"}[a.model == ""])
		fl.Usage()
		return a, 2, false
	}
	a.config, a.kv = pos[0], kv
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["seq-len"] && a.opt.SeqLen <= 0 || set["micro-batch"] && a.opt.MicroBatch <= 0 {
		fmt.Fprintln(stderr, "fsdpc import accelerate: --seq-len and --micro-batch must be positive")
		return a, 2, false
	}
	isJSON := strings.HasSuffix(strings.ToLower(a.model), ".json")
	factory := isFactory(a.model)
	if !isJSON && !factory && (set["seq-len"] || set["gpu"] || set["micro-batch"]) {
		fmt.Fprintln(stderr, "fsdpc import accelerate: --seq-len, --gpu and --micro-batch are for a config.json or a PyTorch factory; a model file says them itself")
		return a, 2, false
	}
	if !factory && (len(kv) > 0 || a.python != "") {
		fmt.Fprintln(stderr, "fsdpc import accelerate: --arg and --python are for a PyTorch factory (pkg.module:factory)")
		return a, 2, false
	}
	if !toStdout(a.out) {
		if err := checkOutput(a.out, a.config, a.model); err != nil {
			return a, reportTermErr(stderr, err), false
		}
	}
	return a, 0, true
}

// importAccelerate reads the accelerate config and the model (a
// config.json, a model file or a zoo name) and returns accelerate's
// model file and the notes for the terminal.
func importAccelerate(configPath, model string, opt hf.Options, kv []string, pythonPath string) ([]byte, []string, error) {
	csrc, err := readInput(configPath, "an accelerate config (the YAML `accelerate config` writes)")
	if err != nil {
		return nil, nil, err
	}
	in := accelerate.Input{ConfigFile: configPath, Config: csrc, ModelArg: model, HFOptions: opt, TorchOptions: opt}
	switch _, statErr := os.Stat(model); {
	case isFactory(model):
		// The config is read first, so a bad one stops before Python runs.
		if _, err := accelerate.Parse(configPath, csrc); err != nil {
			return nil, nil, err
		}
		if in.Torch, err = describeTorch("", []string{model}, kv, pythonPath, opt, opt.SeqLen == 0, 10*time.Minute); err != nil {
			return nil, nil, fmt.Errorf("import torch: %w", err)
		}
	case strings.HasSuffix(strings.ToLower(model), ".json"):
		if in.HF, in.HFFile, err = readConfig(model); err != nil {
			return nil, nil, err
		}
	case errors.Is(statErr, fs.ErrNotExist):
		src, f, ok := plans.Source(model)
		if !ok {
			return nil, nil, noZooModel(model)
		}
		in.ModelText, in.ModelFile = src, f
	default:
		if in.ModelText, err = readInput(model, "a model file"); err != nil {
			return nil, nil, err
		}
		in.ModelFile = model
	}
	return accelerate.Import(in)
}

// readInput reads a regular file of at most ir.MaxFileSize bytes.
func readInput(path, what string) ([]byte, error) {
	f, err := inputfile.Open(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, ir.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(src) > ir.MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d MiB", path, ir.MaxFileSize>>20)
	}
	return src, nil
}

// isFactory reports whether MODEL names a PyTorch factory
// (pkg.module:factory) rather than a file or a zoo model.
func isFactory(model string) bool {
	if _, err := os.Stat(model); err == nil {
		return false
	}
	mod, fn, ok := strings.Cut(model, ":")
	return ok && mod != "" && fn != "" && !strings.ContainsAny(model, `/\`)
}

// reportTermErr prints an error whose text may quote a config's or a
// model's strings (a class name, a YAML value) with the terminal's
// control characters escaped, and returns 1.
func reportTermErr(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, safetext.Escape(strings.TrimRight(err.Error(), "\n")))
	return 1
}
