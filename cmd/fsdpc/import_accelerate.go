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

func runImportAccelerate(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("import accelerate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "", "write the model to this file instead of stdout")
	model := fl.String("model", "", "the model: a zoo name, a model file, or a Hugging Face config.json")
	seqLen := fl.Int64("seq-len", 0, fmt.Sprintf("for a config.json: tokens per sequence (default min(max_position_embeddings, %d))", hf.DefaultMaxSeqLen))
	gpu := fl.String("gpu", hf.DefaultGPU, "for a config.json: GPU preset: "+strings.Join(hardware.PresetNames(), ", "))
	microBatch := fl.Int("micro-batch", 1, "for a config.json: sequences per micro-batch")
	var kv argList
	fl.Var(&kv, "arg", "for a PyTorch factory: key=value passed to it, as import torch takes; repeatable")
	pythonPath := fl.String("python", "", "for a PyTorch factory: run this python3 instead of the torch root's")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc import accelerate [flags] accelerate.yaml --model MODEL [-o model.toml]")
		fmt.Fprintln(stderr, "\nWrites the model file whose policy is what Hugging Face accelerate 1.14's FSDP2 path does")
		fmt.Fprintln(stderr, "with MODEL under the accelerate config (docs/accelerate.md). An FSDP1 config is read through")
		fmt.Fprintln(stderr, "accelerate to-fsdp2's mapping, each dropped or changed key reported on stderr.\n\nflags:")
		fl.PrintDefaults()
	}
	flags, pos := splitArgs(fl, args)
	if !unknownFlag(fl, flags, stderr) {
		return 2
	}
	if err := fl.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	pos = append(pos, fl.Args()...)
	if len(pos) != 1 || *model == "" {
		fmt.Fprintf(stderr, "fsdpc import accelerate: want one accelerate config and --model MODEL, got %d arguments%s\n\n", len(pos), map[bool]string{true: " and no --model"}[*model == ""])
		fl.Usage()
		return 2
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["seq-len"] && *seqLen <= 0 || set["micro-batch"] && *microBatch <= 0 {
		fmt.Fprintln(stderr, "fsdpc import accelerate: --seq-len and --micro-batch must be positive")
		return 2
	}
	isJSON := strings.HasSuffix(strings.ToLower(*model), ".json")
	factory := isFactory(*model)
	if !isJSON && !factory && (set["seq-len"] || set["gpu"] || set["micro-batch"]) {
		fmt.Fprintln(stderr, "fsdpc import accelerate: --seq-len, --gpu and --micro-batch are for a config.json or a PyTorch factory; a model file says them itself")
		return 2
	}
	if !factory && (len(kv) > 0 || *pythonPath != "") {
		fmt.Fprintln(stderr, "fsdpc import accelerate: --arg and --python are for a PyTorch factory (pkg.module:factory)")
		return 2
	}
	if *out != "" && *out != "-" {
		if err := checkOutput(*out, pos[0], *model); err != nil {
			return reportTermErr(stderr, err)
		}
	}
	text, notes, err := importAccelerate(pos[0], *model, hf.Options{SeqLen: *seqLen, GPU: *gpu, MicroBatch: *microBatch}, kv, *pythonPath)
	if err != nil {
		return reportTermErr(stderr, fmt.Errorf("fsdpc import accelerate: %w", err))
	}
	for _, n := range notes {
		fmt.Fprintln(stderr, "note: "+safetext.Escape(n))
	}
	if *out == "" || *out == "-" {
		if _, err := stdout.Write(text); err != nil {
			return reportTermErr(stderr, err)
		}
		return 0
	}
	if err := writeOutput(*out, text, []string{pos[0], *model}); err != nil {
		return reportTermErr(stderr, err)
	}
	m, err := ir.Load(*out, text)
	if err != nil {
		return reportTermErr(stderr, err)
	}
	fmt.Fprintf(stderr, "wrote %s: %s, %s parameters, %d ranks\n", safetext.Term(*out), safetext.Term(m.Name), ir.FormatCount(m.Stats().Params), m.Cluster.WorldSize)
	return 0
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
