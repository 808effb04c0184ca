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
// gloo on CPU), shrunk by scale together with its model, twice: the
// conformance harness records what FSDP2 did for fsdpc to compare with the
// plan, then the program `emit torch` writes runs, a process a rank as a
// user would launch it, and checks itself with apply_plan and
// verify_first_step. Progress goes to stderr: importing torch alone takes
// a rank seconds.
func runTorch(planPath, modelArg, python string, scale int, timeout time.Duration, stdout, stderr io.Writer) int {
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
	if m.SourceHash != p.Header.InputSHA256 {
		fmt.Fprintf(stderr, "fsdpc run --backend torch: the plan was made from a different model file (input sha256 %.12s, %s's %.12s)\n", p.Header.InputSHA256, modelArg, m.SourceHash)
		return 1
	}
	q, spec, export, err := scaledExport(planPath, p, m, scale)
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
	layout, err := checkpoint.FromPlan(q)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "fsdpc run --backend torch: the checkpoint is not compared: %v\n", err)
	case torchgen.CheckpointOptimizers[q.Train.Optimizer] && trains(q):
		spec.Checkpoint = q.Train.Optimizer
	}
	if timeout < time.Minute {
		timeout = 3 * time.Minute // importing torch alone takes seconds a rank
	}
	scaled := ""
	if scale > 1 {
		scaled = fmt.Sprintf(", plan and model shrunk %d×", scale)
	}
	start := time.Now()
	fmt.Fprintf(stderr, "fsdpc run --backend torch: %d ranks on CPU over gloo%s; 1/2 the conformance harness (every collective and shard recorded)…\n", spec.World, scaled)
	recs, err := torchgen.Launch(py, spec, timeout)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc run --backend torch: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "fsdpc run --backend torch: harness done in %.0fs; 2/2 the program of emit torch, one process a rank (apply_plan, verify_first_step)…\n", time.Since(start).Seconds())
	bad := torchgen.Compare(q, recs)
	if spec.Checkpoint != "" {
		bad = append(bad, torchgen.CompareCheckpoint(layout, recs[0].Checkpoint)...)
	}
	start = time.Now()
	_, progErr := torchgen.RunProgram(py, export, spec.Model, planPath, 1, timeout)
	fmt.Fprintf(stderr, "fsdpc run --backend torch: program done in %.0fs\n", time.Since(start).Seconds())
	fmt.Fprintf(stdout, "torch %s, %d ranks: %d collectives on rank 0, %d groups\n", recs[0].Torch, len(recs), len(recs[0].Collectives), len(recs[0].Layouts))
	if progErr != nil {
		bad = append(bad, fmt.Sprintf("the emitted program (apply_plan, verify_first_step) failed: %v", progErr))
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(stdout, "mismatch:", b)
		}
		fmt.Fprintf(stdout, "FSDP2 differs from the plan in %d places\n", len(bad))
		return 1
	}
	fmt.Fprintln(stdout, "FSDP2 matches the plan: every group's parameter order and shard sizes, every collective's size, reduce op and group")
	fmt.Fprintln(stdout, "the emitted program's apply_plan and verify_first_step agree on every rank (docs/torch.md)")
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
