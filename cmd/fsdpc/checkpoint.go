package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fsdpc/fsdpc/checkpoint"
)

// storageFlags are the storage options checkpoint and reshard share.
func storageFlags(fl *flag.FlagSet) (storage, aggregate *string) {
	storage = fl.String("storage", "nvme", "where the checkpoint lives: "+strings.Join(checkpoint.PresetNames(), " or ")+" (docs/checkpoint.md), or a bandwidth per node such as 5GB/s")
	aggregate = fl.String("aggregate", "", "the most the whole file system sustains, such as 100GB/s (default: the preset's)")
	return storage, aggregate
}

func runCheckpoint(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	fl.SetOutput(stderr)
	storage, aggregate := storageFlags(fl)
	async := fl.Bool("async", false, "async save: the host staging memory and the step stall")
	asJSON := fl.Bool("json", false, "print the estimate as JSON")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc checkpoint [--storage nvme|shared|BW] [--aggregate BW] [--async] [-json] plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "\nThe plan's torch.distributed.checkpoint: model and optimizer bytes in all and per rank, files per rank,")
		fmt.Fprintln(stderr, "and the predicted save and load time at a storage bandwidth (docs/checkpoint.md).")
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
	if *asJSON {
		if err := l.EstimateJSON(stdout, e, *async); err != nil {
			return reportErr(stderr, err)
		}
		return 0
	}
	l.WriteEstimate(stdout, e, *async)
	return 0
}
