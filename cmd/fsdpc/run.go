package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

func runRun(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	fl.SetOutput(stderr)
	backend := fl.String("backend", "host", "where to run: host (every rank in this process) or cuda (a worker process per GPU)")
	scale := fl.Int("scale", 1, "shrink every tensor dimension by this factor, keeping the plan's structure")
	steps := fl.Int("steps", 1, "training steps to run")
	ranks := fl.Int("ranks", 0, "the ranks to run; must be the plan's world size (default: the plan's)")
	timeout := fl.Duration("timeout", 10*time.Second, "declare a deadlock after this long without progress (cuda: the watchdog fails a collective not finished this long after it was enqueued, and aborts NCCL)")
	model := fl.String("model", "", "torch backend: the model file or zoo name the plan was made from")
	python := fl.String("python", "", "torch backend: a python3 with torch (default: the root .ci/install-torch builds)")
	accel := fl.String("accelerate", "", "torch backend: an accelerate config file: prepare the model with accelerate's own FSDP2 path and compare it with the plan (needs --hf)")
	hfConfig := fl.String("hf", "", "with --accelerate: the transformers config.json of the model accelerate prepares")
	ckptDir := fl.String("checkpoint", "", "host backend: after the run, save every rank's chunks of the parameters and optimizer states into this directory (docs/checkpoint.md)")
	loadUnder := fl.String("load-under", "", "with --checkpoint: load the checkpoint under this plan (plan.bin, model or zoo name) with the reshard reads and check every rank's state against the reference")
	var cf cudaFlags
	cf.register(fl)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc run [--backend host|cuda|torch] [--scale K] [--steps N] [--ranks N] [--checkpoint DIR [--load-under NEW]] plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "       fsdpc run --backend torch --accelerate config.yaml --model model.toml --hf config.json plan.bin")
		fmt.Fprintln(stderr, "\nRuns the plan's training steps for real on every rank, checks every all-gather, gradient,")
		fmt.Fprintln(stderr, "parameter and optimizer state against an unsharded reference, and measures each memory")
		fmt.Fprintln(stderr, "pool against the plan's prediction. Exits 1 on a mismatch, a hazard or a deadlock.")
		fmt.Fprintln(stderr, "--backend cuda starts one fsdpc-cuda worker per GPU (--nproc-per-node on this node).")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	if *scale < 1 || *scale > executor.MaxScale || *steps < 1 || *ranks < 0 || *timeout <= 0 {
		fmt.Fprintf(stderr, "fsdpc run: --scale must be from 1 to %d, --steps at least 1, --ranks not negative, --timeout positive\n", executor.MaxScale)
		return 2
	}
	if (*accel != "" || *hfConfig != "") && *backend != "torch" || *hfConfig != "" && *accel == "" {
		fmt.Fprintln(stderr, "fsdpc run: --accelerate is for --backend torch, and --hf needs --accelerate")
		return 2
	}
	if *loadUnder != "" && *ckptDir == "" || *ckptDir != "" && *backend != "host" {
		fmt.Fprintln(stderr, "fsdpc run: --checkpoint needs the host backend, and --load-under needs --checkpoint")
		return 2
	}
	var b executor.Backend
	switch *backend {
	case "host":
		if set := cf.set(fl); len(set) > 0 {
			verb := "are"
			if len(set) == 1 {
				verb = "is"
			}
			fmt.Fprintf(stderr, "fsdpc run: %s %s for --backend cuda only\n", strings.Join(set, ", "), verb)
			return 2
		}
		b = executor.NewHost()
	case "torch":
		if *steps != 1 || *ranks != 0 {
			fmt.Fprintln(stderr, "fsdpc run: --steps and --ranks are for the host and cuda backends; --backend torch runs the plan's first step (--scale shrinks the plan and the model together)")
			return 2
		}
		if *accel != "" {
			if *scale != 1 {
				fmt.Fprintln(stderr, "fsdpc run: --accelerate builds the transformers model at its own size; --scale does not apply")
				return 2
			}
			return runAccelerate(fl.Arg(0), *accel, *model, *hfConfig, *python, *timeout, stdout, stderr)
		}
		return runTorch(fl.Arg(0), *model, *python, *scale, *timeout, stdout, stderr)
	case "cuda":
		return runCUDA(fl.Arg(0), cf, workerArgs{scale: *scale, steps: *steps, ranks: *ranks, timeout: *timeout}, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "fsdpc run: unknown backend %q: host, cuda or torch\n", *backend)
		return 2
	}
	p, err := loadPlan(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	if err := refuseUnproven(fl.Arg(0), p); err != nil {
		return reportErr(stderr, err)
	}
	var under *schedule.Plan
	if *loadUnder != "" {
		// Read before the run, so a bad NEW costs no run.
		if under, err = loadPlan(*loadUnder); err != nil {
			return reportErr(stderr, err)
		}
		if err := refuseUnproven(*loadUnder, under); err != nil {
			return reportErr(stderr, err)
		}
	}
	if *ckptDir != "" {
		// The save writes a new directory of DIR and replaces only the
		// pointer, which must not be an input; checked, and DIR made,
		// before the run, so a bad DIR costs no run.
		if err := atomicfile.NotAnInput(filepath.Join(*ckptDir, executor.LatestName), fl.Arg(0), *loadUnder); err != nil {
			return reportErr(stderr, fmt.Errorf("fsdpc run: --checkpoint: %w", err))
		}
		if err := executor.PrepareCheckpointDir(*ckptDir); err != nil {
			return reportErr(stderr, fmt.Errorf("fsdpc run: --checkpoint %s: %w", *ckptDir, err))
		}
	}
	opts := executor.Options{Scale: *scale, Steps: *steps, Ranks: *ranks, Timeout: *timeout, Checkpoint: *ckptDir}
	prog := &progress{w: stderr, tty: isTerminal(stderr), steps: *steps}
	opts.Progress = prog.update
	rep, err := executor.Run(p, b, opts)
	prog.finish()
	if rep != nil {
		rep.Write(stdout)
	}
	if err != nil {
		if rep != nil && rep.Failures != nil {
			return 1 // the report printed them
		}
		return reportErr(stderr, fmt.Errorf("fsdpc run %s: %w", fl.Arg(0), err))
	}
	if *ckptDir != "" {
		fmt.Fprintf(stdout, "\ncheckpoint saved to %s, %s names it (docs/checkpoint.md)\n", rep.Saved, filepath.Join(*ckptDir, executor.LatestName))
	}
	if under != nil {
		res, err := executor.LoadCheckpoint(*ckptDir, under, *scale)
		var ie *checkpoint.IncompatibleError
		if errors.As(err, &ie) && *scale > 1 {
			err = fmt.Errorf("%w\n(--scale keeps each plan's pattern of rows per rank, so plans for other meshes scale to other shapes: load at --scale 1)", err)
		}
		if err != nil {
			return reportErr(stderr, fmt.Errorf("fsdpc run: loading %s under %s: %w", *ckptDir, *loadUnder, err))
		}
		if err := res.Check(rep.Final); err != nil {
			return reportErr(stderr, fmt.Errorf("fsdpc run: %s loaded under %s differs from the reference: %w", *ckptDir, *loadUnder, err))
		}
		fmt.Fprintf(stdout, "loaded under %s (%d ranks, mesh %d×%d): %d reads, %s; every rank's parameters and optimizer states equal the reference\n",
			*loadUnder, res.Plan.Cluster.WorldSize, res.Plan.Cluster.Replicate, res.Plan.Cluster.Shard, res.Reads, ir.FormatBytes(res.Bytes))
	}
	return 0
}

// refuseUnproven stops every backend from running a plan that fsdpc
// verify refuses (schedule.Prove): the executors check what they run,
// but a plan whose safety is not proven is not one to run at all.
func refuseUnproven(arg string, p *schedule.Plan) error {
	if _, err := schedule.Prove(p); err != nil {
		return fmt.Errorf("fsdpc run %s: refusing to run a plan that fsdpc verify refuses: %w", arg, err)
	}
	return nil
}

// progress draws a bar on a terminal, or prints a line as each step
// completes otherwise.
type progress struct {
	w      io.Writer
	tty    bool
	steps  int
	shown  int // steps reported
	drawn  bool
	latest executor.Progress
}

func (p *progress) update(pr executor.Progress) {
	p.latest = pr
	if pr.Total <= 0 {
		return
	}
	if p.tty {
		const width = 30
		frac := float64(pr.Done) / float64(pr.Total)
		n := int(frac * width)
		bar := strings.Repeat("=", n) + strings.Repeat(" ", width-n)
		if n > 0 && n < width {
			bar = bar[:n-1] + ">" + bar[n:]
		}
		step := min(int(frac*float64(p.steps))+1, p.steps)
		fmt.Fprintf(p.w, "\r[%s] %3.0f%%  step %d/%d  %s ", bar, 100*frac, step, p.steps, pr.Elapsed.Round(100*time.Millisecond))
		p.drawn = true
		return
	}
	// Steps done, as a share of the operations executed over all ranks.
	for done := int(pr.Done * int64(p.steps) / pr.Total); p.shown < done; p.shown++ {
		fmt.Fprintf(p.w, "step %d/%d done (%s)\n", p.shown+1, p.steps, pr.Elapsed.Round(time.Millisecond))
	}
}

func (p *progress) finish() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
