package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
)

// storageFlags are the storage options checkpoint and reshard share.
func storageFlags(fl *flag.FlagSet) (storage, aggregate *string) {
	storage = fl.String("storage", "nvme", "where the checkpoint lives: "+strings.Join(checkpoint.PresetNames(), " or ")+" (docs/checkpoint.md), or a bandwidth per node such as 5GB/s")
	aggregate = fl.String("aggregate", "", "the most the whole file system sustains, such as 100GB/s (default: the preset's)")
	return storage, aggregate
}

func runCheckpoint(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "verify" {
		return runCheckpointVerify(args[1:], stdout, stderr)
	}
	fl := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	fl.SetOutput(stderr)
	storage, aggregate := storageFlags(fl)
	async := fl.Bool("async", false, "async save: the host staging memory and the step stall")
	asJSON := fl.Bool("json", false, "print the estimate as JSON")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc checkpoint [--storage nvme|shared|BW] [--aggregate BW] [--async] [-json] plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "       fsdpc checkpoint verify [--scale K] plan.bin|model.toml|zoo-name DIR")
		fmt.Fprintln(stderr, "\nThe plan's torch.distributed.checkpoint: model and optimizer bytes in all and per rank, files per rank,")
		fmt.Fprintln(stderr, "and the predicted save and load time at a storage bandwidth (docs/checkpoint.md).")
		fmt.Fprintln(stderr, "verify loads the checkpoint `fsdpc run --checkpoint DIR` saved under the plan (exit 1 if it does not load).")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	st, err := checkpoint.ParseStorage(*storage, *aggregate)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	p, err := loadPlan(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	l, err := checkpoint.FromPlan(p)
	if err != nil {
		return reportErr(stderr, fmt.Errorf("%s: %w", fl.Arg(0), err))
	}
	e := l.Estimate(st)
	render := func(w io.Writer) error { l.WriteEstimate(w, e, *async); return nil }
	if *asJSON {
		render = func(w io.Writer) error { return l.EstimateJSON(w, e, *async) }
	}
	if err := render(stdout); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// runCheckpointVerify loads a checkpoint directory fsdpc run saved under a
// plan: the whole load, every check it makes (metadata, files, SHA-256,
// the plan holding the same state) and every rank's reads, without
// training.
func runCheckpointVerify(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("checkpoint verify", flag.ContinueOnError)
	fl.SetOutput(stderr)
	scale := fl.Int("scale", 1, "the --scale the checkpoint was saved at (fsdpc run --scale)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc checkpoint verify [--scale K] plan.bin|model.toml|zoo-name DIR")
		fmt.Fprintln(stderr, "\nLoads the checkpoint `fsdpc run --checkpoint DIR` saved (the one DIR/latest names, or DIR itself")
		fmt.Fprintln(stderr, "holding metadata.json) under the plan with the reads DCP's load planner performs, checking the")
		fmt.Fprintln(stderr, "metadata, every file's size and SHA-256, and that the plan holds the same state. Exit 0 loadable,")
		fmt.Fprintln(stderr, "1 not (the error names the file and the entries), 2 usage (docs/checkpoint.md).")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 2); !ok {
		return code
	}
	if *scale < 1 || *scale > executor.MaxScale {
		fmt.Fprintf(stderr, "fsdpc checkpoint verify: --scale must be from 1 to %d\n", executor.MaxScale)
		return 2
	}
	p, err := loadPlan(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	res, err := executor.LoadCheckpoint(fl.Arg(1), p, *scale)
	if err != nil {
		return reportErr(stderr, fmt.Errorf("fsdpc checkpoint verify: %w", err))
	}
	fmt.Fprintf(stdout, "%s: step %d of %s, %d ranks (mesh %d×%d), %d files, %s; every file's SHA-256 as recorded\n",
		safetext.Term(res.Dir), res.Step, safetext.Term(res.From.Model), res.From.World(), res.From.Replicate, res.From.Shard, res.Files, ir.FormatBytes(res.FileBytes))
	fmt.Fprintf(stdout, "loads under %s (%d ranks, mesh %d×%d): %d reads, %s\n",
		safetext.Term(fl.Arg(0)), res.Plan.Cluster.WorldSize, res.Plan.Cluster.Replicate, res.Plan.Cluster.Shard, res.Reads, ir.FormatBytes(res.Bytes))
	return 0
}
