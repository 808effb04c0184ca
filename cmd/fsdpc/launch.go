package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// runEmitLaunch writes a launch file for a plan: `emit launch --engine
// torchrun|slurm|kubernetes|ray plan.bin --script train.py [-- ARGS]`.
func runEmitLaunch(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("emit launch", flag.ContinueOnError)
	fl.SetOutput(stderr)
	engine := fl.String("engine", "", "the launcher: "+strings.Join(torchgen.Engines, ", "))
	out := fl.String("o", "", "write the launch file here (default: stdout)")
	script := fl.String("script", "", "the training program every rank runs (its arguments follow --)")
	export := fl.String("plan-json", "", "the plan export (fsdpc export) as the job sees it (default: plan.bin's name with .json)")
	endpoint := fl.String("endpoint", "", "torchrun: the c10d rendezvous HOST:PORT (default localhost and --port)")
	port := fl.Int("port", 29500, "the rendezvous port (torchrun's default endpoint; Slurm's first node)")
	restarts := fl.Int("max-restarts", 0, "torchrun: restarts of the worker group after a failure")
	name := fl.String("name", "", "the job's name (Slurm, Kubernetes; default fsdpc-MODEL)")
	image := fl.String("image", "", "kubernetes: the container image with torch, fsdpc's Python package and the program")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc emit launch --engine torchrun|slurm|kubernetes|ray plan.bin --script train.py [flags] [-o FILE] [-- ARGS]")
		fmt.Fprintln(stderr, "\nWrites what starts the plan's job on an engine: a torchrun script, an sbatch script, a Kubeflow")
		fmt.Fprintln(stderr, "Trainer TrainJob manifest or a Ray Train program, with the plan's nodes and GPUs per node and the")
		fmt.Fprintln(stderr, "environment its predictions assume. Every rank runs `python -m fsdpc preflight` on the plan")
		fmt.Fprintln(stderr, "export before the training program, which refuses a world or environment the plan was not made for.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if fl.NArg() < 1 || *engine == "" || *script == "" {
		fl.Usage()
		return 2
	}
	planPath, scriptArgs := fl.Arg(0), fl.Args()[1:]
	if *export == "" {
		*export = strings.TrimSuffix(planPath, filepath.Ext(planPath)) + ".json"
	}
	known := false
	for _, e := range torchgen.Engines {
		known = known || e == *engine
	}
	if !known {
		fmt.Fprintf(stderr, "fsdpc emit launch: --engine %q: want one of %s\n", *engine, strings.Join(torchgen.Engines, ", "))
		return 2
	}
	if *engine == "kubernetes" && *image == "" {
		fmt.Fprintln(stderr, "fsdpc emit launch: a TrainJob needs --image: the container image holding torch, fsdpc's Python package and the training program")
		return 2
	}
	p, err := schedule.ReadFile(planPath)
	if err != nil {
		return reportErr(stderr, err)
	}
	bin, err := schedule.Encode(p)
	if err != nil {
		return reportErr(stderr, err)
	}
	sum := sha256.Sum256(bin)
	text, err := torchgen.LaunchFile(p, torchgen.LaunchJob{
		PlanSHA256: hex.EncodeToString(sum[:]),
		Engine:     *engine, PlanExport: *export, Script: *script, Args: scriptArgs, Source: planPath,
		Endpoint: *endpoint, Port: *port, MaxRestarts: *restarts, Name: *name, Image: *image,
	})
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc emit launch: %v\n", err)
		return 1
	}
	if *out == "" {
		fmt.Fprint(stdout, text)
		return 0
	}
	if err := writeOutput(*out, []byte(text), []string{planPath}); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}
