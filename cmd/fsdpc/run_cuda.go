package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsdpc/fsdpc/executor/launch"
	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/schedule"
)

// cudaWorkerInTree says whether this source tree holds the CUDA worker,
// cmd/fsdpc-cuda; TestCUDAWorkerInTree keeps it true. Flip it when the
// worker lands, and the message for a missing worker stops saying that
// the backend is not built yet.
const cudaWorkerInTree = true

// workerName is the CUDA worker binary, built with the cuda tag.
const workerName = "fsdpc-cuda"

// cudaFlagNames are the flags that only --backend cuda uses.
var cudaFlagNames = []string{"nproc-per-node", "worker", "nnodes", "node-rank", "master-addr", "master-port", "watchdog", "virtual", "link-bandwidth", "trace", "stand-in"}

type cudaFlags struct {
	nproc, nnodes, nodeRank, masterPort int
	worker, masterAddr                  string
	watchdog                            time.Duration
	virtual                             bool
	linkBandwidth, trace, standIn       string
}

func (c *cudaFlags) register(fl *flag.FlagSet) {
	fl.IntVar(&c.nproc, "nproc-per-node", 0, "cuda: worker processes (GPUs) on this node (default: the plan's ranks over --nnodes)")
	fl.StringVar(&c.worker, "worker", "", "cuda: the worker binary (default: "+workerName+" next to fsdpc, else on PATH)")
	fl.IntVar(&c.nnodes, "nnodes", 1, "cuda: the nodes of the job; start fsdpc run on each with its --node-rank")
	fl.IntVar(&c.nodeRank, "node-rank", 0, "cuda: this node's rank, 0 to nnodes-1")
	fl.StringVar(&c.masterAddr, "master-addr", "", "cuda: rank 0's node, where the ranks meet (default 127.0.0.1 on one node)")
	fl.IntVar(&c.masterPort, "master-port", 0, "cuda: the port the ranks meet at (default: a free one, on one node)")
	fl.DurationVar(&c.watchdog, "watchdog", 10*time.Minute, "cuda: stop every worker once none has printed anything for this long (0: never)")
	fl.BoolVar(&c.virtual, "virtual", false, "cuda: rehearse every rank of the plan on one GPU (one worker, collectives as device copies and reductions)")
	fl.StringVar(&c.linkBandwidth, "link-bandwidth", "", "cuda --virtual: pace the virtual collectives to this per-rank link bandwidth (e.g. 50GB/s)")
	fl.StringVar(&c.trace, "trace", "", "cuda: write the measured step as a Chrome trace (rank 0's, or the rehearsal's first rank)")
	fl.StringVar(&c.standIn, "stand-in", "spin", "cuda: compute stand-in: spin (the modelled duration) or burn (real FMAs)")
}

// set lists the cuda-only flags given on the command line.
func (c *cudaFlags) set(fl *flag.FlagSet) []string {
	var out []string
	fl.Visit(func(f *flag.Flag) {
		if slices.Contains(cudaFlagNames, f.Name) {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}

// workerArgs are what the worker is told besides its rank environment.
type workerArgs struct {
	scale, steps, ranks int
	timeout             time.Duration
}

// args is the worker's command line, the contract with cmd/fsdpc-cuda:
//
//	fsdpc-cuda --scale=K --steps=N --timeout=D [--virtual]
//	           [--link-bandwidth=B] [--trace=FILE] [--stand-in=S] /absolute/plan.bin
//
// with the rank environment of launch.Env.Environ (docs/executor.md).
func (w workerArgs) args(plan string, cf cudaFlags) []string {
	out := []string{"--scale=" + strconv.Itoa(w.scale), "--steps=" + strconv.Itoa(w.steps), "--timeout=" + w.timeout.String()}
	if cf.virtual {
		out = append(out, "--virtual")
	}
	if cf.linkBandwidth != "" {
		out = append(out, "--link-bandwidth="+cf.linkBandwidth)
	}
	if cf.trace != "" {
		if abs, err := filepath.Abs(cf.trace); err == nil {
			out = append(out, "--trace="+abs)
		}
	}
	if cf.standIn != "" && cf.standIn != "spin" {
		out = append(out, "--stand-in="+cf.standIn)
	}
	return append(out, plan)
}

// runCUDA runs the plan on this node's GPUs: one worker process per local
// rank, started by the launcher.
func runCUDA(planPath string, cf cudaFlags, wa workerArgs, stdout, stderr io.Writer) int {
	switch {
	case cf.nproc < 0:
		fmt.Fprintf(stderr, "fsdpc run: --nproc-per-node %d: at least 1 (0: the plan's ranks)\n", cf.nproc)
		return 2
	case cf.nnodes < 1 || cf.nodeRank < 0 || cf.nodeRank >= cf.nnodes:
		fmt.Fprintf(stderr, "fsdpc run: --node-rank %d of --nnodes %d: expected 0 ≤ node rank < nodes\n", cf.nodeRank, cf.nnodes)
		return 2
	case cf.masterPort < 0 || cf.masterPort > 65535:
		fmt.Fprintf(stderr, "fsdpc run: --master-port %d is not a TCP port (1 to 65535)\n", cf.masterPort)
		return 2
	case cf.nnodes > 1 && (cf.masterAddr == "" || cf.masterPort == 0):
		fmt.Fprintf(stderr, "fsdpc run: --nnodes %d needs --master-addr (rank 0's node) and --master-port, the same on every node\n", cf.nnodes)
		return 2
	case cf.watchdog < 0:
		fmt.Fprintln(stderr, "fsdpc run: --watchdog must not be negative (0: never)")
		return 2
	}
	worker, msg := findWorker(cf.worker)
	if msg != "" {
		fmt.Fprint(stderr, msg)
		return 1
	}
	p, err := schedule.ReadFile(planPath)
	if err != nil {
		return reportErr(stderr, err)
	}
	if err := atomicfile.NotAnInput(cf.trace, planPath); cf.trace != "" && err != nil {
		return reportErr(stderr, fmt.Errorf("fsdpc run: --trace: %w", err))
	}
	if err := refuseUnproven(planPath, p); err != nil {
		return reportErr(stderr, err)
	}
	world := p.Cluster.WorldSize
	nproc := cf.nproc
	if nproc == 0 {
		nproc = max(world/cf.nnodes, 1)
	}
	if cf.virtual {
		// A rehearsal: one worker runs every rank on one GPU.
		if cf.nproc > 1 || cf.nnodes > 1 {
			return reportErr(stderr, fmt.Errorf("fsdpc run: --virtual runs every rank in one worker on one GPU; it takes no --nproc-per-node %d or --nnodes %d", cf.nproc, cf.nnodes))
		}
		nproc = 1
	} else if cf.linkBandwidth != "" {
		return reportErr(stderr, errors.New("fsdpc run: --link-bandwidth paces the virtual ranks of a rehearsal: use it with --virtual"))
	}
	if !cf.virtual && nproc*cf.nnodes != world {
		return reportErr(stderr, fmt.Errorf("fsdpc run %s: the plan is for %d ranks, and %d node(s) × %d processes per node make %d: a plan runs on the ranks it was compiled for (several ranks on one GPU: rehearse with --virtual)",
			planPath, world, cf.nnodes, nproc, nproc*cf.nnodes))
	}
	if wa.ranks != 0 && wa.ranks != world {
		return reportErr(stderr, fmt.Errorf("fsdpc run %s: --ranks %d, but the plan is for %d ranks: a plan is compiled for its ranks", planPath, wa.ranks, world))
	}
	abs, err := filepath.Abs(planPath)
	if err != nil {
		return reportErr(stderr, err)
	}

	// Ctrl-C, a TERM or a hangup tears the workers down (SIGTERM, then
	// SIGKILL); killed outright, the launcher takes them with it (their
	// parent-death signal, executor/launch).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	first := cf.nodeRank * nproc
	if cf.virtual {
		fmt.Fprintf(stderr, "fsdpc run: %s on the cuda backend: a rehearsal of all %d ranks on one GPU, worker %s\n", p.Header.Model, world, worker)
	} else {
		fmt.Fprintf(stderr, "fsdpc run: %s on the cuda backend: ranks %d-%d of %d on this node, worker %s\n", p.Header.Model, first, first+nproc-1, world, worker)
	}
	workerErr := &spotter{w: stderr, text: []byte(noLibcuda)}
	err = launch.Launch(ctx, worker, wa.args(abs, cf), nproc, launch.Options{
		NNodes: cf.nnodes, NodeRank: cf.nodeRank, MasterAddr: cf.masterAddr, MasterPort: cf.masterPort,
		Stdout: stdout, Stderr: workerErr, Watchdog: cf.watchdog,
	})
	if err != nil {
		err = fmt.Errorf("fsdpc run %s: %w", planPath, err)
		if workerErr.seen.Load() {
			err = fmt.Errorf("%w\n%s", err, noLibcudaHelp)
		}
		return reportErr(stderr, err)
	}
	return 0
}

// noLibcuda is what the dynamic loader prints, before any of the worker's
// code runs, when it cannot find libcuda.so.1 to start the worker (which
// links it, through cgo's -lcuda); it then exits 127. The worker cannot
// explain that itself, so fsdpc does: its rank-prefixed copy of the line
// says nothing of what is missing or what to do.
const noLibcuda = "error while loading shared libraries: libcuda.so.1"

// noLibcudaHelp follows the launch error when a worker printed noLibcuda.
const noLibcudaHelp = "fsdpc run: the worker could not load libcuda.so.1, the user-space part of the NVIDIA\n" +
	"driver: this machine has no NVIDIA driver (or its libraries are not where the loader\n" +
	"looks: ldconfig -p | grep libcuda). Run on a GPU node, or install the driver (nvidia-smi\n" +
	"and fsdpc devices then list the GPUs). Without a GPU, run the plan with --backend host."

// spotter passes the workers' output through and notes whether it held
// text. Launch writes whole lines, each Write under one lock, so the text
// is never split between two writes.
type spotter struct {
	w    io.Writer
	text []byte
	seen atomic.Bool
}

func (s *spotter) Write(p []byte) (int, error) {
	if bytes.Contains(p, s.text) {
		s.seen.Store(true)
	}
	return s.w.Write(p)
}

// findWorker finds the CUDA worker: --worker if given, else fsdpc-cuda next
// to this executable, else on PATH. When there is none, msg says how to
// build it, truthfully about whether it can be built yet.
func findWorker(flagValue string) (path, msg string) {
	if flagValue != "" {
		p, err := exec.LookPath(flagValue)
		if err != nil {
			return "", fmt.Sprintf("fsdpc run: --worker %s: %v\n", flagValue, err)
		}
		return p, ""
	}
	dir := "$(dirname $(command -v fsdpc))"
	if exe, err := os.Executable(); err == nil {
		dir = filepath.Dir(exe)
		if p, err := exec.LookPath(filepath.Join(dir, workerName)); err == nil {
			return p, ""
		}
	}
	// (LookPath fails with exec.ErrDot for a worker found only through a
	// relative PATH entry: not trusted.)
	if p, err := exec.LookPath(workerName); err == nil {
		return p, ""
	}
	build := fmt.Sprintf("  go build -tags cuda -o %s ./cmd/%s\n", filepath.Join(dir, workerName), workerName)
	missing := fmt.Sprintf("fsdpc run: --backend cuda runs one %s worker process per GPU, and there is none\nnext to fsdpc (in %s) or on PATH.\n", workerName, dir)
	how := "on a machine with the CUDA headers and the driver's libcuda (Debian non-free:\nnvidia-cuda-dev), from fsdpc's source:\n" + build + "or name it with --worker PATH.\n"
	if !cudaWorkerInTree {
		return "", missing +
			"The CUDA backend is not built yet (issue: CUDA executor): this fsdpc's source has no\n" +
			"cmd/" + workerName + " to build the worker from, so --backend cuda cannot run today; use\n" +
			"--backend host. Once cmd/" + workerName + " exists, build the worker\n" + how
	}
	return "", missing + "Build it\n" + how
}
