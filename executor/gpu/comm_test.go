package gpu_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
	"github.com/fsdpc/fsdpc/ir"
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
	return runCommWith(t, f, p, scale, timeout, commHooks{wrap: wrap})
}

// commHooks change runCommWith's ranks; nil ones change nothing.
type commHooks struct {
	wrap func(rank int, c gpu.Comm) gpu.Comm          // the world communicator
	dev  func(rank int, d *gputest.Device) gpu.Device // the device the backend uses
	opt  func(rank int, o *gpu.Options)
}

// runCommWith is runComm with hooks.
func runCommWith(t *testing.T, f *gputest.Fabric, p *schedule.Plan, scale int, timeout time.Duration, h commHooks) []rankRun {
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
			if h.wrap != nil {
				comm = h.wrap(r, comm)
			}
			defer comm.Close()
			o := gpu.Options{Comm: gpu.Subgroups(comm), CheckSteps: 1}
			if h.opt != nil {
				h.opt(r, &o)
			}
			var d gpu.Device = dev
			if h.dev != nil {
				d = h.dev(r, dev)
			}
			b := gpu.New(d, o)
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
	// Rank 0 waits out the timeout for its peer, as NCCL's would: short.
	runs := runComm(t, gputest.NewFabric(), p, 16, 5*time.Second, func(rank int, c gpu.Comm) gpu.Comm {
		if rank == 1 {
			return &asyncFailing{Comm: c, n: 2}
		}
		return c
	})
	if err := runs[1].err; err == nil || !strings.Contains(err.Error(), "watchdog: the communicator for shard(2) reports NCCL error 6") {
		t.Errorf("rank 1: %v, want the asynchronous error", err)
	}
}

// stuck is a communicator whose collectives never return until released:
// a process hung inside an enqueue, where no abort reaches. Its Splits
// are stuck too.
type stuck struct {
	gpu.Comm
	release chan struct{}
}

var errReleased = errors.New("released by the test")

func (c *stuck) AllGather(gpu.Ptr, gpu.Ptr, int64, gpu.Stream) error { <-c.release; return errReleased }
func (c *stuck) ReduceScatter(gpu.Ptr, gpu.Ptr, int64, ir.DType, schedule.ReduceOp, float64, gpu.Stream) error {
	<-c.release
	return errReleased
}
func (c *stuck) AllReduce(gpu.Ptr, int64, ir.DType, schedule.ReduceOp, float64, gpu.Stream) error {
	<-c.release
	return errReleased
}

func (c *stuck) Split(color, key int) (gpu.Comm, error) {
	sub, err := c.Comm.Split(color, key)
	if sub == nil {
		return nil, err
	}
	return &stuck{Comm: sub, release: c.release}, err
}

func (c *stuck) Poll() error { return c.Comm.(gpu.Poller).Poll() }

// TestCommPeerNeverArrives: one rank's process hangs inside the enqueue
// of its first collective, so its peers wait at their first collective's
// connection, with the world's communicator only and with HSDP's two.
// Every communicator is non-blocking (NCCL's config.blocking = 0) and
// guarded, as the worker makes them: each waiting peer's watchdog fires
// (its clock started before the enqueue, which has not returned), its
// Abort ends the polling call, and its run fails naming the collective;
// the hung rank's abort cannot reach its call, so the process deadline
// calls Exit. With blocking communicators the peers' Aborts are deferred
// behind calls that never return and they hang until their deadlines
// (issue 29, N2).
func TestCommPeerNeverArrives(t *testing.T) {
	for _, c := range []struct {
		name         string
		model        string
		layers, r, s int
		scale        int
	}{
		{"one communicator", "gpt2-124m", 2, 1, 2, 16},
		{"HSDP, two communicators", "llama3-8b", 1, 2, 2, 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plan(t, c.model, c.layers, c.r, c.s)
			world := p.Cluster.WorldSize
			hung := world - 1
			f := gputest.NewFabric()
			f.NonBlocking()
			release := make(chan struct{})
			var once sync.Once
			exits := make([]atomic.Bool, world)
			start := time.Now()
			// The deadline is long enough that a loaded machine's healthy
			// ranks end on their own well before it.
			const timeout, deadline = slowdown * 300 * time.Millisecond, slowdown * 2 * time.Second
			runs := runCommWith(t, f, p, c.scale, timeout, commHooks{wrap: func(rank int, comm gpu.Comm) gpu.Comm {
				if rank == hung {
					comm = &stuck{Comm: comm, release: release}
				}
				return gpu.Guard(comm, 20*time.Millisecond)
			}, opt: func(rank int, o *gpu.Options) {
				o.AbortDeadline = deadline
				o.Exit = func() {
					exits[rank].Store(true)
					once.Do(func() { close(release) }) // the process would be gone
				}
			}})
			for r, run := range runs {
				if run.err == nil || !strings.Contains(run.err.Error(), "watchdog: ") || !strings.Contains(run.err.Error(), "aborted the communicators") {
					t.Errorf("rank %d: %v, want the watchdog's failure", r, run.err)
				}
				if r != hung && exits[r].Load() {
					t.Errorf("rank %d: the process deadline ended it: its abort did not free its call", r)
				}
			}
			if !exits[hung].Load() {
				t.Errorf("rank %d (hung in its enqueue): the process deadline never called Exit", hung)
			}
			if !strings.Contains(fmt.Sprint(runs[hung].err), "the enqueue has not returned") {
				t.Errorf("rank %d: %v, want the watchdog to name the enqueue that did not return", hung, runs[hung].err)
			}
			if el := time.Since(start); el > slowdown*20*time.Second {
				t.Errorf("took %v", el)
			}
		})
	}
}

// queuedBehind is a rank's device and world communicator that, after the
// first all-gather, put a long kernel on its stream before the next
// Record there: compute that the collectives after it queue behind,
// outside any collective's own events.
type queuedBehind struct {
	gpu.Device
	spin    time.Duration
	mu      sync.Mutex
	stream  gpu.Stream // the first all-gather's; 0 until it is made
	records int        // Records on it since
}

func (q *queuedBehind) Record(e gpu.Event, s gpu.Stream) error {
	q.mu.Lock()
	spin := false
	if q.stream == s {
		q.records++
		spin = q.records == 2 // the first is the all-gather's own end
	}
	q.mu.Unlock()
	if spin {
		if err := q.Device.Spin(q.spin, s); err != nil {
			return err
		}
	}
	return q.Device.Record(e, s)
}

type armingComm struct {
	gpu.Comm
	q *queuedBehind
}

func (c *armingComm) AllGather(send, recv gpu.Ptr, bytes int64, s gpu.Stream) error {
	c.q.mu.Lock()
	if c.q.stream == 0 {
		c.q.stream = s
	}
	c.q.mu.Unlock()
	return c.Comm.AllGather(send, recv, bytes, s)
}

// TestCommWatchdogClockFromStart: collectives queued behind compute
// longer than the timeout do not fire the watchdog, whose clock starts
// when the stream reaches the collective, not at its enqueue (issue 29,
// N10): --timeout need not cover a whole queued step. Unchecked steps,
// so that the CPU runs ahead of the device.
func TestCommWatchdogClockFromStart(t *testing.T) {
	if testing.Short() {
		t.Skip("queues collectives behind seconds of compute")
	}
	p := plan(t, "gpt2-124m", 2, 1, 2)
	qs := make([]*queuedBehind, p.Cluster.WorldSize)
	for r := range qs {
		qs[r] = &queuedBehind{spin: slowdown * 5 * time.Second}
	}
	// Seconds of timeout: the ranks' CPUs may drift apart on a loaded
	// machine, and a collective waits for its peer's.
	runs := runCommWith(t, gputest.NewFabric(), p, 16, slowdown*2*time.Second, commHooks{
		wrap: func(rank int, c gpu.Comm) gpu.Comm { return &armingComm{Comm: c, q: qs[rank]} },
		dev: func(rank int, d *gputest.Device) gpu.Device {
			qs[rank].Device = d
			return qs[rank]
		},
		opt: func(_ int, o *gpu.Options) { o.CheckSteps = 0 },
	})
	for r, run := range runs {
		if run.err != nil {
			var sb strings.Builder
			if run.rep != nil {
				run.rep.Write(&sb)
			}
			t.Errorf("rank %d: %v\n%s", r, run.err, sb.String())
		}
		if qs[r].records < 2 {
			t.Errorf("rank %d: no kernel was queued before a collective", r)
		}
	}
}
