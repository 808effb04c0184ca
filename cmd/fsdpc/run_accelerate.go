package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// runAccelerate runs accelerate's own FSDP2 path for the user's accelerate
// config (python -m fsdpc.accelerate_check: the config read as
// `accelerate launch` reads it, the transformers model of hfConfig
// prepared with Accelerator(fsdp_plugin=…), one step on CPU over gloo,
// one process per rank of the config's num_processes) and compares what
// FSDP2 did with the plan: units, shard layouts, collectives and the
// order of every group's unshards, copy-outs and reshards.
func runAccelerate(planPath, configPath, modelArg, hfConfig, python string, timeout time.Duration, stdout, stderr io.Writer) int {
	const cmd = "fsdpc run --backend torch --accelerate"
	if modelArg == "" || hfConfig == "" {
		fmt.Fprintf(stderr, "%s: --model FILE (the model file the plan was made from) and --hf config.json (the transformers config accelerate's model is built from) are required\n", cmd)
		return 2
	}
	config, err := os.ReadFile(configPath)
	if err != nil {
		return reportErr(stderr, fmt.Errorf("%s: %w", cmd, err))
	}
	hf, err := os.ReadFile(hfConfig)
	if err != nil {
		return reportErr(stderr, fmt.Errorf("%s: %w", cmd, err))
	}
	p, err := schedule.ReadFile(planPath)
	if err != nil {
		return reportErr(stderr, err)
	}
	m, err := loadModel(modelArg)
	if err != nil {
		return reportErr(stderr, err)
	}
	if m.SourceHash != p.Header.InputSHA256 {
		fmt.Fprintf(stderr, "%s: the plan was made from a different model file (input sha256 %.12s, %s's %.12s)\n", cmd, p.Header.InputSHA256, safetext.Term(modelArg), m.SourceHash)
		return 1
	}
	q, _, export, err := scaledExport(planPath, p, m, 1)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
	py, err := torchgen.FindPython(python)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
	if timeout < time.Minute {
		timeout = 5 * time.Minute // importing torch, transformers and accelerate takes seconds a rank
	}
	fmt.Fprintf(stderr, "%s: %d ranks on CPU over gloo, the model of %s prepared by accelerate…\n", cmd, export.Mesh.WorldSize, safetext.Term(hfConfig))
	start := time.Now()
	all, err := torchgen.RunAccelerate(py, []torchgen.AccelerateCase{{Name: configPath, Config: config, Model: hf, Plan: q, Export: export}}, timeout, io.Discard)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
	recs := all[0]
	fmt.Fprintf(stderr, "%s: done in %.0fs\n", cmd, time.Since(start).Seconds())
	bad := torchgen.CompareAccelerate(m, q, recs)
	if recs[0].Error == "" {
		fmt.Fprintf(stdout, "accelerate %s, torch %s, %d ranks: %d fully_shard calls, %d collectives on rank 0\n",
			safetext.Term(recs[0].Accelerate), safetext.Term(recs[0].Torch), len(recs), len(recs[0].Calls), len(recs[0].Collectives))
		for _, c := range recs[0].Calls {
			fmt.Fprintf(stdout, "  fully_shard(%s, reshard_after_forward=%s)\n", safetext.Term(moduleNames(c.Modules)), safetext.Term(fmt.Sprint(c.Reshard)))
		}
		if len(recs[0].Checkpointed) > 0 {
			fmt.Fprintf(stdout, "  activation checkpointing wraps %d modules: %s\n", len(recs[0].Checkpointed), safetext.Term(moduleNames(recs[0].Checkpointed)))
		}
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(stdout, "mismatch:", safetext.Term(b))
		}
		fmt.Fprintf(stdout, "accelerate's FSDP2 differs from the plan in %d places\n", len(bad))
		return 1
	}
	fmt.Fprintln(stdout, "accelerate's FSDP2 matches the plan: its units and their settings, every group's parameters and shard sizes, every collective's size, dtype, reduce op and group, the order of every unshard, copy-out and reshard, and the checkpointed modules")
	return 0
}

func moduleNames(mods []string) string {
	s := "["
	for i, m := range mods {
		if i > 0 {
			s += ", "
		}
		if m == "" {
			m = "(root)"
		}
		s += m
	}
	return s + "]"
}
