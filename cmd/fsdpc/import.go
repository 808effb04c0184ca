package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/internal/inputfile"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/ir/hf"
)

func runImport(args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: fsdpc import hf [flags] config.json [-o model.toml]")
		fmt.Fprintln(w, "       fsdpc import torch [flags] pkg.module:factory [--arg key=value ...] [-o model.toml]")
		fmt.Fprintln(w, "       fsdpc import torch [flags] --hf config.json [-o model.toml]")
		fmt.Fprintln(w, "       fsdpc import accelerate [flags] accelerate.yaml --model MODEL [-o model.toml]")
		fmt.Fprintln(w, "\nimport hf writes the fsdpc model file for a Hugging Face model's config.json, in Go.")
		fmt.Fprintf(w, "Supported model_type values: %s.\n", strings.Join(hf.Supported(), ", "))
		fmt.Fprintln(w, "import torch builds the model with PyTorch on the meta device and writes what it finds (docs/import.md).")
		fmt.Fprintln(w, "import accelerate writes the model whose policy is what accelerate's FSDP2 path does under a config (docs/accelerate.md).")
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "hf":
		return runImportHF(args[1:], stdout, stderr)
	case "torch":
		return runImportTorch(args[1:], stdout, stderr)
	case "accelerate":
		return runImportAccelerate(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "fsdpc import: unknown format %q%s (supported: hf, torch, accelerate)\n\n", args[0], didYouMean(args[0], []string{"hf", "torch", "accelerate"}))
	usage(stderr)
	return 2
}

// fsdpc import hf is parse -> convert -> write: parseImportHFArgs,
// makeImportHF (with no --world-size, the fewest whole nodes whose plan
// fits, said on stderr), writeImportHF.
func runImportHF(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseImportHFArgs(args, stderr)
	if !ok {
		return code
	}
	text, err := makeImportHF(a, stderr)
	if err != nil {
		return reportErr(stderr, err)
	}
	if err := writeImportHF(stdout, stderr, a, text); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// importHFArgs is a parsed `fsdpc import hf` command line.
type importHFArgs struct {
	config string // the config.json; "-": stdin
	out    string // "" or "-": stdout
	opt    hf.Options
	// autoWorld: no --world-size, so the fewest whole nodes whose plan
	// fits (smallestWorld).
	autoWorld bool
}

// parseImportHFArgs parses import hf's command line. When ok is false the
// command exits with code, having said why on stderr: 0 for -h, 2 for bad
// usage.
func parseImportHFArgs(args []string, stderr io.Writer) (a importHFArgs, code int, ok bool) {
	fl := flag.NewFlagSet("import hf", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&a.out, "o", "", "write the model to this file instead of stdout")
	shape := addShapeFlags(fl, fmt.Sprintf("tokens per sequence (default min(max_position_embeddings, %d))", hf.DefaultMaxSeqLen))
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc import hf [flags] config.json [-o model.toml]")
		fmt.Fprintln(stderr, "\nWrites the fsdpc model file for a Hugging Face model's config.json (- reads stdin).")
		fmt.Fprintf(stderr, "Supported model_type values: %s.\n\nflags:\n", strings.Join(hf.Supported(), ", "))
		fl.PrintDefaults()
	}
	pos, code, ok := parseSplitFlags(fl, args)
	if !ok {
		return a, code, false
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "fsdpc import hf: want one config.json, got %d arguments\n\n", len(pos))
		fl.Usage()
		return a, 2, false
	}
	a.config = pos[0]
	if a.opt, a.autoWorld, ok = shape.options(fl, stderr); !ok {
		return a, 2, false
	}
	return a, 0, true
}

// makeImportHF reads the config and writes its model file's text.
func makeImportHF(a importHFArgs, stderr io.Writer) ([]byte, error) {
	src, name, err := readConfig(a.config)
	if err != nil {
		return nil, err
	}
	opt := a.opt
	if a.autoWorld {
		var note string
		convert := func(o hf.Options) ([]byte, error) { return hf.ConvertWith(name, src, o) }
		if opt, note, err = smallestWorld(name, opt, convert); err != nil {
			return nil, err
		}
		fmt.Fprintln(stderr, note)
	}
	return hf.ConvertWith(name, src, opt)
}

// writeImportHF writes the model file to stdout or to -o, saying which
// model it is on stderr.
func writeImportHF(stdout, stderr io.Writer, a importHFArgs, text []byte) error {
	if !toStdout(a.out) {
		if err := checkOutput(a.out, a.config); err != nil {
			return err
		}
	}
	m, err := writeModelFile(stdout, a.out, text, []string{a.config})
	if m != nil {
		fmt.Fprintf(stderr, "wrote %s: %s, %s parameters\n", a.out, m.Name, ir.FormatCount(m.Stats().Params))
	}
	return err
}

// shapeFlags are the flags import hf and import torch share: the GPUs,
// the world and the training shape of the model file they write.
type shapeFlags struct {
	seqLen                         *int64
	gpu, checkpointing             *string
	world, gpusPerNode, microBatch *int
}

// addShapeFlags defines the shape flags on fl, --seq-len with its
// command's usage.
func addShapeFlags(fl *flag.FlagSet, seqLenUsage string) shapeFlags {
	return shapeFlags{
		seqLen:        fl.Int64("seq-len", 0, seqLenUsage),
		gpu:           fl.String("gpu", hf.DefaultGPU, "GPU preset: "+strings.Join(hardware.PresetNames(), ", ")),
		world:         fl.Int("world-size", 0, "number of GPUs (default: the fewest whole nodes whose plan fits the memory budget, said on stderr)"),
		gpusPerNode:   fl.Int("gpus-per-node", hf.DefaultGPUsPerNode, "GPUs per node"),
		microBatch:    fl.Int("micro-batch", 1, "sequences per micro-batch"),
		checkpointing: fl.String("checkpointing", hf.DefaultCheckpointing, "activation checkpointing: none, full, selective-op or selective-layer"),
	}
}

// options returns the parsed shape flags as hf.Options, and autoWorld
// when --world-size was not given. When ok is false the command exits 2,
// having said why on stderr.
func (s shapeFlags) options(fl *flag.FlagSet, stderr io.Writer) (opt hf.Options, autoWorld, ok bool) {
	// Zero is how Options says "default"; a user who typed 0 meant something
	// else, so say no rather than quietly choosing for them.
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["seq-len"] && *s.seqLen <= 0 || set["world-size"] && *s.world <= 0 || set["gpus-per-node"] && *s.gpusPerNode <= 0 || set["micro-batch"] && *s.microBatch <= 0 {
		fmt.Fprintf(stderr, "fsdpc %s: --seq-len, --world-size, --gpus-per-node and --micro-batch must be positive\n", fl.Name())
		return opt, false, false
	}
	opt = hf.Options{SeqLen: *s.seqLen, GPU: *s.gpu, WorldSize: *s.world, GPUsPerNode: *s.gpusPerNode, MicroBatch: *s.microBatch, Checkpointing: *s.checkpointing}
	if err := opt.Validate(); err != nil {
		fmt.Fprintf(stderr, "fsdpc %s: %v\n", fl.Name(), err)
		return opt, false, false
	}
	return opt, !set["world-size"], true
}

// parseSplitFlags parses an import command's flags, which
// may follow the operands (splitArgs), and returns the operands. When ok
// is false the command exits with code, having said why on fl's output:
// 0 for -h, 2 for bad usage.
func parseSplitFlags(fl *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	flags, pos := splitArgs(fl, args)
	if !unknownFlag(fl, flags, fl.Output()) {
		return nil, 2, false
	}
	if err := fl.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0, false
		}
		return nil, 2, false
	}
	return append(pos, fl.Args()...), 0, true
}

// toStdout reports whether an -o of out means stdout.
func toStdout(out string) bool { return out == "" || out == "-" }

// writeModelFile writes an imported model file to stdout or to out
// (never over one of inputs), and loads what it wrote to a file for the
// line that says so (nil for stdout).
func writeModelFile(stdout io.Writer, out string, text []byte, inputs []string) (*ir.Model, error) {
	if toStdout(out) {
		_, err := stdout.Write(text)
		return nil, err
	}
	if err := writeOutput(out, text, inputs); err != nil {
		return nil, err
	}
	return ir.Load(out, text)
}

// splitArgs separates flags (with their values) from positional
// arguments, because the flag package stops at the first positional and
// the documented form puts -o after config.json. The flags are parsed on
// their own, so a value-taking flag left last without its value is an
// error rather than swallowing a positional.
func splitArgs(fl *flag.FlagSet, args []string) (flags, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return flags, append(pos, args[i+1:]...)
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fl.Lookup(name); f != nil && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	return flags, pos
}

func readConfig(path string) (src []byte, name string, err error) {
	var r io.Reader
	if path == "-" {
		r, name = os.Stdin, "<stdin>"
	} else {
		f, err := inputfile.Open(path, "a config.json (give the config.json inside a model's directory)")
		if err != nil {
			return nil, "", err
		}
		defer f.Close()
		r, name = f, path
	}
	// config.json files are a few kilobytes; the bound keeps a wrong
	// argument (a checkpoint shard) from being read whole.
	src, err = io.ReadAll(io.LimitReader(r, ir.MaxFileSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", name, err)
	}
	if len(src) > ir.MaxFileSize {
		return nil, "", fmt.Errorf("%s is larger than %d MiB; a config.json is a few kilobytes", name, ir.MaxFileSize>>20)
	}
	return src, name, nil
}

// writeOutput replaces path with data so that readers see the old file or
// the new one, never a part. It refuses to replace anything but a regular
// file, or any of the command's inputs (by file identity: a hard link, a
// symlink or another spelling of an input's path is that input). Every
// command's outputs go through it, naming their inputs, so none can
// overwrite what it read.
// checkOutput is what writeOutput will require of an output path, checked
// before a command does its work: a usable name (atomicfile.Check) that
// is none of the inputs.
func checkOutput(path string, inputs ...string) error {
	if err := atomicfile.Check(path); err != nil {
		return err
	}
	return atomicfile.NotAnInput(path, inputs...)
}

func writeOutput(path string, data []byte, inputs []string) error {
	if err := atomicfile.NotAnInput(path, inputs...); err != nil {
		return err
	}
	return atomicfile.Write(path, data)
}
