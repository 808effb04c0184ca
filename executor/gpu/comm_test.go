package gpu_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
	"github.com/fsdpc/fsdpc/schedule"
)

// rankRun is one process's outcome in runComm.
type rankRun struct {
	b    *gpu.Backend
	dev  *gputest.Device
	err  error
	rep  *executor.Report
	opts gpu.Options
}

// runComm runs p with one rank per "process" (goroutine), each on its own
// CPU device, with communicators from a fabric as NCCL's would be made:
// a world communicator per rank, and the sub-groups split from it. wrap,
// if not nil, wraps each rank's world communicator.
func runComm(t *testing.T, f *gputest.Fabric, p *schedule.Plan, scale int, timeout time.Duration, wrap func(rank int, c gpu.Comm) gpu.Comm) []rankRun {
	t.Helper()
	world := p.Cluster.WorldSize
	id := f.UniqueID()
	runs := make([]rankRun, world)
	var wg sync.WaitGroup
	for r := range world {
		dev := gputest.New(gputest.WithRaceDetection())
		t.Cleanup(func() { dev.Close() })
		runs[r].dev = dev
		wg.Go(func() {
			c, err := f.NewComm(dev, id, world, r)
			if err != nil {
				runs[r].err = err
				return
			}
			var comm gpu.Comm = c
			if wrap != nil {
				comm = wrap(r, comm)
			}
			defer comm.Close()
			b := gpu.New(dev, gpu.Options{Comm: gpu.Subgroups(comm), CheckSteps: 1})
			runs[r].b = b
			runs[r].rep, runs[r].err = executor.Run(p, b, executor.Options{Scale: scale, Steps: 2, Timeout: timeout, Local: []int{r}})
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(2 * time.Minute):
		t.Fatal("the ranks did not finish: a hang")
	}
	return runs
}

// TestCommZoo runs zoo plans with one rank per process over fabric
// communicators, HSDP's and an intermediate reshard_after_forward's
// sub-groups split from the world's: every rank's gathered parameters
// pass the data check, and no device sees an unordered access.
func TestCommZoo(t *testing.T) {
	cases := []struct {
		model        string
		layers, r, s int
		scale        int
		extra        []string
	}{
		{"gpt2-124m", 2, 1, 4, 16, nil},
		{"llama3-8b", 2, 2, 4, 64, nil},
		{"llama3-8b", 2, 1, 4, 64, []string{`policy:reshard_after_forward = 2`}},
		{"llama3-8b", 1, 2, 2, 64, []string{`policy:reduce_dtype = "fp16"`}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %dx%d %v", c.model, c.r, c.s, c.extra), func(t *testing.T) {
			p := plan(t, c.model, c.layers, c.r, c.s, c.extra...)
			for r, run := range runComm(t, gputest.NewFabric(), p, c.scale, 20*time.Second, nil) {
				if run.err != nil {
					var sb strings.Builder
					if run.rep != nil {
						run.rep.Write(&sb)
					}
					t.Fatalf("rank %d: %v\n%s", r, run.err, sb.String())
				}
				if errs := run.dev.Errors(); len(errs) > 0 {
					t.Fatalf("rank %d: the device saw %v", r, errs)
				}
				if gathered, _, _ := run.b.Checked(); gathered == 0 {
					t.Errorf("rank %d: the data check covered no gathered parameters", r)
				}
				if got := run.dev.Stats().Launches[gputest.KindCollective]; got == 0 {
					t.Errorf("rank %d: no collective went through the communicators", r)
				}
			}
		})
	}
}

// TestCommWatchdog: a collective that never finishes fails every rank
// within the timeout, naming the collective, instead of hanging; the
// communicators are aborted so that the streams drain.
func TestCommWatchdog(t *testing.T) {
	p := plan(t, "gpt2-124m", 2, 1, 4)
	f := gputest.NewFabric()
	f.Hang(3)
	start := time.Now()
	runs := runComm(t, f, p, 16, 300*time.Millisecond, nil)
	for r, run := range runs {
		var fe *executor.FailureError
		if !errors.As(run.err, &fe) {
			t.Fatalf("rank %d: %v, want a failure", r, run.err)
		}
		found := false
		for _, fl := range fe.Failures {
			// Either way the watchdog names the collective: it did not
			// finish in time, or, on a loaded machine, the device did not
			// answer the query about it in time.
			if fl.Kind == executor.Deadlock && strings.Contains(fl.What, "watchdog: ") && fl.Op >= 0 &&
				(strings.Contains(fl.What, "has not finished within the timeout of 300ms; aborted the communicators") ||
					strings.Contains(fl.What, "the device did not answer the watchdog's query; aborted the communicators")) {
				found = true
			}
		}
		if !found {
			t.Errorf("rank %d: no watchdog failure naming the collective:\n%v", r, run.err)
		}
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("the hung run took %v to fail", el)
	}
}

// TestCommWatchdogTwoHungCommunicators: with HSDP, collectives hang on
// the shard and the replicate communicators at once; ncclCommAbort of
// one blocks while the other's kernel hangs, so the watchdog must abort
// them together, not one after another.
func TestCommWatchdogTwoHungCommunicators(t *testing.T) {
	p := plan(t, "llama3-8b", 1, 2, 2)
	f := gputest.NewFabric()
	f.HangKind("AllReduce", 0)     // on the replicate communicator
	f.HangKind("ReduceScatter", 1) // on the shard communicator, while the other hangs
	runs := runComm(t, f, p, 64, 300*time.Millisecond, nil)
	for r, run := range runs {
		if run.err == nil || !strings.Contains(run.err.Error(), "aborted the communicators") {
			t.Errorf("rank %d: %v, want the watchdog's failure", r, run.err)
		}
	}
}

// asyncFailing reports an asynchronous error once it has enqueued n
// collectives, as ncclCommGetAsyncError does after a remote failure.
type asyncFailing struct {
	gpu.Comm
	mu sync.Mutex
	n  int
}

func (c *asyncFailing) AsyncError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n <= 0 {
		return errors.New("NCCL error 6 (remote process exited or there was a network error)")
	}
	return nil
}

func (c *asyncFailing) AllGather(send, recv gpu.Ptr, bytes int64, s gpu.Stream) error {
	c.mu.Lock()
	c.n--
	c.mu.Unlock()
	return c.Comm.AllGather(send, recv, bytes, s)
}

func TestCommAsyncError(t *testing.T) {
	p := plan(t, "gpt2-124m", 2, 1, 2)
	runs := runComm(t, gputest.NewFabric(), p, 16, 20*time.Second, func(rank int, c gpu.Comm) gpu.Comm {
		if rank == 1 {
			return &asyncFailing{Comm: c, n: 2}
		}
		return c
	})
	if err := runs[1].err; err == nil || !strings.Contains(err.Error(), "watchdog: the communicator for shard(2) reports NCCL error 6") {
		t.Errorf("rank 1: %v, want the asynchronous error", err)
	}
}
