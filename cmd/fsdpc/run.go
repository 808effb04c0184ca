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

// fsdpc run is parse -> run -> render: parseRunArgs reads the command
// line (every usage problem exits 2 there, before any work), the torch
// and cuda backends go to their own files, and on the host backend
// runHost does the work and renderHostRun prints what it did.

func runRun(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseRunArgs(args, stderr)
	if !ok {
		return code
	}
	switch a.backend {
	case "torch":
		if a.accelerate != "" {
			return runAccelerate(a.target, a.accelerate, a.model, a.hf, a.python, a.timeout, stdout, stderr)
		}
		return runTorch(a.target, a.model, a.python, a.scale, a.timeout, stdout, stderr)
	case "cuda":
		return runCUDA(a.target, a.cuda, workerArgs{scale: a.scale, steps: a.steps, ranks: a.ranks, timeout: a.timeout}, stdout, stderr)
	}
	r, err := runHost(a, stderr)
	renderHostRun(stdout, a, r)
	if err != nil {
		if r.failures {
			return 1 // the report printed them
		}
		return reportErr(stderr, err)
	}
	return 0
}

// runArgs is a parsed `fsdpc run` command line.
type runArgs struct {
	target  string // plan.bin, a model file or a zoo name
	backend string // host, cuda or torch
	scale   int
	steps   int
	ranks   int // 0: the plan's
	timeout time.Duration
	// The torch backend's: the model the plan was made from, the python,
	// and with accelerate its config and the transformers config.json.
	model, python, accelerate, hf string
	// The host backend's: save a checkpoint into this directory, and load
	// it under another plan.
	checkpoint, loadUnder string
	cuda                  cudaFlags
}

// parseRunArgs parses run's command line. When ok is false the command
// exits with code, having said why on stderr: 0 for -h, 2 for bad usage.
func parseRunArgs(args []string, stderr io.Writer) (a runArgs, code int, ok bool) {
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&a.backend, "backend", "host", "where to run: host (every rank in this process) or cuda (a worker process per GPU)")
	fl.IntVar(&a.scale, "scale", 1, "shrink every tensor dimension by this factor, keeping the plan's structure")
	fl.IntVar(&a.steps, "steps", 1, "training steps to run")
	fl.IntVar(&a.ranks, "ranks", 0, "the ranks to run; must be the plan's world size (default: the plan's)")
	fl.DurationVar(&a.timeout, "timeout", 10*time.Second, "declare a deadlock after this long without progress (cuda: the watchdog fails a collective not finished this long after it was enqueued, and aborts NCCL)")
	fl.StringVar(&a.model, "model", "", "torch backend: the model file or zoo name the plan was made from")
	fl.StringVar(&a.python, "python", "", "torch backend: a python3 with torch (default: the root .ci/install-torch builds)")
	fl.StringVar(&a.accelerate, "accelerate", "", "torch backend: an accelerate config file: prepare the model with accelerate's own FSDP2 path and compare it with the plan (needs --hf)")
	fl.StringVar(&a.hf, "hf", "", "with --accelerate: the transformers config.json of the model accelerate prepares")
	fl.StringVar(&a.checkpoint, "checkpoint", "", "host backend: after the run, save every rank's chunks of the parameters and optimizer states into this directory (docs/checkpoint.md)")
	fl.StringVar(&a.loadUnder, "load-under", "", "with --checkpoint: load the checkpoint under this plan (plan.bin, model or zoo name) with the reshard reads and check every rank's state against the reference")
	a.cuda.register(fl)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc run [--backend host|cuda|torch] [--scale K] [--steps N] [--ranks N] [--checkpoint DIR [--load-under NEW]] plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "       fsdpc run --backend torch --accelerate config.yaml --model model.toml --hf config.json plan.bin")
		fmt.Fprintln(stderr, "\nRuns the plan's training steps for real on every rank, checks every all-gather, gradient,")
		fmt.Fprintln(stderr, "parameter and optimizer state against an unsharded reference, and measures each memory")
		fmt.Fprintln(stderr, "pool against the plan's prediction. Exits 1 on a mismatch, a hazard or a deadlock.")
		fmt.Fprintln(stderr, "--backend cuda starts one fsdpc-cuda worker per GPU (--nproc-per-node on this node).")
		fl.PrintDefaults()
	}
	usage := func(format string, args ...any) (runArgs, int, bool) {
		fmt.Fprintf(stderr, "fsdpc run: "+format+"\n", args...)
		return a, 2, false
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return a, code, false
	}
	a.target = fl.Arg(0)
	if a.scale < 1 || a.scale > executor.MaxScale || a.steps < 1 || a.ranks < 0 || a.timeout <= 0 {
		return usage("--scale must be from 1 to %d, --steps at least 1, --ranks not negative, --timeout positive", executor.MaxScale)
	}
	if (a.accelerate != "" || a.hf != "") && a.backend != "torch" || a.hf != "" && a.accelerate == "" {
		return usage("--accelerate is for --backend torch, and --hf needs --accelerate")
	}
	if a.loadUnder != "" && a.checkpoint == "" || a.checkpoint != "" && a.backend != "host" {
		return usage("--checkpoint needs the host backend, and --load-under needs --checkpoint")
	}
	switch a.backend {
	case "host":
		if set := a.cuda.set(fl); len(set) > 0 {
			verb := "are"
			if len(set) == 1 {
				verb = "is"
			}
			return usage("%s %s for --backend cuda only", strings.Join(set, ", "), verb)
		}
	case "torch":
		if a.steps != 1 || a.ranks != 0 {
			return usage("--steps and --ranks are for the host and cuda backends; --backend torch runs the plan's first step (--scale shrinks the plan and the model together)")
		}
		if a.accelerate != "" && a.scale != 1 {
			return usage("--accelerate builds the transformers model at its own size; --scale does not apply")
		}
	case "cuda":
	default:
		return usage("unknown backend %q: host, cuda or torch", a.backend)
	}
	return a, 0, true
}

// hostRun is what run did on the host backend, the renderer's input:
// what ran before an error stays in it.
type hostRun struct {
	rep *executor.Report // nil when the run did not start
	// failures is set when the run failed with failures its report names.
	failures bool
	// saved is set when the checkpoint was saved (--checkpoint).
	saved bool
	// loaded is the checkpoint loaded under --load-under and checked.
	loaded *executor.Restored
}

// runHost runs the plan on the host backend, saves the checkpoint and
// loads it under another plan if asked. Progress goes to stderr.
func runHost(a runArgs, stderr io.Writer) (*hostRun, error) {
	r := &hostRun{}
	p, err := loadPlan(a.target)
	if err != nil {
		return r, err
	}
	if err := refuseUnproven(a.target, p); err != nil {
		return r, err
	}
	var under *schedule.Plan
	if a.loadUnder != "" {
		// Read before the run, so a bad NEW costs no run.
		if under, err = loadPlan(a.loadUnder); err != nil {
			return r, err
		}
		if err := refuseUnproven(a.loadUnder, under); err != nil {
			return r, err
		}
	}
	if a.checkpoint != "" {
		// The save writes a new directory of DIR and replaces only the
		// pointer, which must not be an input; checked, and DIR made,
		// before the run, so a bad DIR costs no run.
		if err := atomicfile.NotAnInput(filepath.Join(a.checkpoint, executor.LatestName), a.target, a.loadUnder); err != nil {
			return r, fmt.Errorf("fsdpc run: --checkpoint: %w", err)
		}
		if err := executor.PrepareCheckpointDir(a.checkpoint); err != nil {
			return r, fmt.Errorf("fsdpc run: --checkpoint %s: %w", a.checkpoint, err)
		}
	}
	opts := executor.Options{Scale: a.scale, Steps: a.steps, Ranks: a.ranks, Timeout: a.timeout, Checkpoint: a.checkpoint}
	prog := &progress{w: stderr, tty: isTerminal(stderr), steps: a.steps}
	opts.Progress = prog.update
	r.rep, err = executor.Run(p, executor.NewHost(), opts)
	prog.finish()
	if err != nil {
		r.failures = r.rep != nil && r.rep.Failures != nil
		return r, fmt.Errorf("fsdpc run %s: %w", a.target, err)
	}
	r.saved = a.checkpoint != ""
	if under != nil {
		res, err := executor.LoadCheckpoint(a.checkpoint, under, a.scale)
		var ie *checkpoint.IncompatibleError
		if errors.As(err, &ie) && a.scale > 1 {
			err = fmt.Errorf("%w\n(--scale keeps each plan's pattern of rows per rank, so plans for other meshes scale to other shapes: load at --scale 1)", err)
		}
		if err != nil {
			return r, fmt.Errorf("fsdpc run: loading %s under %s: %w", a.checkpoint, a.loadUnder, err)
		}
		if err := res.Check(r.rep.Final); err != nil {
			return r, fmt.Errorf("fsdpc run: %s loaded under %s differs from the reference: %w", a.checkpoint, a.loadUnder, err)
		}
		r.loaded = res
	}
	return r, nil
}

// renderHostRun prints the run's report, where the checkpoint was saved
// and what loading it under another plan read.
func renderHostRun(w io.Writer, a runArgs, r *hostRun) {
	if r.rep != nil {
		r.rep.Write(w)
	}
	if r.saved {
		fmt.Fprintf(w, "\ncheckpoint saved to %s, %s names it (docs/checkpoint.md)\n", r.rep.Saved, filepath.Join(a.checkpoint, executor.LatestName))
	}
	if res := r.loaded; res != nil {
		fmt.Fprintf(w, "loaded under %s (%d ranks, mesh %d×%d): %d reads, %s; every rank's parameters and optimizer states equal the reference\n",
			a.loadUnder, res.Plan.Cluster.WorldSize, res.Plan.Cluster.Replicate, res.Plan.Cluster.Shard, res.Reads, ir.FormatBytes(res.Bytes))
	}
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
