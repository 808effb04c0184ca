package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/schedule"
)

// StandIn is what compute and the optimizer do on the device.
type StandIn uint8

const (
	// SpinStandIn occupies one SM for the op's modelled duration, so the
	// step's timing follows the plan while leaving the device to the
	// communication kernels.
	SpinStandIn StandIn = iota
	// BurnStandIn runs the op's FLOPs as fused multiply-adds over the
	// whole device: real load that competes with communication.
	BurnStandIn
)

// Options configure the backend.
type Options struct {
	// Comm returns this process's communicator for the groups of size
	// ranks of process group pg (NCCL; Subgroups makes them from the
	// world's); nil runs every rank in this process as virtual ranks
	// sharing the device. Open asks for every (pg, size) the plan's
	// collectives use, in the same order on every rank.
	Comm func(pg schedule.ProcessGroup, size int) (Comm, error)
	// LinkBandwidth paces virtual collectives to the cluster's links, in
	// bytes per second per rank (0: as fast as the device copies).
	LinkBandwidth float64
	// CheckSteps is how many steps, from the first, run with the data
	// check (synchronously: the timings of a checked step mean little).
	CheckSteps int
	StandIn    StandIn
	// Model times the stand-ins; nil uses the plan's cluster.
	Model *schedule.Model
	// Graph captures a step as a CUDA graph and replays it (graph.go).
	Graph bool
	// Memory samples device memory from Open to the end of Drain, every
	// MemoryInterval (default DefaultMemoryInterval); nil: not sampled,
	// and MemoryOff says why in the report (memory.go).
	Memory         MemorySampler
	MemoryInterval time.Duration
	MemoryOff      string
	// Exit, if not nil, is called AbortDeadline (default
	// DefaultAbortDeadline) after the watchdog fires unless the run has
	// ended by then (Close): the worker exits non-zero, whatever call is
	// still stuck (watchdog.go).
	Exit          func()
	AbortDeadline time.Duration
}

// Backend runs a program's ranks on a Device; it implements
// executor.Backend.
type Backend struct {
	dev  Device
	opt  Options
	t    executor.Topology
	plan *schedule.Plan
	mdl  *schedule.Model

	// calls counts the device calls (dev is it): the measured step's
	// calls per op price its issue (measure.go).
	calls *CountingDevice
	ranks []*rank // by rank; nil for ranks of other processes
	comms map[commKey]Comm
	// commOrder is comms' keys in the order Open made them.
	commOrder []commKey
	watch     watchdog

	virt     virtualColls
	failed   atomic.Bool
	failMu   sync.Mutex
	failures []executor.Failure
	dropped  int

	meas  *measurer
	check checkStats
	graph graphRun
	// enters[s] is when the first local rank's CPU began step s.
	enterMu sync.Mutex
	enters  map[int]time.Time
	// sampler samples device memory during the run (memory.go).
	sampler memSampling
}

// rank is one local rank's device state.
type rank struct {
	rank, shard, replica int
	step                 int       // the step the CPU issues
	streams              [5]Stream // the plan's device streams
	events               []Event   // the plan's events
	checkEv              Event     // the data check's synchronisation
	uploadEv             Event     // after an Upload: the other streams wait for it
	drainEv              [5]Event  // Drain's, one per stream, made at its first Drain
	pools                [5]pool
}

// New makes a backend on dev.
func New(dev Device, opt Options) *Backend {
	c := Counting(dev)
	return &Backend{dev: c, calls: c, opt: opt}
}

// The GPU backend's capabilities: a name, and stand-ins for compute.
var _ interface {
	executor.Backend
	executor.Named
	executor.StandInRunner
} = (*Backend)(nil)

// Name is the backend's name in reports.
func (b *Backend) Name() string { return "cuda (" + b.dev.Name() + ")" }

// StandIns: compute and the optimizer are stand-ins (doc.go).
func (b *Backend) StandIns() bool { return true }

// Open makes every local rank's streams and events.
func (b *Backend) Open(t executor.Topology) error {
	if t.Plan == nil {
		return errors.New("gpu backend: the topology has no plan")
	}
	b.t, b.plan = t, t.Plan
	b.mdl = b.opt.Model
	if b.mdl == nil {
		b.mdl = schedule.NewModel(t.Plan)
	}
	local := t.Local
	if local == nil {
		for r := 0; r < t.World(); r++ {
			local = append(local, r)
		}
	}
	if b.opt.Comm == nil && len(local) != t.World() {
		return fmt.Errorf("gpu backend: virtual ranks need every rank in this process, not %d of %d", len(local), t.World())
	}
	if b.opt.Comm != nil {
		if len(local) != 1 {
			return fmt.Errorf("gpu backend: with a communicator a process runs one rank, not %d", len(local))
		}
		b.comms = map[commKey]Comm{}
		for _, key := range commKeys(t.Plan) {
			c, err := b.opt.Comm(key.pg, key.size)
			if err != nil {
				return fmt.Errorf("gpu backend: communicator for %s(%d): %w", key.pg, key.size, err)
			}
			if c.Size() != key.size {
				return fmt.Errorf("gpu backend: the communicator for %s(%d) has %d ranks", key.pg, key.size, c.Size())
			}
			b.comms[key] = c
			b.commOrder = append(b.commOrder, key)
		}
	}
	least, greatest := b.dev.PriorityRange()
	var err error
	b.ranks = make([]*rank, t.World())
	for _, rk := range local {
		r := &rank{rank: rk, shard: rk % t.Shard, replica: rk / t.Shard, step: -1}
		for s := range r.streams {
			// FSDP2 makes its communication streams high priority, so
			// that their small kernels are not starved by compute.
			prio := least
			if schedule.Stream(s) != schedule.StreamCompute {
				prio = greatest
			}
			st, err := b.dev.NewStream(prio)
			if err != nil {
				return fmt.Errorf("gpu backend: rank %d, %s stream: %w", rk, schedule.Stream(s), err)
			}
			r.streams[s] = st
		}
		r.events = make([]Event, t.Events)
		for i := range r.events {
			ev, err := b.dev.NewSyncEvent()
			if err != nil {
				return fmt.Errorf("gpu backend: rank %d, event %d: %w", rk, i, err)
			}
			r.events[i] = ev
		}
		if r.checkEv, err = b.dev.NewSyncEvent(); err != nil {
			return fmt.Errorf("gpu backend: rank %d: %w", rk, err)
		}
		if r.uploadEv, err = b.dev.NewSyncEvent(); err != nil {
			return fmt.Errorf("gpu backend: rank %d: %w", rk, err)
		}
		b.ranks[rk] = r
	}
	if err := b.virt.init(b); err != nil {
		return err
	}
	b.enters = map[int]time.Time{}
	measured := t.Steps - 1
	if b.opt.Graph {
		if err := b.openGraph(local); err != nil {
			return err
		}
		measured = b.graph.capture - 1
	}
	m, err := newMeasurer(b, local, measured)
	if err != nil {
		return err
	}
	b.meas = m
	b.watch.start(b, local[0])
	b.sampler.start(b.opt.Memory, b.opt.MemoryInterval)
	return nil
}

// commKey names the communicators of a process group of one size.
type commKey struct {
	pg   schedule.ProcessGroup
	size int
}

// commKeys lists the communicators the plan's collectives use, in a
// canonical order, so that every rank makes them in the same order.
func commKeys(p *schedule.Plan) []commKey {
	seen := map[commKey]bool{}
	var keys []commKey
	for i := range p.Ops {
		k := commKey{p.Ops[i].PG, int(p.Ops[i].PGSize)}
		if k.size > 1 && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b commKey) int { return cmp.Or(cmp.Compare(a.pg, b.pg), cmp.Compare(a.size, b.size)) })
	return keys
}

// stream is the device stream of a plan stream; the host stream has none.
func (r *rank) stream(s schedule.Stream) Stream { return r.streams[s] }

func (b *Backend) Alloc(rk int, p schedule.Pool, bytes int64) (executor.Mem, error) {
	m, err := b.alloc(b.ranks[rk], p, bytes)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (b *Backend) Free(rk int, s schedule.Stream, m executor.Mem, op int) {
	b.release(b.ranks[rk], m.(*mem))
}

func (b *Backend) Record(rk int, s schedule.Stream, ev executor.Event, op int) {
	r := b.ranks[rk]
	if !b.enter(r, ev.Epoch-1) {
		return
	}
	b.must(rk, s, op, b.dev.Record(r.events[ev.ID], r.stream(s)))
}

func (b *Backend) Wait(rk int, s schedule.Stream, ev executor.Event, op int) {
	r := b.ranks[rk]
	if !b.enter(r, ev.Epoch-1) {
		return
	}
	b.must(rk, s, op, b.dev.Wait(r.stream(s), r.events[ev.ID]))
}

func (b *Backend) Synchronize(rk int, ev executor.Event, op int) error {
	r := b.ranks[rk]
	err := b.dev.SyncEvent(r.events[ev.ID])
	b.must(rk, schedule.StreamHost, op, err)
	return err
}

// must turns a device error into a failure of the run.
func (b *Backend) must(rk int, s schedule.Stream, op int, err error) bool {
	if err == nil {
		return true
	}
	b.Abort(executor.Failure{Kind: executor.Internal, Rank: rk, Stream: s, Op: op, What: b.describe(op) + ": " + err.Error()})
	return false
}

// failure is an internal failure of the run, not tied to a rank's op.
func failure(rk int, err error) executor.Failure {
	return executor.Failure{Kind: failureKind(err), Rank: max(rk, 0), Op: -1, What: err.Error()}
}

func (b *Backend) describe(op int) string {
	if b.t.Describe != nil && op >= 0 {
		return b.t.Describe(op)
	}
	return fmt.Sprintf("op %d", op)
}

const maxFailures = 64

func (b *Backend) Abort(f executor.Failure) {
	b.failMu.Lock()
	// Once the watchdog has aborted the communicators, every stream
	// that waited on them fails too: keep the first such failure, which
	// shows how the abort surfaced, and count the rest.
	consequence := b.watch.fired.Load() && len(b.failures) >= 2
	if len(b.failures) < maxFailures && !consequence {
		b.failures = append(b.failures, f)
	} else {
		b.dropped++
	}
	b.failMu.Unlock()
	if !b.failed.Swap(true) {
		b.virt.abort()
	}
}

func (b *Backend) Failed() bool { return b.failed.Load() }

func (b *Backend) Upload(rk int, m executor.Mem, data []byte) error {
	mm := m.(*mem)
	if int64(len(data)) != mm.bytes {
		return fmt.Errorf("gpu backend: uploading %d bytes into a block of %d", len(data), mm.bytes)
	}
	if len(data) == 0 {
		return nil
	}
	// The copy runs on the compute stream; every other stream of the rank
	// waits for it, so no reader depends on which stream the plan reads
	// the block from first.
	r := b.ranks[rk]
	on := r.streams[schedule.StreamCompute]
	if err := b.dev.Upload(mm.ptr, data, on); err != nil {
		return err
	}
	if err := b.dev.Record(r.uploadEv, on); err != nil {
		return err
	}
	for _, s := range r.streams {
		if s != on {
			if err := b.dev.Wait(s, r.uploadEv); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend) Download(rk int, m executor.Mem) ([]byte, error) {
	mm := m.(*mem)
	out := make([]byte, mm.bytes)
	if len(out) == 0 {
		return out, nil
	}
	return out, b.dev.Download(out, mm.ptr)
}

// Drain waits for every local stream, then reads the measurements.
func (b *Backend) Drain() error {
	if !b.graph.on { // with --graph, replays follow the measured step
		b.meas.callsEnd = b.calls.Calls()
	}
	if err := b.finishGraph(); err != nil {
		b.Abort(failure(-1, err))
	}
	for _, r := range b.ranks {
		if r == nil {
			continue
		}
		for s, st := range r.streams {
			// One event per stream for every Drain: a run drains once,
			// but a backend drained again must not leak events.
			var err error
			if r.drainEv[s] == 0 {
				r.drainEv[s], err = b.dev.NewSyncEvent()
			}
			ev := r.drainEv[s]
			if err == nil {
				err = b.dev.Record(ev, st)
			}
			if err == nil {
				err = b.dev.SyncEvent(ev)
			}
			if err != nil {
				b.Abort(executor.Failure{Kind: executor.Internal, Rank: r.rank, Stream: schedule.Stream(s), Op: -1, What: "draining the stream: " + err.Error()})
			}
		}
	}
	b.watch.final()
	b.sampler.stop()
	if !b.Failed() {
		if err := b.meas.collect(); err != nil {
			b.Abort(executor.Failure{Kind: executor.Internal, Op: -1, What: "reading the timing events: " + err.Error()})
		}
	}
	b.failMu.Lock()
	defer b.failMu.Unlock()
	if len(b.failures) > 0 {
		return &executor.FailureError{Failures: append([]executor.Failure(nil), b.failures...), Dropped: b.dropped}
	}
	return nil
}

func (b *Backend) Stats(rk int) executor.RankStats {
	var st executor.RankStats
	r := b.ranks[rk]
	if r == nil {
		return st
	}
	for p := range r.pools {
		st.Pools[p] = r.pools[p].stats
	}
	b.meas.fill(rk, &st)
	return st
}

// Close frees the communicators; the device's memory, streams and events
// go with the device.
func (b *Backend) Close() {
	b.watch.stop()
	b.sampler.stop()
	for _, key := range b.commOrder {
		b.comms[key].Close()
	}
	b.watch.disarm() // the run has ended: no process deadline
}
