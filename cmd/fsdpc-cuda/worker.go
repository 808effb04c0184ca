package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/launch"
	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// platform is what the worker needs from CUDA and NCCL; tests pass a
// CPU device (executor/gpu/gputest).
type platform struct {
	built bool
	open  func(ordinal int) (gpu.Device, error)
	// count is how many GPUs the driver shows this process
	// (cuDeviceGetCount, after CUDA_VISIBLE_DEVICES).
	count    func() (int, error)
	uniqueID func(lib string) ([128]byte, error)
	comm     func(dev gpu.Device, lib string, id [128]byte, n, rank int, timeout time.Duration) (gpu.Comm, error)
	// memory samples dev's memory during the run (NVML; memory.go);
	// nil: not sampled.
	memory func(dev gpu.Device) (gpu.MemorySampler, func() error, error)
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string, plat platform) int {
	if len(args) > 0 && args[0] == "bench" {
		return bench(args[1:], stdout, stderr, plat)
	}
	fl := flag.NewFlagSet("fsdpc-cuda", flag.ContinueOnError)
	fl.SetOutput(stderr)
	virtual := fl.Bool("virtual", false, "run every rank of the plan on one GPU (a rehearsal); otherwise one rank per process, from the launcher's environment")
	scale := fl.Int("scale", 1, "shrink every tensor dimension by this factor")
	steps := fl.Int("steps", 3, "training steps: the first is checked, the last measured")
	timeout := fl.Duration("timeout", time.Minute, "fail the run and abort the communicators when a collective has not finished this long after it was enqueued (NCCL), or its members have not all arrived (--virtual)")
	linkBW := fl.String("link-bandwidth", "", "pace virtual collectives to this per-rank link bandwidth (e.g. 50GB/s); default: as fast as the device copies")
	standIn := fl.String("stand-in", "spin", "what compute does: spin (the modelled duration) or burn (real FMAs)")
	trace := fl.String("trace", "", "write the measured step as a Chrome trace to this file")
	device := fl.Int("device", -1, "the GPU ordinal among those visible (default: LOCAL_RANK where the process sees its node's GPUs, 0 where it sees only its own, as with a CUDA_VISIBLE_DEVICES per task)")
	nccl := fl.String("nccl", "", "libnccl.so.2 to load (default: FSDPC_NCCL, else the loader's search path)")
	checkSteps := fl.Int("check-steps", 1, "steps, from the first, that run the data check")
	graph := fl.Bool("graph", false, "capture a step as a CUDA graph and replay it for the later steps; reports the launch overhead saved (--virtual; needs --steps ≥ 3)")
	calBytes := fl.String("calibrate-bytes", "64MiB", "the transfer size of the device measurements the prediction uses")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: fsdpc-cuda [flags] plan.bin | fsdpc-cuda bench [flags]")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "fsdpc-cuda: %v\n", err)
		return 1
	}
	if *scale < 1 || *steps < 1 || *checkSteps < 0 {
		fmt.Fprintln(stderr, "fsdpc-cuda: --scale and --steps must be at least 1, --check-steps not negative")
		return 2
	}
	var bw float64
	if *linkBW != "" {
		v, err := ir.ParseBandwidth(*linkBW)
		if err != nil || v <= 0 {
			fmt.Fprintf(stderr, "fsdpc-cuda: --link-bandwidth %q: a bandwidth such as 50GB/s\n", *linkBW)
			return 2
		}
		bw = v
	}
	si := gpu.SpinStandIn
	switch *standIn {
	case "spin":
	case "burn":
		si = gpu.BurnStandIn
	default:
		fmt.Fprintf(stderr, "fsdpc-cuda: --stand-in %q: spin or burn\n", *standIn)
		return 2
	}
	if !plat.built {
		_, err := plat.open(0)
		return fail(err)
	}
	planPath := fl.Arg(0)
	p, err := schedule.ReadFile(planPath)
	if err != nil {
		return fail(err)
	}
	// The launcher proves the plan, but a worker may be started by
	// torchrun or Slurm with any file: it runs none fsdpc verify refuses.
	if _, err := schedule.Prove(p); err != nil {
		return fail(fmt.Errorf("%s: refusing to run a plan that fsdpc verify refuses: %w", planPath, err))
	}
	if err := atomicfile.NotAnInput(*trace, planPath); *trace != "" && err != nil {
		return fail(fmt.Errorf("--trace: %w", err)) // before the run, not after
	}
	if *nccl == "" {
		*nccl = getenv("FSDPC_NCCL")
	}

	// Where this process stands: every rank (a rehearsal), or one.
	var env launch.Env
	local := []int(nil)
	if !*virtual {
		if env, err = launch.FromEnv(getenv); err != nil {
			return fail(fmt.Errorf("%w\n(to rehearse all %d ranks of the plan on one GPU, pass --virtual)", err, p.Cluster.WorldSize))
		}
		if env.World != p.Cluster.WorldSize {
			return fail(fmt.Errorf("%s is planned for %d ranks, and the launcher started %d: start one process per rank, or rehearse on one GPU with --virtual", planPath, p.Cluster.WorldSize, env.World))
		}
		local = []int{env.Rank}
	}
	count, err := plat.count()
	if err != nil {
		return fail(err)
	}
	ordinal, err := deviceOrdinal(*device, *virtual, env, getenv, count)
	if err != nil {
		return fail(err)
	}
	dev, err := plat.open(ordinal)
	if err != nil {
		return fail(err)
	}
	defer dev.Close()
	fmt.Fprintf(stderr, "fsdpc-cuda: %s on %s\n", p.Header.Model, dev.Name())

	world := p.Cluster.WorldSize
	ranksHere := world
	if !*virtual {
		ranksHere = 1
	}
	cal, err := ir.ParseBytes(*calBytes)
	if err != nil {
		return fail(fmt.Errorf("--calibrate-bytes %q: %w", *calBytes, err))
	}
	figs, err := gpu.Calibrate(dev, max(ranksHere, 2), cal, 5)
	if err != nil {
		return fail(err)
	}
	q, _, err := executor.Scale(p, *scale)
	if err != nil {
		return fail(err)
	}
	// A rehearsal's collectives are device copies, measured here; NCCL's
	// cross links one GPU cannot measure, so the plan's cluster times them.
	model := gpu.RehearsalModel(q, figs, bw, ranksHere, si)
	if !*virtual {
		model = gpu.CommModel(q, figs, si)
	}
	opt := gpu.Options{LinkBandwidth: bw, CheckSteps: *checkSteps, StandIn: si, Graph: *graph, Model: model,
		// Once the watchdog has fired, nothing stuck keeps the process:
		// it exits non-zero at the deadline.
		Exit: func() {
			fmt.Fprintf(stderr, "fsdpc-cuda: the watchdog aborted the communicators %v ago and the run has not ended: exiting\n", gpu.DefaultAbortDeadline)
			os.Exit(1)
		}}
	stopMemory := sampleMemory(&opt, dev, plat, stderr)
	defer stopMemory()
	if !*virtual {
		sess, comm, err := join(p, planPath, env, dev, *nccl, *timeout, plat)
		if err != nil {
			return fail(err)
		}
		defer sess.Close()
		defer comm.Close()
		// HSDP's shard and replicate groups and an intermediate
		// reshard_after_forward's groups are split from the world's.
		opt.Comm = gpu.Subgroups(comm)
	}
	counted := gpu.Counting(dev)
	b := gpu.New(counted, opt)
	rep, err := executor.Run(p, b, executor.Options{Scale: *scale, Steps: *steps, Timeout: *timeout, Local: local})
	if rep != nil {
		rep.Write(stdout)
	}
	if err != nil {
		return fail(err)
	}
	figs.Write(stdout)
	m := b.Measurement()
	m.Write(stdout)
	// Each device call takes the device's mutex and makes its context
	// current on the calling thread; the issue model charges one per plan
	// op.
	perStep := float64(counted.Calls()) / float64(*steps*ranksHere)
	fmt.Fprintf(stdout, "device calls    %.0f per rank and step (run average: set-up and checked steps included), for %d plan ops: %.2f per op\n",
		perStep, len(p.Ops), perStep/float64(len(p.Ops)))
	if *trace != "" && m.Timings != nil {
		if err := writeTrace(*trace, planPath, q, m.Timings); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "trace: %s\n", *trace)
	}
	return 0
}

// abortGrace is how long the watchdog's Abort waits for a call inside a
// communicator to leave before it leaves the abort to that call.
const abortGrace = time.Second

// join meets the other ranks (launch.Rendezvous: the plan must be the
// same everywhere) and makes the NCCL communicator from rank 0's id.
func join(p *schedule.Plan, planPath string, env launch.Env, dev gpu.Device, lib string, timeout time.Duration, plat platform) (*launch.Session, gpu.Comm, error) {
	hash, err := launch.HashFile(planPath)
	if err != nil {
		return nil, nil, err
	}
	cfg := launch.Config{Rank: env.Rank, World: env.World, Addr: env.Addr(), PlanHash: hash}
	if env.Rank == 0 {
		if cfg.ID, err = plat.uniqueID(lib); err != nil {
			return nil, nil, err
		}
	}
	sess, err := launch.Rendezvous(context.Background(), cfg)
	if err != nil {
		return nil, nil, err
	}
	comm, err := plat.comm(dev, lib, sess.ID, env.World, env.Rank, timeout)
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	// The watchdog aborts from its own goroutine: never under a call.
	return sess, gpu.Guard(comm, abortGrace), nil
}

// writeTrace writes the measured step next to where the simulator's would
// go, through the one atomic writer every fsdpc output uses, never over
// the plan it ran.
func writeTrace(path, planPath string, q *schedule.Plan, sim *schedule.Simulation) error {
	if err := atomicfile.NotAnInput(path, planPath); err != nil {
		return err // checked before the run too; the run took a while
	}
	var buf bytes.Buffer
	if err := schedule.WriteTrace(&buf, q, sim, schedule.TraceOptions{}); err != nil {
		return err
	}
	return atomicfile.Write(path, buf.Bytes())
}

// bench measures the device figures the acceptance checks read.
func bench(args []string, stdout, stderr io.Writer, plat platform) int {
	fl := flag.NewFlagSet("fsdpc-cuda bench", flag.ContinueOnError)
	fl.SetOutput(stderr)
	ranks := fl.Int("ranks", 8, "virtual ranks of the gather and the reduction")
	size := fl.String("bytes", "256MiB", "bytes per transfer")
	repeats := fl.Int("repeats", 9, "runs per figure (the median is reported)")
	device := fl.Int("device", 0, "the GPU ordinal")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	n, err := ir.ParseBytes(*size)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc-cuda bench: --bytes %q: %v\n", *size, err)
		return 2
	}
	dev, err := plat.open(*device)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc-cuda: %v\n", err)
		return 1
	}
	defer dev.Close()
	figs, err := gpu.Calibrate(dev, *ranks, n, *repeats)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc-cuda bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", dev.Name())
	figs.Write(stdout)
	return 0
}
