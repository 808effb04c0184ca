package schedule

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// TraceOptions choose what a Chrome trace draws.
type TraceOptions struct {
	// Model is the cost model the simulation ran with (it prices the CPU's
	// launches); nil means NewModel(p).
	Model *Model
	// Ranks to draw, each as its own GPU process and CPU process; nil
	// means rank 0. The simulation is of one rank and FSDP is SPMD, so
	// every drawn rank shows the same timeline: drawing several lines the
	// trace up with a merged multi-rank PyTorch profiler trace.
	Ranks []int
	// MaxOps is the operations drawn, once per rank, before the trace
	// folds (FoldTrace); 0 means TraceOpBudget.
	MaxOps int
}

// The ids follow the PyTorch profiler (Kineto) so a simulated trace reads
// like a measured one and can be laid next to it in Perfetto:
//   - a GPU is a process whose pid is its device index, named "GPU N", with
//     one thread per CUDA stream named "stream T"; the compute stream is the
//     default stream, which the profiler shows as stream 7. Here the pid is
//     the global rank (the device index on a one-node run), so a merged
//     trace of several nodes keeps its ranks apart.
//   - the CPU is a separate process with the issuing thread; its pid is
//     cpuPidBase + rank, far from the small GPU pids.
//   - flows in category "ac2g" join a CPU launch to its GPU kernel, as the
//     profiler's do; flows in category "event" join an event's record to
//     every wait on it.
const cpuPidBase = 1 << 20

// Thread ids of the CPU process.
const (
	tidIssue = 1 // the thread that issues every operation
	tidHost  = 2 // the CPU running host-stream work (offloaded optimizer)
)

// StreamTid is the thread id a stream's track gets in a trace.
func StreamTid(s Stream) int {
	if s == StreamCompute {
		return 7
	}
	return 20 + int(s)
}

// CPUPid is the pid of a rank's CPU process in a trace.
func CPUPid(rank int) int { return cpuPidBase + rank }

// WriteTrace writes a simulated step as a Chrome trace (the JSON Trace Event
// Format that Perfetto and chrome://tracing open). Per drawn rank: the GPU's
// streams with a span per operation and a span per stall on an event; the
// CPU's issue thread with a span per launch; flows from each launch to its
// kernel and from each event's record to its waits; and device memory by
// buffer kind as counters on the GPU clock. Times are microseconds.
func WriteTrace(w io.Writer, p *Plan, sim *Simulation, opt TraceOptions) error {
	m := opt.Model
	if m == nil {
		m = NewModel(p)
	}
	ranks := opt.Ranks
	if len(ranks) == 0 {
		ranks = []int{0}
	}
	for _, r := range ranks {
		if r < 0 || r >= p.Cluster.WorldSize {
			return fmt.Errorf("rank %d is not in the plan's world of %d ranks", r, p.Cluster.WorldSize)
		}
	}
	fold := FoldTrace(p, len(ranks), opt.MaxOps)
	ranks = ranks[:fold.Ranks]
	clk := GPUClocks(p, m, sim)
	tw := &traceWriter{b: bufio.NewWriter(w), first: true}
	tw.enc = json.NewEncoder(tw.b)
	other := map[string]any{"model": p.Header.Model, "fsdpc": p.Header.FsdpcVersion,
		"source": "fsdpc simulation (one rank; SPMD ranks share its timeline)", "gpu": p.Cluster.GPU, "world_size": p.Cluster.WorldSize}
	if fold.Folded() {
		other["folded"] = fold.Note()
	}
	head, err := json.Marshal(other)
	if err != nil {
		return err
	}
	// Events are written one per line so a 100,000-op trace stays
	// streamable and diffable.
	fmt.Fprintf(tw.b, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"otherData\":%s,\"traceEvents\":[\n", head)
	for _, r := range ranks {
		tw.rank(p, sim, clk, r, fold)
	}
	if tw.err != nil {
		return tw.err
	}
	tw.b.WriteString("]}\n")
	return tw.b.Flush()
}

type traceWriter struct {
	b     *bufio.Writer
	enc   *json.Encoder
	first bool
	err   error
}

// traceEvent is one Trace Event Format record; empty fields are left out.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   *float64       `json:"ts,omitempty"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   int            `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

func (tw *traceWriter) emit(ev traceEvent) {
	if tw.err != nil {
		return
	}
	if !tw.first {
		tw.b.WriteString(",")
	}
	tw.first = false
	tw.err = tw.enc.Encode(ev)
}

func us(sec float64) *float64 {
	v := math.Round(sec*1e9) / 1e3 // nanosecond resolution, in µs
	return &v
}

func (tw *traceWriter) meta(name string, pid, tid int, args map[string]any) {
	tw.emit(traceEvent{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: args})
}

func (tw *traceWriter) span(name, cat string, pid, tid int, start, end float64, args map[string]any) {
	tw.emit(traceEvent{Name: name, Cat: cat, Ph: "X", Ts: us(start), Dur: us(end - start), Pid: pid, Tid: tid, Args: args})
}

// flow draws an arrow from the slice enclosing (fromPid, fromTid, from) to
// the slice enclosing (toPid, toTid, to).
func (tw *traceWriter) flow(name, cat string, id, fromPid, fromTid int, from float64, toPid, toTid int, to float64) {
	tw.emit(traceEvent{Name: name, Cat: cat, Ph: "s", Ts: us(from), Pid: fromPid, Tid: fromTid, ID: id, Bp: "e"})
	tw.emit(traceEvent{Name: name, Cat: cat, Ph: "f", Ts: us(to), Pid: toPid, Tid: toTid, ID: id, Bp: "e"})
}

func (tw *traceWriter) rank(p *Plan, sim *Simulation, clk *Clocks, rank int, fold TraceFold) {
	gpus := max(p.Cluster.GPUsPerNode, 1)
	gpu, cpu := rank, CPUPid(rank)
	tw.meta("process_name", gpu, 0, map[string]any{"name": fmt.Sprintf("GPU %d", rank%gpus)})
	tw.meta("process_labels", gpu, 0, map[string]any{"labels": fmt.Sprintf("rank %d of %d, node %d, %s (fsdpc simulation of %s)", rank, p.Cluster.WorldSize, rank/gpus, p.Cluster.GPU, p.Header.Model)})
	tw.meta("process_sort_index", gpu, 0, map[string]any{"sort_index": 2*rank + 1})
	for s := Stream(0); s < numStreams; s++ {
		if s == StreamHost {
			continue
		}
		tw.meta("thread_name", gpu, StreamTid(s), map[string]any{"name": fmt.Sprintf("stream %d %s", StreamTid(s), s)})
		tw.meta("thread_sort_index", gpu, StreamTid(s), map[string]any{"sort_index": int(s)})
	}
	tw.meta("process_name", cpu, 0, map[string]any{"name": fmt.Sprintf("CPU (rank %d)", rank)})
	tw.meta("process_sort_index", cpu, 0, map[string]any{"sort_index": 2 * rank})
	tw.meta("thread_name", cpu, tidIssue, map[string]any{"name": "thread 1 (issue)"})
	tw.meta("thread_name", cpu, tidHost, map[string]any{"name": "thread 2 (host work)"})

	// Flow ids are unique across ranks: rank-major, then op index.
	flowID := func(op, kind int) int { return 1 + (rank*len(p.Ops)+op)*2 + kind }
	where := func(s Stream) (int, int) {
		if s == StreamHost {
			return cpu, tidHost
		}
		return gpu, StreamTid(s)
	}
	t := &textWriter{p: p}
	var ready [numStreams]float64
	recordAt := make([]float64, p.Events)
	recordOn := make([]Stream, p.Events)
	// Folded operations join their track's run, drawn as one span when
	// the track next draws an operation (or at the end).
	var runs [numStreams]foldRun
	var issueRun foldRun
	for i := range p.Ops {
		o := &p.Ops[i]
		tm := sim.Ops[i]
		issue, issueEnd := clk.Issue[i], clk.IssueEnd[i]
		pid, tid := where(o.Stream)
		if o.Kind == OpAlloc || o.Kind == OpFree {
			continue
		}
		if fold.folds(o.Micro) {
			issueRun.add(issue, issueEnd, o.Micro)
			switch o.Kind {
			case OpRecord:
				recordAt[o.Event], recordOn[o.Event] = tm.Start, o.Stream
				runs[o.Stream].add(tm.Start, tm.Start, o.Micro)
			case OpWait:
				runs[o.Stream].add(math.Min(math.Max(ready[o.Stream], issue), tm.Start), tm.Start, o.Micro)
				ready[o.Stream] = tm.Start
			case OpSync:
			default:
				ready[o.Stream] = math.Max(ready[o.Stream], tm.End)
				runs[o.Stream].add(tm.Start, tm.End, o.Micro)
			}
			continue
		}
		tw.flush(&issueRun, cpu, tidIssue)
		if o.Kind != OpSync {
			tw.flush(&runs[o.Stream], pid, tid)
		}
		switch o.Kind {
		case OpRecord:
			recordAt[o.Event], recordOn[o.Event] = tm.Start, o.Stream
			tw.span("cudaEventRecord", "cuda_runtime", cpu, tidIssue, issue, issueEnd, nil)
			tw.span("record "+t.eventName(o.Event), "event", pid, tid, tm.Start, tm.Start, map[string]any{"event": o.Event, "op": i})
			continue
		case OpWait:
			reached := math.Max(ready[o.Stream], issue)
			tw.span("cudaStreamWaitEvent", "cuda_runtime", cpu, tidIssue, issue, issueEnd, nil)
			args := map[string]any{"event": o.Event, "op": i, "stall_us": *us(tm.Start - reached)}
			tw.span("wait "+t.eventName(o.Event), "wait", pid, tid, math.Min(reached, tm.Start), tm.Start, args)
			fp, ft := where(recordOn[o.Event])
			tw.flow("record → wait", "event", flowID(i, 0), fp, ft, recordAt[o.Event], pid, tid, tm.Start)
			ready[o.Stream] = tm.Start
			continue
		case OpSync:
			tw.span("sync "+t.eventName(o.Event), "wait", cpu, tidIssue, issue, issueEnd, map[string]any{"event": o.Event, "op": i, "stall_us": *us(issueEnd - issue)})
			fp, ft := where(recordOn[o.Event])
			tw.flow("record → sync", "event", flowID(i, 0), fp, ft, recordAt[o.Event], cpu, tidIssue, issueEnd)
			continue
		}
		ready[o.Stream] = math.Max(ready[o.Stream], tm.End)
		name := o.Kind.String()
		if o.Group >= 0 {
			name += " " + p.Groups[o.Group].Label()
		}
		args := map[string]any{"op": i, "detail": t.opText(o), "phase": o.Phase.String(), "micro": o.Micro}
		if o.Bytes > 0 {
			args["bytes"] = o.Bytes
		}
		if o.FLOPs > 0 {
			args["flops"] = o.FLOPs
		}
		cat := "kernel"
		if o.Stream == StreamHost {
			cat = "cpu_op"
		}
		tw.span(name, cat, pid, tid, tm.Start, tm.End, args)
		tw.span("launch "+name, "cuda_runtime", cpu, tidIssue, issue, issueEnd, map[string]any{"op": i})
		if o.Stream != StreamHost {
			tw.flow("ac2g", "ac2g", flowID(i, 1), cpu, tidIssue, issue, pid, tid, tm.Start)
		}
	}
	tw.flush(&issueRun, cpu, tidIssue)
	for s := Stream(0); s < numStreams; s++ {
		pid, tid := where(s)
		tw.flush(&runs[s], pid, tid)
	}
	kinds := map[BufferKind]bool{}
	for _, b := range p.Buffers {
		if b.Pool != PoolHost {
			kinds[b.Kind] = true
		}
	}
	foldedAt := func(j int) bool {
		return j < len(clk.Memory) && clk.Memory[j].Op >= 0 && fold.folds(p.Ops[clk.Memory[j].Op].Micro)
	}
	for j, pt := range clk.MemoryPoints() {
		if foldedAt(j) && foldedAt(j+1) {
			continue // only the last sample of a folded stretch: where the curve resumes
		}
		args := map[string]any{}
		for k := BufferKind(0); k < numBufferKinds; k++ {
			if kinds[k] {
				args[k.String()] = pt.Bytes[k]
			}
		}
		tw.emit(traceEvent{Name: "device memory by kind (bytes)", Ph: "C", Ts: us(pt.Time), Pid: gpu, Args: args})
		tw.emit(traceEvent{Name: "device memory allocated (bytes)", Ph: "C", Ts: us(pt.Time), Pid: gpu, Args: map[string]any{"total": pt.Total}})
	}
}
