package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// runEmitLaunch writes a launch file for a plan: `emit launch --engine
// torchrun|slurm|kubernetes|ray plan.bin --script train.py [-- ARGS]`.
// It is parse -> generate -> write: parseEmitLaunchArgs, makeEmitLaunch,
// then the file to stdout or -o.
func runEmitLaunch(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseEmitLaunchArgs(args, stderr)
	if !ok {
		return code
	}
	text, err := makeEmitLaunch(a)
	if err != nil {
		return reportErr(stderr, err)
	}
	if a.out == "" {
		fmt.Fprint(stdout, text)
		return 0
	}
	if err := writeOutput(a.out, []byte(text), []string{a.plan}); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// emitLaunchArgs is a parsed `fsdpc emit launch` command line.
type emitLaunchArgs struct {
	plan string
	out  string // "": stdout
	// job is the launch file's job as the flags give it: all but the
	// plan's hash, which makeEmitLaunch reads from the plan.
	job torchgen.LaunchJob
}

// parseEmitLaunchArgs parses emit launch's command line. When ok is false
// the command exits with code, having said why on stderr: 0 for -h, 2 for
// bad usage.
func parseEmitLaunchArgs(args []string, stderr io.Writer) (a emitLaunchArgs, code int, ok bool) {
	fl := flag.NewFlagSet("emit launch", flag.ContinueOnError)
	fl.SetOutput(stderr)
	j := &a.job
	fl.StringVar(&j.Engine, "engine", "", "the launcher: "+strings.Join(torchgen.Engines, ", "))
	fl.StringVar(&a.out, "o", "", "write the launch file here (default: stdout)")
	fl.StringVar(&j.Script, "script", "", "the training program every rank runs (its arguments follow --)")
	fl.StringVar(&j.PlanExport, "plan-json", "", "the plan export (fsdpc export) as the job sees it (default: plan.bin's name with .json)")
	fl.StringVar(&j.Endpoint, "endpoint", "", "torchrun: the c10d rendezvous HOST:PORT (default localhost and --port)")
	fl.IntVar(&j.Port, "port", 29500, "the rendezvous port (torchrun's default endpoint; Slurm's first node)")
	fl.IntVar(&j.MaxRestarts, "max-restarts", 0, "torchrun: restarts of the worker group after a failure")
	fl.StringVar(&j.Name, "name", "", "the job's name (Slurm, Kubernetes; default fsdpc-MODEL)")
	fl.StringVar(&j.Image, "image", "", "kubernetes: the container image with torch, fsdpc's Python package and the program")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc emit launch --engine torchrun|slurm|kubernetes|ray plan.bin --script train.py [flags] [-o FILE] [-- ARGS]")
		fmt.Fprintln(stderr, "\nWrites what starts the plan's job on an engine: a torchrun script, an sbatch script, a Kubeflow")
		fmt.Fprintln(stderr, "Trainer TrainJob manifest or a Ray Train program, with the plan's nodes and GPUs per node and the")
		fmt.Fprintln(stderr, "environment its predictions assume. Every rank runs `python -m fsdpc preflight` on the plan")
		fmt.Fprintln(stderr, "export before the training program, which refuses a world or environment the plan was not made for.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return a, code, false
	}
	if fl.NArg() < 1 || j.Engine == "" || j.Script == "" {
		fl.Usage()
		return a, 2, false
	}
	a.plan, j.Args = fl.Arg(0), fl.Args()[1:]
	j.Source = a.plan
	if j.PlanExport == "" {
		j.PlanExport = strings.TrimSuffix(a.plan, filepath.Ext(a.plan)) + ".json"
	}
	if !slices.Contains(torchgen.Engines, j.Engine) {
		fmt.Fprintf(stderr, "fsdpc emit launch: --engine %q: want one of %s\n", j.Engine, strings.Join(torchgen.Engines, ", "))
		return a, 2, false
	}
	if j.Engine == "kubernetes" && j.Image == "" {
		fmt.Fprintln(stderr, "fsdpc emit launch: a TrainJob needs --image: the container image holding torch, fsdpc's Python package and the training program")
		return a, 2, false
	}
	return a, 0, true
}

// makeEmitLaunch reads the plan and writes its launch file, the plan's
// hash in it (every rank's check refuses another plan's export).
func makeEmitLaunch(a emitLaunchArgs) (string, error) {
	p, err := schedule.ReadFile(a.plan)
	if err != nil {
		return "", err
	}
	bin, err := schedule.Encode(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(bin)
	job := a.job
	job.PlanSHA256 = hex.EncodeToString(sum[:])
	text, err := torchgen.LaunchFile(p, job)
	if err != nil {
		return "", fmt.Errorf("fsdpc emit launch: %w", err)
	}
	return text, nil
}
