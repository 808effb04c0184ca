package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/ir/hf"
	"github.com/fsdpc/fsdpc/python"
	"github.com/fsdpc/fsdpc/torchgen"
)

// argList collects repeated --arg key=value flags.
type argList []string

func (a *argList) String() string     { return strings.Join(*a, " ") }
func (a *argList) Set(v string) error { *a = append(*a, v); return nil }

// defaultTorchSeqLen is the sequence length of a factory model when
// --seq-len is not given (an --hf model takes min(max_position_embeddings,
// this), as import hf does).
const defaultTorchSeqLen = hf.DefaultMaxSeqLen

// fsdpc import torch is parse -> describe and convert -> write:
// parseImportTorchArgs, makeImportTorch (one Python run; with no
// --world-size, the fewest whole nodes whose plan fits, said on stderr),
// writeImportTorch.
func runImportTorch(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseImportTorchArgs(args, stderr)
	if !ok {
		return code
	}
	res, err := makeImportTorch(a, stderr)
	if err != nil {
		return reportErr(stderr, fmt.Errorf("fsdpc import torch: %w", err))
	}
	if err := writeImportTorch(stdout, stderr, a, res); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// importTorchArgs is a parsed `fsdpc import torch` command line.
type importTorchArgs struct {
	factory string   // pkg.module:factory; "" with --hf
	hf      string   // a config.json whose transformers class to build
	kv      []string // the factory's key=value arguments
	python  string   // "": the torch root's python3
	out     string   // "" or "-": stdout
	opt     hf.Options
	// autoWorld: no --world-size, so the fewest whole nodes whose plan
	// fits (smallestWorld).
	autoWorld bool
	timeout   time.Duration
}

// inputs are what the model file must not replace: the config.json, or
// the factory (not a file, so never one).
func (a importTorchArgs) inputs() []string {
	if a.hf != "" {
		return []string{a.hf}
	}
	return []string{a.factory}
}

// parseImportTorchArgs parses import torch's command line. When ok is
// false the command exits with code, having said why on stderr: 0 for -h,
// 2 for bad usage, 1 for an output that is the config.json.
func parseImportTorchArgs(args []string, stderr io.Writer) (a importTorchArgs, code int, ok bool) {
	fl := flag.NewFlagSet("import torch", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&a.out, "o", "", "write the model to this file instead of stdout")
	fl.StringVar(&a.hf, "hf", "", "a Hugging Face config.json: build transformers' own class for it")
	var kv argList
	fl.Var(&kv, "arg", "key=value passed to the factory as a keyword argument (JSON values: numbers, true, lists; otherwise a string); repeatable")
	fl.StringVar(&a.python, "python", "", "run this python3 (your environment: its torch, transformers and model code) instead of the torch root")
	shape := addShapeFlags(fl, fmt.Sprintf("tokens per sequence (default %d; for --hf min(max_position_embeddings, %d))", defaultTorchSeqLen, defaultTorchSeqLen))
	fl.DurationVar(&a.timeout, "timeout", 10*time.Minute, "give up on the Python side after this long")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc import torch [flags] pkg.module:factory [--arg key=value ...] [-o model.toml]")
		fmt.Fprintln(stderr, "       fsdpc import torch [flags] --hf config.json [-o model.toml]")
		fmt.Fprintln(stderr, "\nBuilds the model with PyTorch on the meta device, traces one forward and backward pass,")
		fmt.Fprintln(stderr, "and writes the fsdpc model file (docs/import.md).\n\nflags:")
		fl.PrintDefaults()
	}
	pos, code, ok := parseSplitFlags(fl, args)
	if !ok {
		return a, code, false
	}
	switch {
	case a.hf != "" && len(pos) > 0:
		fmt.Fprintf(stderr, "fsdpc import torch: --hf takes no factory (got %q)\n\n", pos[0])
		fl.Usage()
		return a, 2, false
	case a.hf == "" && len(pos) != 1:
		fmt.Fprintf(stderr, "fsdpc import torch: want one pkg.module:factory or --hf config.json, got %d arguments\n\n", len(pos))
		fl.Usage()
		return a, 2, false
	case a.hf != "" && len(kv) > 0:
		fmt.Fprintln(stderr, "fsdpc import torch: --arg is for a factory; --hf builds from the config alone")
		return a, 2, false
	}
	if a.hf == "" {
		a.factory, a.kv = pos[0], kv
	}
	if a.opt, a.autoWorld, ok = shape.options(fl, stderr); !ok {
		return a, 2, false
	}
	if !toStdout(a.out) && a.hf != "" {
		if err := atomicfile.NotAnInput(a.out, a.hf); err != nil {
			return a, reportErr(stderr, err), false
		}
	}
	return a, 0, true
}

// makeImportTorch runs the Python importer once and converts its
// description, saying on stderr what it could not recognise.
func makeImportTorch(a importTorchArgs, stderr io.Writer) (*hf.TorchResult, error) {
	var pos []string
	if a.factory != "" {
		pos = []string{a.factory}
	}
	d, err := describeTorch(a.hf, pos, a.kv, a.python, a.opt, a.opt.SeqLen == 0, a.timeout)
	if err != nil {
		return nil, err
	}
	opt := a.opt
	if a.autoWorld {
		// The description does not depend on the world size: one Python
		// run, then a conversion and a plan per node count tried.
		convert := func(o hf.Options) ([]byte, error) {
			res, err := hf.ConvertTorch(d, o)
			if err != nil {
				return nil, err
			}
			return res.Text, nil
		}
		var note string
		if opt, note, err = smallestWorld(a.inputs()[0], opt, convert); err != nil {
			return nil, err
		}
		fmt.Fprintln(stderr, note)
	}
	res, err := hf.ConvertTorch(d, opt)
	if err != nil {
		return nil, err
	}
	for _, p := range res.Problems {
		name := p.Module
		if name == "" {
			name = "(root)"
		}
		fmt.Fprintf(stderr, "warning: %s %s\n", name, p.What)
	}
	for _, d := range res.Dropped {
		fmt.Fprintf(stderr, "note: kind refused for %s; measured instead\n", d)
	}
	return res, nil
}

// writeImportTorch writes the model file to stdout or to -o, saying which
// model it is on stderr.
func writeImportTorch(stdout, stderr io.Writer, a importTorchArgs, res *hf.TorchResult) error {
	m, err := writeModelFile(stdout, a.out, res.Text, a.inputs())
	if m != nil {
		fmt.Fprintf(stderr, "wrote %s: %s, %s parameters, %d modules measured rather than recognised\n", a.out, m.Name, ir.FormatCount(m.Stats().Params), len(res.Measured))
	}
	return err
}

// importTorch runs the Python importer and converts its description.
func importTorch(hfConfig string, pos, kv []string, pythonPath string, opt hf.Options, seqDefault bool, timeout time.Duration) (*hf.TorchResult, error) {
	d, err := describeTorch(hfConfig, pos, kv, pythonPath, opt, seqDefault, timeout)
	if err != nil {
		return nil, err
	}
	return hf.ConvertTorch(d, opt)
}

// describeTorch runs the Python importer and returns its description.
func describeTorch(hfConfig string, pos, kv []string, pythonPath string, opt hf.Options, seqDefault bool, timeout time.Duration) (*hf.TorchDescription, error) {
	py, err := torchgen.FindPython(pythonPath)
	if err != nil {
		return nil, err
	}
	seq := opt.SeqLen
	if seq == 0 {
		seq = defaultTorchSeqLen
	}
	mb := opt.MicroBatch
	if mb == 0 {
		mb = 1
	}
	args := []string{"-m", "fsdpc.importer", "--micro-batch", fmt.Sprint(mb), "--seq-len", fmt.Sprint(seq)}
	var env []string
	var src []byte
	if hfConfig != "" {
		src, _, err = readConfig(hfConfig)
		if err != nil {
			return nil, err
		}
		args = append(args, "--hf", filepath.Base(hfConfig))
		if seqDefault {
			args = append(args, "--seq-len-default")
		}
	} else {
		args = append(args, "--factory", pos[0])
		for _, a := range kv {
			args = append(args, "--arg", a)
		}
		// The factory's module is imported from the working directory.
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		env = append(env, "FSDPC_IMPORT_PATH="+wd)
	}
	outText, err := py.RunScript(torchgen.Script{
		Setup: func(dir string) error {
			if err := python.WriteTo(dir); err != nil {
				return err
			}
			if hfConfig != "" {
				return os.WriteFile(filepath.Join(dir, filepath.Base(hfConfig)), src, 0o644)
			}
			if py.Root != "" {
				return copyFactoryModule(pos[0], dir)
			}
			return nil
		},
		Args:    args,
		Env:     env,
		Timeout: timeout,
	})
	if err != nil {
		return nil, err
	}
	return hf.ParseTorchDescription(outText)
}

// copyFactoryModule copies the factory's module (pkg.module: the
// package directory pkg, or the file module.py) from the working
// directory into the scratch directory, where the torch root's python3
// can import it.
func copyFactoryModule(spec, dir string) error {
	mod, _, _ := strings.Cut(spec, ":")
	top, _, _ := strings.Cut(mod, ".")
	if top == "" || strings.ContainsAny(top, `/\`) {
		return fmt.Errorf("%q: want pkg.module:factory", spec)
	}
	if st, err := os.Stat(top); err == nil && st.IsDir() {
		return copyDir(top, filepath.Join(dir, top))
	}
	data, err := os.ReadFile(top + ".py")
	if err != nil {
		return fmt.Errorf("the factory's module %s: neither %s/ nor %s.py in the working directory (the torch root sees only those; --python runs your own interpreter with your paths)", mod, top, top)
	}
	return os.WriteFile(filepath.Join(dir, top+".py"), data, 0o644)
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if d.Name() == "__pycache__" || strings.HasPrefix(d.Name(), ".") && path != src {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
