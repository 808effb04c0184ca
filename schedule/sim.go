package schedule

import (
	"fmt"
	"math"
	"sort"
)

// Link sharing is solved to this relative tolerance: the simulation stops
// when no collective's duration changes by more than linkShareTolerance of
// itself from one round to the next. maxLinkShareRounds bounds the rounds;
// a plan that has not settled by then is an error, never a silent guess.
const (
	linkShareTolerance = 1e-6
	maxLinkShareRounds = 400
)

// Simulate runs the plan's exact program on the cost model: every stream
// executes its operations in order, an operation starts once its stream is
// free and the CPU has issued it, a wait holds its stream until the event's
// record is reached, and the CPU issues operations in program order, only
// blocking where the plan says so (a host sync, a host-side optimizer).
// Collectives that run at once on the same links share their bandwidth,
// solved as a fixed point (see linkShareTolerance). Compute that overlaps
// a collective runs slower by the model's Overlap factor, applied once the
// collectives have settled.
func Simulate(p *Plan, m *Model) (*Simulation, error) {
	sim, _, err := simulate(p, m, linkShareTolerance, maxLinkShareRounds)
	return sim, err
}

// simulate is Simulate with the tolerance and the bound on the rounds of
// link sharing as arguments; it also says how many rounds it ran.
func simulate(p *Plan, m *Model, tolerance float64, maxRounds int) (*Simulation, int, error) {
	// The collectives that use a link, and for each (by its place in
	// shared, not its op's index: a plan of millions of operations has
	// far fewer collectives) the link, the part of its time that does not
	// share it and the next round's duration.
	base := make([]float64, len(p.Ops))
	var shared []int
	var latency []float64 // the part of a collective that does not share links
	var link []uint8      // 0 none, 1 intra-node, 2 inter-node
	for i := range p.Ops {
		o := &p.Ops[i]
		base[i] = m.duration(p, o)
		switch o.Kind {
		case OpAllGather, OpReduceScatter, OpAllReduce:
			if o.PGSize > 1 {
				l, lat := m.linkClass(o, stride(p, o.PG))
				shared, link, latency = append(shared, i), append(link, uint8(l)), append(latency, lat)
			}
		}
	}
	// Collectives that run at once on the same links share their
	// bandwidth: each one's transfer stretches by the mean number of
	// collectives on its link while it runs. That changes when they run,
	// which changes the overlaps: iterate, damped, to the fixed point. A
	// round whose overlaps leave every duration as it was ends the loop
	// (in particular, a plan whose collectives never overlap runs once).
	r := newRunner(p, m)
	durations := append([]float64(nil), base...)
	sim := r.run(durations)
	next := make([]float64, len(shared))
	rounds := 0
	step, lastChange := 1.0, math.Inf(1)
	var byLink [3][]interval // reused by every round
	for {
		for l := range byLink {
			byLink[l] = byLink[l][:0]
		}
		for j, i := range shared {
			if t := sim.Ops[i]; t.End > t.Start {
				byLink[link[j]] = append(byLink[link[j]], interval{t.Start, t.End})
			}
		}
		var longest [3]float64
		for l := range byLink {
			sort.Slice(byLink[l], func(a, b int) bool { return byLink[l][a].start < byLink[l][b].start })
			for _, iv := range byLink[l] {
				longest[l] = max(longest[l], iv.end-iv.start)
			}
		}
		change := 0.0 // the largest relative change a round would make
		for j, i := range shared {
			next[j] = durations[i]
			t := sim.Ops[i]
			d := t.End - t.Start
			if d <= 0 {
				continue
			}
			share := sumOverlap(byLink[link[j]], longest[link[j]], t.Start, t.End) / d
			share = max(share, 1)
			next[j] = latency[j] + (base[i]-latency[j])*share
			if next[j] != durations[i] {
				change = max(change, math.Abs(next[j]-durations[i])/durations[i])
			}
		}
		if math.IsNaN(change) || math.IsInf(change, 0) {
			return nil, rounds, fmt.Errorf("a collective's duration is not a finite number (a link with no bandwidth?); check the cluster's link figures")
		}
		if change <= tolerance {
			break
		}
		if rounds == maxRounds {
			return nil, rounds, fmt.Errorf("internal error: link sharing did not settle within %d rounds (collective durations still change by %.2g, tolerance %.0g); please report the model", maxRounds, change, tolerance)
		}
		rounds++
		// Take the whole step while the changes shrink; halve it whenever
		// they grow, so alternating overlaps settle instead of swinging.
		if change >= lastChange {
			step /= 2
		}
		lastChange = change
		for j, i := range shared {
			durations[i] += step * (next[j] - durations[i])
		}
		sim = r.run(durations)
	}
	// Slow compute by the share of its interval that overlaps collectives.
	// (durations, no longer needed, takes the adjusted ones.)
	comm := sim.collectiveIntervals(p)
	slowed := false
	for i := range p.Ops {
		if k := p.Ops[i].Kind; k == OpForward || k == OpBackward {
			t := sim.Ops[i]
			if d := t.End - t.Start; d > 0 {
				a := base[i] * (1 + m.Cal.Overlap*overlap(comm, t.Start, t.End)/d)
				slowed = slowed || a != durations[i]
				durations[i] = a
			}
		}
	}
	if slowed {
		sim = r.run(durations)
	}
	for i := range p.Ops {
		if k := p.Ops[i].Kind; k == OpForward || k == OpBackward || k == OpOptimizer && p.Ops[i].Stream == StreamCompute {
			sim.ComputeTime += base[i]
		}
	}
	sim.LinkShareRounds = rounds
	sim.Breakdown = sim.breakdown(p, base)
	sim.notePeaks(p)
	return sim, rounds, nil
}

// sumOverlap adds up, over intervals sorted by start (not merged), how much
// of [a, b) each covers. No interval is longer than longest, so those that
// start before a-longest cannot reach a: the scan starts after them, which
// keeps the whole pass linear in the number of collectives.
func sumOverlap(ivs []interval, longest, a, b float64) float64 {
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i].start >= a-longest })
	total := 0.0
	for ; i < len(ivs) && ivs[i].start < b; i++ {
		if iv := ivs[i]; iv.end > a {
			total += min(b, iv.end) - max(a, iv.start)
		}
	}
	return total
}

// Timing is when an operation ran, in seconds from the start of the step.
type Timing struct{ Start, End float64 }

// Simulation is the predicted execution of one step on one rank.
type Simulation struct {
	StepTime float64
	// ComputeTime is the step's compute alone, as if communication were
	// free.
	ComputeTime float64
	// ExposedComm is how long the compute stream stood waiting for
	// communication (all-gathers, reduce-scatters, all-reduces, copies on
	// other streams), in total and per group.
	ExposedComm    float64
	ExposedByGroup []float64
	// CPUTime is when the CPU finished issuing the step.
	CPUTime float64
	// Breakdown splits StepTime into parts that add up to it.
	Breakdown StepBreakdown
	// LinkShareRounds is how many rounds link sharing took to settle.
	LinkShareRounds int
	Ops             []Timing
	// Peak device memory allocated (all device pools together), where in
	// the program it happens, each pool's own peak, and what the caching
	// allocator reserves at most (allocator.go): at least the pools'
	// peaks, since blocks freed in one pool do not serve another, plus
	// its segments' rounding and fragmentation.
	PeakAllocated int64
	PeakOp        int
	PeakByPool    [numPools]int64
	PeakReserved  int64
	// AllocRetries counts the times the caching allocator reached the
	// budget and freed its cache to retry (PyTorch's num_alloc_retries in
	// torch.cuda.memory_stats): each one synchronises the device.
	AllocRetries int
	// waitingForCPU and computeEnd feed Breakdown: how long the compute
	// stream stood idle until the CPU issued its next operation, and when
	// its last operation ended.
	waitingForCPU, computeEnd float64
}

// OpDuration is an operation's time on the model alone, in seconds: what
// it takes with nothing running beside it (no link sharing, no slowdown
// from overlapping collectives).
func (m *Model) OpDuration(p *Plan, o *Op) float64 { return m.duration(p, o) }

func (m *Model) duration(p *Plan, o *Op) float64 {
	switch o.Kind {
	case OpForward, OpBackward:
		return m.Kernel(o, p.OpGEMMs(o), p.OpElemRecompute(o))
	case OpOptimizer:
		if o.Stream == StreamHost {
			return float64(o.Bytes) / m.Cal.HostOptimizer
		}
		return float64(o.Bytes)/(m.HW.HBMBandwidth*m.Cal.MemoryEfficiency) + m.Cal.Launch
	case OpCopyIn, OpCopyOut, OpReshard, OpReduceCopyIn, OpDivide, OpCastGrad, OpAccumulate:
		return m.Copy(o.Bytes)
	case OpH2D, OpD2H:
		return m.Host(o.Bytes)
	case OpAllGather:
		return m.AllGather(o.Bytes, int(o.PGSize), stride(p, o.PG))
	case OpReduceScatter:
		return m.ReduceScatter(o.Bytes, int(o.PGSize), stride(p, o.PG))
	case OpAllReduce:
		return m.AllReduce(o.Bytes, int(o.PGSize), stride(p, o.PG))
	}
	return 0
}

// stride is the rank distance between members of a process group: HSDP's
// replicate group takes one rank from each shard group.
func stride(p *Plan, pg ProcessGroup) int {
	if pg == PGReplicate {
		return p.Cluster.Shard
	}
	return 1
}

func (m *Model) issueCost(k OpKind) float64 {
	switch k {
	case OpAlloc, OpFree, OpRecord, OpWait, OpSync:
		return m.Cal.IssueOther
	}
	return m.Cal.IssueKernel
}

// simOp is what run reads of an operation: the rounds of link sharing
// replay the program many times (15 on llama3.1-405b at 16,384 GPUs), and
// streaming 12 bytes per operation instead of a whole Op keeps the replay
// in cache (and a plan of 3.28 M operations 131 MB smaller than Op's). The
// CPU's cost of issuing an op depends on its kind alone (issueCost), so
// the runner looks it up per kind.
type simOp struct {
	event      int32 // 32 bits hold any plan's indices (planner.MaxOpsPerRank is 2²²)
	group      int32
	kind       OpKind
	stream     Stream
	pg         ProcessGroup
	collective bool // a collective over more than one rank
}

// runner replays one plan's program with given durations. Its timings,
// event times and per-group stalls are reused by every replay: each
// replay overwrites the last, and the simulation keeps the final one.
type runner struct {
	ops        []simOp
	issue      [numOpKinds]float64 // issueCost by kind
	sim        *Simulation
	eventTime  []float64
	eventGroup []int
}

func newRunner(p *Plan, m *Model) *runner {
	r := &runner{
		ops:        make([]simOp, len(p.Ops)),
		sim:        &Simulation{Ops: make([]Timing, len(p.Ops)), ExposedByGroup: make([]float64, len(p.Groups))},
		eventTime:  make([]float64, p.Events),
		eventGroup: make([]int, p.Events),
	}
	for k := range r.issue {
		r.issue[k] = m.issueCost(OpKind(k))
	}
	for i := range p.Ops {
		o := &p.Ops[i]
		r.ops[i] = simOp{event: int32(o.Event), group: int32(o.Group), kind: o.Kind, stream: o.Stream, pg: o.PG,
			collective: (o.Kind == OpAllGather || o.Kind == OpReduceScatter || o.Kind == OpAllReduce) && o.PGSize > 1}
	}
	return r
}

// run replays the program with the given durations and returns the
// runner's simulation, which the next run overwrites.
func (r *runner) run(dur []float64) *Simulation {
	sim := r.sim
	*sim = Simulation{Ops: sim.Ops, ExposedByGroup: sim.ExposedByGroup}
	clear(sim.ExposedByGroup)
	clear(r.eventTime)
	clear(r.eventGroup)
	eventTime, eventGroup, ops, issue := r.eventTime, r.eventGroup, r.ops, &r.issue
	var ready [numStreams]float64
	var lastGroup [numStreams]int
	for i := range lastGroup {
		lastGroup[i] = -1
	}
	// NCCL runs a communicator's operations one at a time, in the order
	// they were launched, whatever streams they were launched on: each
	// launch makes its stream wait for the communicator's previous kernel
	// (NCCL's per-communicator device stream, enqueue.cc). FSDP2 gathers
	// and reduce-scatters over one process group, so a backward prefetch
	// queues behind the reduce-scatter launched before it instead of
	// sharing the link with it. One communicator per process group.
	var commFree [numProcessGroups]float64
	cpu := 0.0
	timings := sim.Ops[:len(ops)]
	for i := range ops {
		o := &ops[i]
		issued := cpu
		cpu += issue[o.kind]
		s := o.stream
		start := max(ready[s], issued)
		if s == StreamCompute && issued > ready[s] && o.kind != OpAlloc && o.kind != OpFree && o.kind != OpRecord && o.kind != OpSync {
			// The compute stream stands idle until the CPU issues this.
			sim.waitingForCPU += issued - ready[s]
		}
		switch o.kind {
		case OpWait:
			t := eventTime[o.event]
			if s == StreamCompute && t > start {
				stall := t - start
				sim.ExposedComm += stall
				if g := eventGroup[o.event]; g >= 0 {
					sim.ExposedByGroup[g] += stall
				}
			}
			start = max(start, t)
			ready[s] = start
			timings[i] = Timing{start, start}
			continue
		case OpRecord:
			eventTime[o.event] = ready[s]
			eventGroup[o.event] = lastGroup[s]
			timings[i] = Timing{ready[s], ready[s]}
			continue
		case OpSync:
			cpu = max(cpu, eventTime[o.event])
			timings[i] = Timing{issued, cpu}
			continue
		case OpAlloc, OpFree:
			// The caching allocator acts when the CPU asks; what it holds
			// depends on the program order alone (notePeaks).
			timings[i] = Timing{issued, issued}
			continue
		}
		if o.collective {
			start = max(start, commFree[o.pg])
		}
		end := start + dur[i]
		if o.collective {
			commFree[o.pg] = end
		}
		ready[s] = end
		if o.group >= 0 {
			lastGroup[s] = int(o.group)
		}
		if s == StreamHost {
			cpu = max(cpu, end) // the CPU itself runs it
		}
		timings[i] = Timing{start, end}
	}
	sim.CPUTime = cpu
	sim.computeEnd = ready[StreamCompute]
	sim.StepTime = cpu
	for _, r := range ready {
		sim.StepTime = max(sim.StepTime, r)
	}
	return sim
}

// notePeaks finds the peak memory: allocated per pool and on the device
// in all, where in the program it is reached first, and what the caching
// allocator reserves. Allocations and frees happen in program order
// whatever the durations, so one pass serves every round of link sharing.
func (s *Simulation) notePeaks(p *Plan) {
	var live [numPools]int64
	var device int64
	alloc := newCachingAllocator(p.Train.ExpandableSegments, p.Cluster.MemoryBudget)
	for i, b := range p.Buffers {
		if b.Persistent {
			live[b.Pool] += b.Bytes
			if b.Pool != PoolHost {
				device += b.Bytes
				alloc.alloc(b.Pool, i, b.Bytes)
			}
		}
	}
	s.PeakByPool = live
	s.PeakAllocated, s.PeakOp = 0, 0
	if device > 0 {
		s.PeakAllocated, s.PeakOp = device, -1
	}
	for i := range p.Ops {
		o := &p.Ops[i]
		if o.Kind != OpAlloc && o.Kind != OpFree {
			continue
		}
		b := &p.Buffers[o.Buffer]
		delta := b.Bytes
		if o.Kind == OpFree {
			delta = -delta
		}
		live[b.Pool] += delta
		s.PeakByPool[b.Pool] = max(s.PeakByPool[b.Pool], live[b.Pool])
		if b.Pool != PoolHost {
			if o.Kind == OpAlloc {
				alloc.alloc(b.Pool, int(o.Buffer), b.Bytes)
			} else {
				alloc.release(b.Pool, int(o.Buffer))
			}
			device += delta
			if device > s.PeakAllocated {
				s.PeakAllocated, s.PeakOp = device, i
			}
		}
	}
	s.PeakReserved = alloc.peak
	s.AllocRetries = alloc.retries
}

type interval struct{ start, end float64 }

func (s *Simulation) collectiveIntervals(p *Plan) []interval {
	var out []interval
	for i := range p.Ops {
		switch p.Ops[i].Kind {
		case OpAllGather, OpReduceScatter, OpAllReduce:
			if t := s.Ops[i]; t.End > t.Start {
				out = append(out, interval{t.Start, t.End})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	// Merge overlapping intervals so overlap() counts time once.
	var merged []interval
	for _, iv := range out {
		if n := len(merged); n > 0 && iv.start <= merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, iv.end)
			continue
		}
		merged = append(merged, iv)
	}
	return merged
}

// overlap is how much of [a, b) the merged intervals cover.
func overlap(ivs []interval, a, b float64) float64 {
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i].end > a })
	total := 0.0
	for ; i < len(ivs) && ivs[i].start < b; i++ {
		total += min(b, ivs[i].end) - max(a, ivs[i].start)
	}
	return max(total, 0)
}

// LiveAt lists the buffers live just after operation op, largest first: the
// breakdown a user needs at the peak.
func LiveAt(p *Plan, op int) []int {
	live := map[int]bool{}
	for i, b := range p.Buffers {
		if b.Persistent {
			live[i] = true
		}
	}
	for i := 0; i <= op && i < len(p.Ops); i++ {
		o := &p.Ops[i]
		switch o.Kind {
		case OpAlloc:
			live[int(o.Buffer)] = true
		case OpFree:
			delete(live, int(o.Buffer))
		}
	}
	var out []int
	for b := range live {
		if p.Buffers[b].Pool != PoolHost {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		bi, bj := p.Buffers[out[i]], p.Buffers[out[j]]
		if bi.Bytes != bj.Bytes {
			return bi.Bytes > bj.Bytes
		}
		return out[i] < out[j]
	})
	return out
}

// Prediction extracts what a plan stores of a simulation.
func (s *Simulation) Prediction() Prediction {
	return Prediction{StepTime: s.StepTime, ComputeTime: s.ComputeTime, ExposedComm: s.ExposedComm, CPUTime: s.CPUTime,
		ExposedByGroup: append([]float64(nil), s.ExposedByGroup...), PeakAllocated: s.PeakAllocated, PeakOp: s.PeakOp,
		PeakByPool: append([]int64(nil), s.PeakByPool[:]...), PeakReserved: s.PeakReserved}
}
