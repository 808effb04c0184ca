package executor

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsdpc/fsdpc/schedule"
)

// Host is the host backend: every rank in this process, each of its five
// device streams a goroutine that executes what is launched on it in
// order, the host stream the rank's CPU itself. Events are one-shot per
// epoch and a wait blocks its stream until the record has executed.
// Buffers come from per-pool caching allocators (a freed block goes back
// to its pool as the CPU frees it and may serve the next allocation of the
// same size at once); memory is filled with a poison pattern when it is
// created and when its free executes, so a read of dead memory shows up in
// the numbers. Collectives run for real across the ranks, the reductions
// in rank order. Deadlocks are detected by a watchdog: no progress for the
// timeout while some stream waits.
//
// With Topology.HazardCheck, every access of a block is also checked
// against a vector clock per stream (a happens-before race detector in the
// style of FastTrack): an access that no chain of stream order and events
// orders after a conflicting earlier access is reported, whatever order the
// goroutines happened to run in.
type Host struct {
	t     Topology
	ranks []*hostRank
	start time.Time

	abort     chan struct{}
	abortOnce sync.Once
	failed    atomic.Bool
	failMu    sync.Mutex
	failures  []Failure
	dropped   int

	commMu sync.Mutex
	comms  map[instKey]*collInst

	progress atomic.Int64 // items issued or completed, for the watchdog
	executed atomic.Int64 // items completed
	running  atomic.Int32 // kernels executing now
	wdStop   chan struct{}
	wdDone   chan struct{}
	closed   bool
}

// NewHost returns a host backend; Open starts it.
func NewHost() *Host { return &Host{} }

const maxFailures = 64

type vclock [numStreams]uint32

func (v *vclock) join(o *vclock) {
	for i, x := range o {
		if x > v[i] {
			v[i] = x
		}
	}
}

type hostRank struct {
	h       *Host
	rank    int
	shard   int // index in the shard group
	streams [numStreams]*hostStream
	events  []hostEvent
	pools   [numPools]hostPool
	seq     map[Communicator]int // collectives issued per communicator
}

type hostPool struct {
	free  map[int64][]*block
	stats PoolStats
}

// block is one allocation's memory; blocks are reused across buffers.
type block struct {
	data []byte
	pool schedule.Pool
	live bool
	// Access history for the hazard check, and the collective freshness
	// check: writeSeq counts writes, consumed the writeSeq each collective
	// kind last consumed.
	mu       sync.Mutex
	w        access
	wStream  int8
	r        [numStreams]access
	writeSeq int64
	consumed [3]int64
}

// access is one earlier access: its stream's clock, the op and step.
type access struct {
	clock uint32
	op    int32
	step  int32
}

func (b *block) Bytes() int64 { return int64(len(b.data)) }

type itemKind uint8

const (
	itemKernel itemKind = iota
	itemRecord
	itemWait
	itemFree
	itemStop
)

// item is one thing a stream executes.
type item struct {
	kind itemKind
	op   int32
	step int32
	pos  int32
	k    *Kernel
	mem  [MaxArgs]*block // the kernel's operands; mem[0] is a free's block
	buf  [MaxArgs]int32  // the plan's buffers they stand for, for reports
	ev   Event
	cpu  vclock // the CPU's clock when it issued the item
	coll instKey
}

type hostStream struct {
	r  *hostRank
	s  schedule.Stream
	mu sync.Mutex
	// q is a ring of n items from head; the CPU blocks while it is full at
	// maxQueue, as a CUDA launch queue does.
	q       []item
	head, n int
	full    bool // the CPU waits for room
	notify  chan struct{}
	room    chan struct{}
	done    chan struct{}
	vc      vclock

	busy    time.Duration
	waited  time.Duration // in collectives, for the other ranks
	phases  [][numPhases][2]int64
	blocked atomic.Pointer[blockInfo]
}

// blockInfo says what a stream (or CPU) is blocked on, for deadlock
// reports.
type blockInfo struct {
	op, step int
	what     func() string
}

type hostEvent struct {
	mu    sync.Mutex
	epoch int
	ch    chan struct{} // closed at the next record, made by a waiter
	vcs   [4]struct {
		epoch int
		vc    vclock
	}
}

// Open starts the ranks' streams and the deadlock watchdog.
func (h *Host) Open(t Topology) error {
	if t.Replicate < 1 || t.Shard < 1 {
		return fmt.Errorf("host backend: bad mesh %d × %d", t.Replicate, t.Shard)
	}
	if t.Local != nil && len(t.Local) != t.World() {
		return fmt.Errorf("host backend: it runs every rank of a plan in one process, not %d of %d", len(t.Local), t.World())
	}
	if t.Timeout <= 0 {
		t.Timeout = 10 * time.Second
	}
	h.t = t
	h.start = time.Now()
	h.abort = make(chan struct{})
	h.comms = map[instKey]*collInst{}
	h.wdStop, h.wdDone = make(chan struct{}), make(chan struct{})
	for rank := 0; rank < t.World(); rank++ {
		r := &hostRank{h: h, rank: rank, shard: rank % t.Shard, events: make([]hostEvent, t.Events), seq: map[Communicator]int{}}
		for p := range r.pools {
			r.pools[p].free = map[int64][]*block{}
		}
		for s := range r.streams {
			st := &hostStream{r: r, s: schedule.Stream(s), notify: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
			st.phases = make([][numPhases][2]int64, max(t.Steps, 1))
			for i := range st.phases {
				for ph := range st.phases[i] {
					st.phases[i][ph] = [2]int64{math.MaxInt64, 0}
				}
			}
			r.streams[s] = st
			if schedule.Stream(s) != schedule.StreamHost {
				go st.loop()
			}
		}
		h.ranks = append(h.ranks, r)
	}
	go h.watchdog()
	return nil
}

// --- failures ----------------------------------------------------------------

func (h *Host) fail(f Failure) {
	h.failMu.Lock()
	if len(h.failures) < maxFailures {
		h.failures = append(h.failures, f)
	} else {
		h.dropped++
	}
	h.failMu.Unlock()
	h.failed.Store(true)
	h.abortOnce.Do(func() { close(h.abort) })
}

// Abort records a failure the driver found.
func (h *Host) Abort(f Failure) { h.fail(f) }

// Failed reports whether the run has failed.
func (h *Host) Failed() bool { return h.failed.Load() }

func (s *hostStream) fail(kind FailureKind, it *item, format string, args ...any) {
	s.r.h.fail(Failure{Kind: kind, Rank: s.r.rank, Stream: s.s, Step: int(it.step), Op: int(it.op), What: fmt.Sprintf(format, args...)})
}

// --- memory --------------------------------------------------------------------

// Alloc takes a block from the rank's pool.
func (h *Host) Alloc(rank int, pool schedule.Pool, bytes int64) (Mem, error) {
	if bytes < 0 || int(pool) >= numPools {
		return nil, fmt.Errorf("host backend: bad allocation of %d bytes in pool %d", bytes, pool)
	}
	r := h.ranks[rank]
	p := &r.pools[pool]
	var b *block
	if l := p.free[bytes]; len(l) > 0 {
		b = l[len(l)-1]
		l[len(l)-1] = nil
		p.free[bytes] = l[:len(l)-1]
	} else {
		b = &block{data: make([]byte, bytes), pool: pool, consumed: [3]int64{-1, -1, -1}}
		prefault(b.data)
		fillPoison(b.data)
		p.stats.Reserved += bytes
	}
	b.live = true
	p.stats.Live += bytes
	p.stats.Peak = max(p.stats.Peak, p.stats.Live)
	p.stats.Allocs++
	return b, nil
}

// Free returns a block to its pool now; its memory is poisoned when s
// reaches the free.
func (h *Host) Free(rank int, s schedule.Stream, m Mem, op int) {
	b := m.(*block)
	r := h.ranks[rank]
	if !b.live {
		h.fail(Failure{Kind: Protocol, Rank: rank, Stream: s, Op: op, What: "frees a block that is not allocated"})
		return
	}
	b.live = false
	p := &r.pools[b.pool]
	p.stats.Live -= b.Bytes()
	p.free[b.Bytes()] = append(p.free[b.Bytes()], b)
	r.push(s, item{kind: itemFree, op: int32(op), mem: [MaxArgs]*block{b}})
}

func (h *Host) Upload(rank int, m Mem, data []byte) error {
	b := m.(*block)
	if len(data) != len(b.data) {
		return fmt.Errorf("host backend: upload of %d bytes into a block of %d", len(data), len(b.data))
	}
	copy(b.data, data)
	b.writeSeq++
	return nil
}

func (h *Host) Download(rank int, m Mem) ([]byte, error) {
	return append([]byte(nil), m.(*block).data...), nil
}

// --- issue -----------------------------------------------------------------------

// maxQueue bounds the ops pending on a stream. The CPU blocking on a full
// stream cannot deadlock a well-formed program: the earliest pending op of
// all ranks has been issued everywhere and depends only on earlier ops.
const maxQueue = 1024

func (r *hostRank) push(s schedule.Stream, it item) {
	h := r.h
	h.progress.Add(1)
	st := r.streams[s]
	cpu := r.streams[schedule.StreamHost]
	it.cpu = cpu.vc
	if s == schedule.StreamHost {
		st.exec(&it) // the CPU runs it
		return
	}
	st.mu.Lock()
	for st.n == maxQueue {
		st.full = true
		st.mu.Unlock()
		select {
		case <-st.room:
		case <-h.abort:
			return
		}
		st.mu.Lock()
	}
	if st.n == len(st.q) {
		q := make([]item, max(2*len(st.q), 16))
		for i := 0; i < st.n; i++ {
			q[i] = st.q[(st.head+i)%len(st.q)]
		}
		st.q, st.head = q, 0
	}
	st.q[(st.head+st.n)%len(st.q)] = it
	st.n++
	st.mu.Unlock()
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

func (h *Host) Record(rank int, s schedule.Stream, ev Event, op int) {
	h.ranks[rank].push(s, item{kind: itemRecord, op: int32(op), step: int32(ev.Epoch - 1), ev: ev})
}

func (h *Host) Wait(rank int, s schedule.Stream, ev Event, op int) {
	h.ranks[rank].push(s, item{kind: itemWait, op: int32(op), step: int32(ev.Epoch - 1), ev: ev})
}

// Launch enqueues a kernel; a collective gets its sequence number on its
// communicator now, in issue order, as NCCL orders them.
func (h *Host) Launch(rank int, s schedule.Stream, k *Kernel, a Args) {
	r := h.ranks[rank]
	it := item{kind: itemKernel, op: int32(k.Op), step: int32(a.Step), k: k, buf: a.Buf}
	for i, m := range a.Mem {
		if m != nil {
			it.mem[i] = m.(*block)
		}
	}
	switch k.Kind {
	case schedule.OpAllGather, schedule.OpReduceScatter, schedule.OpAllReduce:
		key, pos, err := Membership(k.PG, k.PGSize, rank, h.t.World())
		if err != nil {
			h.fail(Failure{Kind: Protocol, Rank: rank, Stream: s, Step: a.Step, Op: k.Op, What: err.Error()})
			return
		}
		it.coll = instKey{key, r.seq[key]}
		it.pos = int32(pos)
		r.seq[key]++
	}
	r.push(s, it)
}

// Synchronize blocks the CPU until the event's record has executed.
func (h *Host) Synchronize(rank int, ev Event, op int) error {
	r := h.ranks[rank]
	cpu := r.streams[schedule.StreamHost]
	h.progress.Add(1)
	it := item{kind: itemWait, op: int32(op), step: int32(ev.Epoch - 1), ev: ev}
	cpu.exec(&it)
	if h.Failed() {
		return fmt.Errorf("the run failed")
	}
	return nil
}

// --- streams -----------------------------------------------------------------------

func (st *hostStream) loop() {
	defer close(st.done)
	h := st.r.h
	for {
		st.mu.Lock()
		if st.n > 0 {
			it := st.q[st.head]
			st.q[st.head] = item{}
			st.head = (st.head + 1) % len(st.q)
			st.n--
			if st.full && st.n <= maxQueue/2 {
				st.full = false
				select {
				case st.room <- struct{}{}:
				default:
				}
			}
			st.mu.Unlock()
			if it.kind == itemStop || h.failed.Load() {
				if it.kind == itemStop {
					return
				}
				continue
			}
			st.exec(&it)
			continue
		}
		st.mu.Unlock()
		select {
		case <-st.notify:
		case <-h.abort:
			return
		}
	}
}

// exec runs one item on the stream: stream order and the CPU's order of
// issue first (the item's clock), then the item.
func (st *hostStream) exec(it *item) {
	h := st.r.h
	st.vc.join(&it.cpu)
	st.vc[st.s]++
	t0 := time.Now()
	switch it.kind {
	case itemRecord:
		st.r.events[it.ev.ID].record(it.ev.Epoch, st.vc)
	case itemWait:
		vc, ok := st.waitEvent(it)
		if !ok {
			return
		}
		st.vc.join(&vc)
		t0 = time.Now() // a wait takes no time of its own
	case itemFree:
		b := it.mem[0]
		if h.t.HazardCheck {
			st.check(it, b, -1, true)
		}
		b.mu.Lock()
		b.writeSeq++
		b.mu.Unlock()
		fillPoison(b.data)
	case itemKernel:
		h.running.Add(1)
		w0 := st.waited
		st.runKernel(it)
		h.running.Add(-1)
		st.busy += time.Since(t0) - (st.waited - w0)
	}
	h.progress.Add(1)
	h.executed.Add(1)
	if int(it.step) < len(st.phases) && it.op >= 0 && int(it.op) < len(h.t.Phases) {
		ph := &st.phases[it.step][h.t.Phases[it.op]]
		start, end := t0.Sub(h.start).Nanoseconds(), time.Since(h.start).Nanoseconds()
		ph[0] = min(ph[0], start)
		ph[1] = max(ph[1], end)
	}
}

func (e *hostEvent) record(epoch int, vc vclock) {
	e.mu.Lock()
	if epoch > e.epoch {
		e.epoch = epoch
	}
	slot := &e.vcs[epoch%len(e.vcs)]
	slot.epoch, slot.vc = epoch, vc
	if e.ch != nil {
		close(e.ch)
		e.ch = nil
	}
	e.mu.Unlock()
}

// waitEvent blocks until the event's record of the wanted epoch has
// executed, and returns its clock.
func (st *hostStream) waitEvent(it *item) (vclock, bool) {
	h := st.r.h
	if it.ev.ID < 0 || it.ev.ID >= len(st.r.events) {
		st.fail(Protocol, it, "waits for event %d, which does not exist", it.ev.ID)
		return vclock{}, false
	}
	e := &st.r.events[it.ev.ID]
	for {
		e.mu.Lock()
		if e.epoch >= it.ev.Epoch {
			slot := e.vcs[it.ev.Epoch%len(e.vcs)]
			if slot.epoch != it.ev.Epoch { // recorded again since: the newer clock only adds order
				slot = e.vcs[e.epoch%len(e.vcs)]
			}
			e.mu.Unlock()
			st.blocked.Store(nil)
			return slot.vc, true
		}
		if e.ch == nil {
			e.ch = make(chan struct{})
		}
		ch := e.ch
		e.mu.Unlock()
		ev := it.ev
		st.blocked.Store(&blockInfo{op: int(it.op), step: int(it.step), what: func() string {
			return st.r.h.describeWait(ev)
		}})
		select {
		case <-ch:
		case <-h.abort:
			return vclock{}, false
		}
	}
}

func (h *Host) describeWait(ev Event) string {
	name := fmt.Sprintf("event %d", ev.ID)
	if h.t.EventName != nil {
		name = "[" + h.t.EventName(ev.ID) + "]"
	}
	s := fmt.Sprintf("waits for %s of step %d, which is never recorded", name, ev.Epoch-1)
	if h.t.RecordedBy != nil {
		if op := h.t.RecordedBy(ev.ID); op >= 0 {
			s = fmt.Sprintf("waits for %s of step %d; its record, %s, has not run", name, ev.Epoch-1, h.describe(op))
		} else {
			s += ": no op of the program records it"
		}
	}
	return s
}

func (h *Host) describe(op int) string {
	if h.t.Describe != nil && op >= 0 {
		return h.t.Describe(op)
	}
	return fmt.Sprintf("op %d", op)
}

// --- hazards -------------------------------------------------------------------------

// check records one access of a block by the item and reports a hazard if
// a conflicting earlier access is not ordered before it. arg is the
// operand (-1: the free).
func (st *hostStream) check(it *item, b *block, arg int, write bool) {
	if b == nil {
		return
	}
	s := st.s
	now := access{clock: st.vc[s], op: it.op, step: it.step}
	b.mu.Lock()
	var bad []string
	h := st.r.h
	who := h.describe(int(it.op))
	name := h.operandName(it, arg)
	if arg < 0 {
		name = "its buffer's block"
	}
	if w := b.w; w.clock > 0 && w.clock > st.vc[b.wStream] {
		bad = append(bad, fmt.Sprintf("%s %s %s, last written by %s on the %s stream (step %d), and no event orders that write before it",
			who, verb(arg, write), name, h.describe(int(w.op)), schedule.Stream(b.wStream), w.step))
	}
	if write {
		for t, rd := range b.r {
			if rd.clock > 0 && rd.clock > st.vc[t] {
				bad = append(bad, fmt.Sprintf("%s %s %s while %s on the %s stream (step %d) may still read it: no event orders the read before it",
					who, verb(arg, write), name, h.describe(int(rd.op)), schedule.Stream(t), rd.step))
			}
		}
		b.w = now
		b.wStream = int8(s)
		b.r = [numStreams]access{}
	} else {
		b.r[s] = now
	}
	b.mu.Unlock()
	for _, msg := range bad {
		st.fail(Hazard, it, "%s", msg)
	}
}

func verb(arg int, write bool) string {
	switch {
	case arg < 0:
		return "frees"
	case write:
		return "writes"
	}
	return "reads"
}

func (h *Host) operandName(it *item, arg int) string {
	if arg < 0 {
		arg = ArgDst
	}
	if h.t.BufferName != nil && it.buf[arg] >= 0 {
		return "buffer " + h.t.BufferName(int(it.buf[arg]))
	}
	return "a buffer"
}

// --- drain, stats, watchdog ------------------------------------------------------------

// Drain waits for every stream; it returns the failures.
func (h *Host) Drain() error {
	for _, r := range h.ranks {
		for s := range r.streams {
			if schedule.Stream(s) != schedule.StreamHost {
				r.push(schedule.Stream(s), item{kind: itemStop, op: -1})
				if h.Failed() {
					break
				}
			}
		}
	}
	for _, r := range h.ranks {
		for s, st := range r.streams {
			if schedule.Stream(s) == schedule.StreamHost {
				continue
			}
			select {
			case <-st.done:
			case <-h.abort:
				<-st.done
			}
		}
	}
	return h.err()
}

func (h *Host) err() error {
	h.failMu.Lock()
	defer h.failMu.Unlock()
	if len(h.failures) == 0 {
		return nil
	}
	return &FailureError{Failures: append([]Failure(nil), h.failures...), Dropped: h.dropped}
}

func (h *Host) Stats(rank int) RankStats {
	r := h.ranks[rank]
	var out RankStats
	for p := range r.pools {
		out.Pools[p] = r.pools[p].stats
	}
	steps := max(h.t.Steps, 1)
	out.PhaseStart = make([][numPhases]int64, steps)
	out.PhaseEnd = make([][numPhases]int64, steps)
	for i := range out.PhaseStart {
		for ph := range out.PhaseStart[i] {
			out.PhaseStart[i][ph] = math.MaxInt64
		}
	}
	for s, st := range r.streams {
		out.Busy[s] = st.busy
		for i := range st.phases {
			for ph := range st.phases[i] {
				out.PhaseStart[i][ph] = min(out.PhaseStart[i][ph], st.phases[i][ph][0])
				out.PhaseEnd[i][ph] = max(out.PhaseEnd[i][ph], st.phases[i][ph][1])
			}
		}
	}
	return out
}

// Close stops everything; the backend cannot be used again.
func (h *Host) Close() {
	if h.closed || h.abort == nil {
		return
	}
	h.closed = true
	h.abortOnce.Do(func() { close(h.abort) })
	close(h.wdStop)
	<-h.wdDone
	for _, r := range h.ranks {
		for s, st := range r.streams {
			if schedule.Stream(s) != schedule.StreamHost {
				<-st.done
			}
		}
	}
}

// watchdog declares a deadlock when nothing has been issued or completed
// for the timeout, no kernel is running, and some stream or CPU is blocked.
func (h *Host) watchdog() {
	defer close(h.wdDone)
	tick := min(max(h.t.Timeout/8, 5*time.Millisecond), 250*time.Millisecond)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	last, since := h.progress.Load(), time.Now()
	for {
		select {
		case <-h.wdStop:
			return
		case <-h.abort:
			return
		case <-tk.C:
		}
		if p := h.progress.Load(); p != last || h.running.Load() > 0 {
			last, since = p, time.Now()
			continue
		}
		if time.Since(since) < h.t.Timeout {
			continue
		}
		var blocked []Failure
		for _, r := range h.ranks {
			for s, st := range r.streams {
				if b := st.blocked.Load(); b != nil {
					blocked = append(blocked, Failure{Kind: Deadlock, Rank: r.rank, Stream: schedule.Stream(s), Step: b.step, Op: b.op,
						What: fmt.Sprintf("%s blocked %v: %s", h.describe(b.op), h.t.Timeout, b.what())})
				}
			}
		}
		if len(blocked) == 0 {
			since = time.Now()
			continue
		}
		// Root causes first: waits for what nobody will record, collectives
		// some rank never joins; then the waits chained behind them.
		cause := func(f Failure) int {
			if strings.Contains(f.What, "never") {
				return 0
			}
			return 1
		}
		sort.SliceStable(blocked, func(i, j int) bool {
			if a, b := cause(blocked[i]), cause(blocked[j]); a != b {
				return a < b
			}
			return blocked[i].Rank < blocked[j].Rank
		})
		for i, f := range blocked {
			if i == 16 {
				h.fail(Failure{Kind: Deadlock, Rank: -1, Op: -1, What: fmt.Sprintf("… and %d more streams blocked", len(blocked)-16)})
				break
			}
			h.fail(f)
		}
		return
	}
}

// --- collectives ----------------------------------------------------------------------

type instKey struct {
	Communicator
	seq int
}

type collInst struct {
	key     instKey
	n       int
	members []*item
	streams []*hostStream
	arrived int
	done    chan struct{}
}

// Communicator is one process group's instance: its kind, size and
// which block of ranks (Base) it is.
type Communicator struct {
	PG   schedule.ProcessGroup
	Size int
	Base int
}

// Membership resolves a process group for a rank of a world: its
// communicator and the rank's position in it. Shard and post-forward
// groups are blocks of Size consecutive ranks; replicate groups take one
// rank per shard group.
func Membership(pg schedule.ProcessGroup, size, rank, world int) (Communicator, int, error) {
	if size < 1 || world%size != 0 {
		return Communicator{}, 0, fmt.Errorf("a collective over %s(%d) cannot tile %d ranks", pg, size, world)
	}
	switch pg {
	case schedule.PGShard, schedule.PGPostForward:
		return Communicator{pg, size, rank / size}, rank % size, nil
	case schedule.PGReplicate:
		stride := world / size
		return Communicator{pg, size, rank % stride}, rank / stride, nil
	}
	return Communicator{}, 0, fmt.Errorf("a collective over process group %s", pg)
}

// Member is the rank at a position of the communicator.
func (c Communicator) Member(pos, world int) int {
	if c.PG == schedule.PGReplicate {
		return c.Base + pos*(world/c.Size)
	}
	return c.Base*c.Size + pos
}

// join adds the stream's collective to its instance; the last member to
// arrive runs it for everyone, the others wait.
func (st *hostStream) join(it *item) {
	h := st.r.h
	h.commMu.Lock()
	inst := h.comms[it.coll]
	if inst == nil {
		inst = &collInst{key: it.coll, n: it.coll.Size, members: make([]*item, it.coll.Size), streams: make([]*hostStream, it.coll.Size), done: make(chan struct{})}
		h.comms[it.coll] = inst
	}
	inst.members[it.pos] = it
	inst.streams[it.pos] = st
	inst.arrived++
	last := inst.arrived == inst.n
	if last {
		delete(h.comms, it.coll)
	}
	h.commMu.Unlock()
	if last {
		st.runCollective(inst)
		close(inst.done)
		return
	}
	st.blocked.Store(&blockInfo{op: int(it.op), step: int(it.step), what: func() string { return h.describeColl(inst) }})
	h.running.Add(-1) // waiting, not working
	t0 := time.Now()
	select {
	case <-inst.done:
	case <-h.abort:
	}
	st.waited += time.Since(t0)
	h.running.Add(1)
	st.blocked.Store(nil)
}

func (h *Host) describeColl(inst *collInst) string {
	h.commMu.Lock()
	defer h.commMu.Unlock()
	var in, out []string
	for pos, m := range inst.members {
		r := inst.key.Member(pos, h.t.World())
		if m != nil {
			in = append(in, fmt.Sprint(r))
		} else {
			out = append(out, fmt.Sprint(r))
		}
	}
	return fmt.Sprintf("collective #%d over %s(%d): ranks %s joined, ranks %s never did",
		inst.key.seq, inst.key.PG, inst.key.Size, strings.Join(in, " "), strings.Join(out, " "))
}
