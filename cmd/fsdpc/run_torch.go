package main

import (
	"fmt"
	"io"
	"time"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// runTorch runs the plan under real PyTorch FSDP2 (one process per rank,
// gloo on CPU) and compares what FSDP2 did with the plan.
func runTorch(planPath, modelArg, python string, timeout time.Duration, stdout, stderr io.Writer) int {
	if modelArg == "" {
		fmt.Fprintln(stderr, "fsdpc run --backend torch: --model FILE is required (the model file or zoo name the plan was made from; the plan holds its hash, not its module tree)")
		return 2
	}
	p, err := schedule.ReadFile(planPath)
	if err != nil {
		return reportErr(stderr, err)
	}
	if err := refuseUnproven(planPath, p); err != nil {
		return reportErr(stderr, err)
	}
	m, err := loadModel(modelArg)
	if err != nil {
		return reportErr(stderr, err)
	}
	spec, err := torchgen.Build(m, p)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc run --backend torch: %v\n", err)
		return 1
	}
	py, err := torchgen.FindPython(python)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc run --backend torch: %v\n", err)
		return 1
	}
	// With an optimizer the harness can build and something to train, it
	// also saves the state with torch.distributed.checkpoint, and the
	// metadata is compared with the plan's checkpoint layout.
	layout, err := checkpoint.FromPlan(p)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "fsdpc run --backend torch: the checkpoint is not compared: %v\n", err)
	case torchgen.CheckpointOptimizers[p.Train.Optimizer] && trains(p):
		spec.Checkpoint = p.Train.Optimizer
	}
	if timeout < time.Minute {
		timeout = 3 * time.Minute // importing torch alone takes seconds a rank
	}
	recs, err := torchgen.Launch(py, spec, timeout)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc run --backend torch: %v\n", err)
		return 1
	}
	bad := torchgen.Compare(p, recs)
	if spec.Checkpoint != "" {
		bad = append(bad, torchgen.CompareCheckpoint(layout, recs[0].Checkpoint)...)
	}
	fmt.Fprintf(stdout, "torch %s, %d ranks: %d collectives on rank 0, %d groups\n", recs[0].Torch, len(recs), len(recs[0].Collectives), len(recs[0].Layouts))
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(stdout, "mismatch:", b)
		}
		fmt.Fprintf(stdout, "FSDP2 differs from the plan in %d places\n", len(bad))
		return 1
	}
	fmt.Fprintln(stdout, "FSDP2 matches the plan: every group's parameter order and shard sizes, every collective's size, reduce op and group, and the order of every group's unshards, prefetches, copy-outs and reshards")
	if spec.Checkpoint != "" {
		fmt.Fprintf(stdout, "DCP's checkpoint matches the plan's layout: %d entries, their sizes, dtypes, chunks and writers (docs/checkpoint.md)\n", len(layout.Tensors))
	}
	return 0
}

// trains reports whether any parameter of the plan has a gradient.
func trains(p *schedule.Plan) bool {
	for _, g := range p.Groups {
		if g.GradShardNumel > 0 {
			return true
		}
	}
	return false
}
