package gputest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// ErrAborted is the asynchronous error of a collective whose communicator
// was aborted while it waited: what ncclCommAbort leaves behind.
var ErrAborted = errors.New("the communicator was aborted")

// Fabric connects CPU devices the way NCCL connects GPUs, so that tests
// run the one-rank-per-process path of the backend (and the worker's
// rendezvous and communicator set-up) without a GPU. Each rank owns a
// Device; a communicator is made from an id as ncclCommInitRank makes
// one, and its collectives are kernels on the caller's stream that start
// when every member's has started, like NCCL's.
//
// It behaves as NCCL does where that can go wrong on a GPU:
//   - ncclCommInitRank (NewComm), ncclCommSplit and a communicator's
//     first collective (NCCL connects lazily) block the caller until
//     every member has made the same call;
//   - a communicator's collectives run one after another in the order
//     they were enqueued, whatever streams they are on (NCCL serialises
//     a communicator's kernels), so a plan that waits on a later one
//     before an earlier one can start deadlocks here too;
//   - members that call different collectives at the same place, or the
//     same one with different sizes, dtypes or reduce ops, fail the
//     whole group (real NCCL would hang or corrupt memory);
//   - Abort blocks until no other communicator on the device has a
//     collective in flight (ncclCommAbort synchronises the device while
//     it frees), so aborting communicators one after another, when
//     several have hung collectives, hangs; and Abort while another
//     goroutine is inside a call on the same communicator frees it under
//     that call: the device records the use after free.
//
// NonBlocking makes later communicators non-blocking, as NCCL's
// config.blocking = 0 does: a call that would block (Split, a first
// collective connecting to its peers) returns gpu.ErrInProgress at once
// and goes on in the background, and Poll reports it in progress until
// it has ended, then its outcome. No call is ever inside such a
// communicator for long, so Abort is safe at any time.
//
// Hang makes a collective never finish, to test watchdogs. A member's
// Abort ends its own waiting collectives with ErrAborted as a sticky
// error on its device, so that its streams drain and SyncEvent returns,
// as after ncclCommAbort; the other members keep waiting, as they would
// for a peer that left, until their own watchdogs abort them.
type Fabric struct {
	mu     sync.Mutex
	nextID uint64
	groups map[[128]byte]*group
	hang   int // the collective number, per communicator, that never ends; -1 none
	// hangKind: collective number n of a kind (by name: "AllGather",
	// "ReduceScatter", "AllReduce"), per communicator, never ends.
	hangKind map[string]int
	// nonBlocking: communicators made from now on are non-blocking.
	nonBlocking bool
}

// NonBlocking makes every communicator made afterwards non-blocking (see
// Fabric).
func (f *Fabric) NonBlocking() {
	f.mu.Lock()
	f.nonBlocking = true
	f.mu.Unlock()
}

// NewFabric makes a fabric with no communicators.
func NewFabric() *Fabric {
	return &Fabric{groups: map[[128]byte]*group{}, hang: -1}
}

// Hang makes collective number n (from 0, counted per communicator) of
// every communicator made afterwards wait forever, or until aborted.
func (f *Fabric) Hang(n int) {
	f.mu.Lock()
	f.hang = n
	f.mu.Unlock()
}

// HangKind makes collective number n (from 0, counted per communicator)
// of the given kind ("AllGather", "ReduceScatter", "AllReduce") of every
// communicator made afterwards wait forever, or until aborted; with
// several kinds, collectives of different communicators can hang at the
// same time.
func (f *Fabric) HangKind(kind string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hangKind == nil {
		f.hangKind = map[string]int{}
	}
	f.hangKind[kind] = n
}

// UniqueID makes the id of a new group (ncclGetUniqueId).
func (f *Fabric) UniqueID() [128]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newID()
}

// newID makes an id no group has. f.mu is held.
func (f *Fabric) newID() [128]byte {
	f.nextID++
	var id [128]byte
	copy(id[:], "gputest fabric")
	binary.BigEndian.PutUint64(id[120:], f.nextID)
	return id
}

// group is the state every member of a communicator shares.
type group struct {
	f        *Fabric
	id       [128]byte
	n        int
	joined   int
	ready    chan struct{} // closed when every member has joined
	aborted  chan struct{} // closed when members disagree
	abort    sync.Once
	hang     int
	hangKind map[string]int
	// insts are the collectives in flight, by sequence number.
	insts map[int]*instance
	// splits are the Split calls in flight, by sequence number.
	splits map[int]*split
	// connected is closed when every member has called its first
	// collective; firsts counts those that have.
	connected chan struct{}
	firsts    int
}

// instance is one collective: every member's input, then every member's
// output.
type instance struct {
	kind     string
	in       [][]byte
	arrived  int
	all      chan struct{} // closed when every input is in
	finished int
}

type split struct {
	color, key []int
	arrived    int
	all        chan struct{}
	ids        map[int][128]byte // by color
}

// group returns the group of id, made for n members. f.mu is held.
func (f *Fabric) group(id [128]byte, n int) (*group, error) {
	g := f.groups[id]
	if g == nil {
		g = &group{f: f, id: id, n: n, ready: make(chan struct{}), aborted: make(chan struct{}), hang: f.hang, hangKind: maps.Clone(f.hangKind),
			insts: map[int]*instance{}, splits: map[int]*split{}, connected: make(chan struct{})}
		f.groups[id] = g
	}
	if g.n != n {
		return nil, fmt.Errorf("gputest: a communicator of %d ranks joins a group of %d", n, g.n)
	}
	return g, nil
}

// NewComm joins the group id names as rank of n, on dev; like
// ncclCommInitRank it returns when every member has joined.
func (f *Fabric) NewComm(dev *Device, id [128]byte, n, rank int) (*Comm, error) {
	if n < 1 || rank < 0 || rank >= n {
		return nil, fmt.Errorf("gputest: communicator rank %d of %d", rank, n)
	}
	f.mu.Lock()
	g, err := f.group(id, n)
	if err == nil {
		g.joined++
		if g.joined == n {
			close(g.ready)
		}
	}
	nonBlocking := f.nonBlocking
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case <-g.ready:
	case <-g.aborted:
		return nil, fmt.Errorf("gputest: joining a communicator: %w", ErrAborted)
	case <-dev.done:
		return nil, fmt.Errorf("gputest: joining a communicator: %w", ErrClosed)
	}
	done := make(chan struct{})
	close(done)
	return &Comm{g: g, dev: dev, rank: rank, aborted: make(chan struct{}), last: done, nonBlocking: nonBlocking}, nil
}

// Comm is one member of a fabric group; it implements gpu.Comm.
type Comm struct {
	g      *group
	dev    *Device
	rank   int
	seq    int            // collectives enqueued
	kinds  map[string]int // collectives enqueued, by kind
	splits int            // Split calls made
	closed bool
	mu     sync.Mutex
	// last is closed when the collective enqueued last has ended.
	last chan struct{}
	// calls are the blocking calls under way on the communicator (a
	// Split, a first collective), by name.
	calls []string

	aborted chan struct{} // closed by Abort
	abort   sync.Once

	// nonBlocking: see Fabric.NonBlocking; op is the call going on in
	// the background, nil when none.
	nonBlocking bool
	op          *pending
}

// pending is a non-blocking call going on in the background.
type pending struct {
	done chan struct{} // closed when it has ended
	err  error         // its outcome, set before done is closed
}

// background runs f as the communicator's non-blocking call in progress
// and returns gpu.ErrInProgress.
func (c *Comm) background(f func() error) error {
	op := &pending{done: make(chan struct{})}
	c.mu.Lock()
	c.op = op
	c.mu.Unlock()
	go func() {
		op.err = f()
		close(op.done)
	}()
	return gpu.ErrInProgress
}

// Poll is ncclCommGetAsyncError on a non-blocking communicator:
// gpu.ErrInProgress while its last call goes on in the background, then
// that call's outcome, once; nil when no call is in progress.
func (c *Comm) Poll() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	op := c.op
	if op == nil {
		return nil
	}
	select {
	case <-op.done:
		c.op = nil
		return op.err
	default:
		return gpu.ErrInProgress
	}
}

var _ gpu.Comm = (*Comm)(nil)

func (c *Comm) Size() int { return c.g.n }
func (c *Comm) Rank() int { return c.rank }

// next numbers the next collective and links it behind the one before,
// or fails on a closed communicator: prev is closed when the collective
// before has ended, end must be closed when this one does.
func (c *Comm) next(call string) (seq int, hang bool, prev, end chan struct{}, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, false, nil, nil, fmt.Errorf("gputest: %s: %w", call, ErrClosed)
	}
	select {
	case <-c.g.aborted:
		return 0, false, nil, nil, fmt.Errorf("gputest: %s: %w", call, ErrAborted)
	case <-c.aborted:
		return 0, false, nil, nil, fmt.Errorf("gputest: %s: %w", call, ErrAborted)
	default:
	}
	seq = c.seq
	c.seq++
	if c.kinds == nil {
		c.kinds = map[string]int{}
	}
	if n, ok := c.g.hangKind[call]; ok && n == c.kinds[call] {
		hang = true
	}
	c.kinds[call]++
	prev, end = c.last, make(chan struct{})
	c.last = end
	return seq, hang, prev, end, nil
}

// enter and exit bracket a blocking call on the communicator.
func (c *Comm) enter(call string) {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
}

func (c *Comm) exit(call string) {
	c.mu.Lock()
	if i := slices.Index(c.calls, call); i >= 0 {
		c.calls = slices.Delete(c.calls, i, i+1)
	}
	c.mu.Unlock()
}

// connect is a member's first collective: like NCCL's lazy connection
// set-up it blocks until every member has made its first.
func (c *Comm) connect(call string) error {
	c.enter(call)
	defer c.exit(call)
	return c.connectWait(call)
}

// connectWait is connect's wait, which a non-blocking communicator makes
// in the background.
func (c *Comm) connectWait(call string) error {
	g := c.g
	g.f.mu.Lock()
	if g.firsts++; g.firsts == g.n {
		close(g.connected)
	}
	g.f.mu.Unlock()
	select {
	case <-g.connected:
		return nil
	case <-g.aborted:
	case <-c.aborted:
	case <-c.dev.done:
		return fmt.Errorf("gputest: %s (connecting): %w", call, ErrClosed)
	}
	return fmt.Errorf("gputest: %s (connecting): %w", call, ErrAborted)
}

// AllGather: see gpu.Comm.
func (c *Comm) AllGather(send, recv gpu.Ptr, bytes int64, s gpu.Stream) error {
	if bytes < 0 {
		return fmt.Errorf("gputest: AllGather of %d bytes: %w", bytes, ErrInvalidValue)
	}
	n := int64(c.g.n)
	return c.collective("AllGather", "AllGather", s, []access{{send, bytes, false}, {recv, n * bytes, true}}, func(in [][]byte, out []byte) {
		for j, b := range in {
			copy(out[int64(j)*bytes:], b)
		}
	})
}

// ReduceScatter: see gpu.Comm. Sums are taken in float32 (fp64 in
// fp64) in member order, like Device.Reduce; real NCCL's order and
// precision differ, which is why the backend does not check reductions
// over a communicator bit for bit.
func (c *Comm) ReduceScatter(send, recv gpu.Ptr, n int64, dt ir.DType, op schedule.ReduceOp, factor float64, s gpu.Stream) error {
	scale, err := c.scale("ReduceScatter", dt, n, op, factor)
	if err != nil {
		return err
	}
	size, rank := int64(dt.Size())*n, int64(c.rank)
	return c.collective("ReduceScatter", signature("ReduceScatter", dt, op, scale), s, []access{{send, int64(c.g.n) * size, false}, {recv, size, true}}, func(in [][]byte, out []byte) {
		chunks := make([][]byte, len(in))
		for j, b := range in {
			chunks[j] = b[rank*size : (rank+1)*size]
		}
		reduceInto(out, chunks, dt, scale)
	})
}

// AllReduce: see gpu.Comm and ReduceScatter.
func (c *Comm) AllReduce(buf gpu.Ptr, n int64, dt ir.DType, op schedule.ReduceOp, factor float64, s gpu.Stream) error {
	scale, err := c.scale("AllReduce", dt, n, op, factor)
	if err != nil {
		return err
	}
	size := int64(dt.Size()) * n
	return c.collective("AllReduce", signature("AllReduce", dt, op, scale), s, []access{{buf, size, false}, {buf, size, true}}, func(in [][]byte, out []byte) {
		reduceInto(out, in, dt, scale)
	})
}

func (c *Comm) scale(call string, dt ir.DType, n int64, op schedule.ReduceOp, factor float64) (float64, error) {
	if err := checkArgs(call, n, dt); err != nil {
		return 0, err
	}
	switch op {
	case schedule.ReduceSum:
		return 1, nil
	case schedule.ReduceAvg:
		return 1 / float64(c.g.n), nil
	case schedule.ReducePremulSum:
		if factor > 0 {
			return factor, nil
		}
	}
	return 0, fmt.Errorf("gputest: %s: reduce op %s with factor %v: %w", call, op, factor, ErrInvalidValue)
}

// signature names a reduction as its members must agree on it: NCCL
// checks none of this, and members that agree on the byte count but not
// on the dtype or the operator reduce garbage.
func signature(call string, dt ir.DType, op schedule.ReduceOp, scale float64) string {
	return fmt.Sprintf("%s of %s, %s × %v", call, dt, op, scale)
}

// reduceInto writes the scaled sum of ins into out.
func reduceInto(out []byte, ins [][]byte, dt ir.DType, scale float64) {
	n := int64(len(out)) / int64(dt.Size())
	if dt == ir.FP64 {
		for i := range n {
			var sum float64
			for _, b := range ins {
				sum += executor.LoadElement(ir.FP64, b, i) * scale
			}
			executor.StoreElement(ir.FP64, out, i, sum)
		}
		return
	}
	sum, x := make([]float32, n), make([]float32, n)
	for j, b := range ins {
		decode32(dt, b, x)
		for i, v := range x {
			t := float32(v * float32(scale))
			if j == 0 {
				sum[i] = t
			} else {
				sum[i] = float32(sum[i] + t)
			}
		}
	}
	encode32(dt, sum, out)
}

// collective enqueues this member's part: acc[0] is its input, acc[1]
// its output; combine computes the output from every member's input.
// sig is what every member must agree on besides the size.
func (c *Comm) collective(call, sig string, s gpu.Stream, acc []access, combine func(in [][]byte, out []byte)) error {
	seq, hang, prev, end, err := c.next(call)
	if err != nil {
		return err
	}
	if seq == 0 && c.nonBlocking {
		return c.background(func() error {
			if err := c.connectWait(call); err != nil {
				close(end)
				return err
			}
			return c.enqueue(call, sig, s, acc, combine, seq, hang, prev, end)
		})
	}
	if seq == 0 {
		if err := c.connect(call); err != nil {
			close(end)
			return err
		}
	}
	return c.enqueue(call, sig, s, acc, combine, seq, hang, prev, end)
}

// enqueue launches collective seq's kernel on s.
func (c *Comm) enqueue(call, sig string, s gpu.Stream, acc []access, combine func(in [][]byte, out []byte), seq int, hang bool, prev, end chan struct{}) error {
	g, rank, aborted := c.g, c.rank, c.aborted
	label := fmt.Sprintf("%s #%d of rank %d of %d", call, seq, rank, g.n)
	err := c.dev.launch(s, &kernel{kind: KindCollective, acc: acc, exec: func(d *Device, bufs [][]byte) error {
		defer close(end)
		d.mu.Lock()
		if d.running == nil {
			d.running = map[*group]int{}
		}
		d.running[g]++
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			if d.running[g]--; d.running[g] == 0 {
				delete(d.running, g)
			}
			d.cond.Broadcast()
			d.mu.Unlock()
		}()
		// NCCL runs a communicator's collectives in the order enqueued.
		select {
		case <-prev:
		case <-g.aborted:
			return fmt.Errorf("gputest: %s: %w", label, ErrAborted)
		case <-aborted:
			return fmt.Errorf("gputest: %s: %w", label, ErrAborted)
		case <-d.done:
			return fmt.Errorf("gputest: %s: %w", label, ErrClosed)
		}
		inst, err := g.arrive(seq, rank, sig, d, bufs[0])
		if err != nil {
			return fmt.Errorf("gputest: %s: %w", label, err)
		}
		if hang || g.hang == seq {
			select {
			case <-aborted:
				return fmt.Errorf("gputest: %s (made to hang): %w", label, ErrAborted)
			case <-d.done:
				return fmt.Errorf("gputest: %s: %w", label, ErrClosed)
			}
		}
		select {
		case <-inst.all:
		case <-g.aborted:
			return fmt.Errorf("gputest: %s: %w", label, ErrAborted)
		case <-aborted:
			return fmt.Errorf("gputest: %s: %w", label, ErrAborted)
		case <-d.done:
			return fmt.Errorf("gputest: %s: %w", label, ErrClosed)
		}
		d.memMu.Lock()
		combine(inst.in, bufs[1])
		d.memMu.Unlock()
		g.f.mu.Lock()
		if inst.finished++; inst.finished == g.n {
			delete(g.insts, seq)
		}
		g.f.mu.Unlock()
		return nil
	}})
	if err != nil {
		close(end)
	}
	return err
}

// arrive hands in a member's input of collective seq.
func (g *group) arrive(seq, rank int, kind string, d *Device, in []byte) (*instance, error) {
	d.memMu.Lock()
	own := slices.Clone(in)
	d.memMu.Unlock()
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	inst := g.insts[seq]
	if inst == nil {
		inst = &instance{kind: kind, in: make([][]byte, g.n), all: make(chan struct{})}
		g.insts[seq] = inst
	}
	if inst.kind != kind || (inst.arrived > 0 && len(firstInput(inst)) != len(own)) {
		// Real NCCL would hang or corrupt memory; failing the group
		// tells the test which calls disagreed.
		g.abort.Do(func() { close(g.aborted) })
		return nil, fmt.Errorf("members disagree: %s of %d bytes here, %s of %d bytes elsewhere: collectives out of order",
			kind, len(own), inst.kind, len(firstInput(inst)))
	}
	inst.in[rank] = own
	if inst.arrived++; inst.arrived == g.n {
		close(inst.all)
	}
	return inst, nil
}

func firstInput(inst *instance) []byte {
	for _, b := range inst.in {
		if b != nil {
			return b
		}
	}
	return nil
}

// Split makes a communicator of the members that pass the same color,
// ranked by key (ties by rank), as ncclCommSplit does. Every member calls
// it; it returns when all have.
func (c *Comm) Split(color, key int) (gpu.Comm, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("gputest: Split: %w", ErrClosed)
	}
	seq := c.splits
	c.splits++
	c.mu.Unlock()
	if color < 0 {
		return nil, fmt.Errorf("gputest: Split: color %d: %w", color, ErrInvalidValue)
	}
	if c.nonBlocking {
		// ncclCommSplit with a NULL config: the new communicator inherits
		// the parent's, and the caller polls it.
		sub := &Comm{dev: c.dev, aborted: make(chan struct{}), nonBlocking: true}
		return sub, sub.background(func() error {
			made, err := c.splitWait(seq, color, key, sub.aborted)
			if err != nil {
				return err
			}
			sub.g, sub.rank, sub.last = made.g, made.rank, made.last
			return nil
		})
	}
	c.enter("Split")
	defer c.exit("Split")
	sub, err := c.splitWait(seq, color, key, nil)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// splitWait is Split number seq's meeting of the members and the new
// communicator's making; a non-blocking Split makes them in the
// background, where aborting the new communicator (subAborted) ends
// them too.
func (c *Comm) splitWait(seq, color, key int, subAborted chan struct{}) (*Comm, error) {
	g, f := c.g, c.g.f
	f.mu.Lock()
	sp := g.splits[seq]
	if sp == nil {
		sp = &split{color: make([]int, g.n), key: make([]int, g.n), all: make(chan struct{})}
		g.splits[seq] = sp
	}
	sp.color[c.rank], sp.key[c.rank] = color, key
	if sp.arrived++; sp.arrived == g.n {
		delete(g.splits, seq)
		sp.ids = map[int][128]byte{}
		for _, col := range sp.color {
			if _, ok := sp.ids[col]; !ok {
				sp.ids[col] = f.newID()
			}
		}
		close(sp.all)
	}
	f.mu.Unlock()
	select {
	case <-sp.all:
	case <-g.aborted:
		return nil, fmt.Errorf("gputest: Split: %w", ErrAborted)
	case <-c.aborted:
		return nil, fmt.Errorf("gputest: Split: %w", ErrAborted)
	case <-subAborted:
		return nil, fmt.Errorf("gputest: Split: %w", ErrAborted)
	case <-c.dev.done:
		return nil, fmt.Errorf("gputest: Split: %w", ErrClosed)
	}
	var members []int
	for r, col := range sp.color {
		if col == color {
			members = append(members, r)
		}
	}
	slices.SortStableFunc(members, func(a, b int) int { return sp.key[a] - sp.key[b] })
	return f.NewComm(c.dev, sp.ids[color], len(members), slices.Index(members, c.rank))
}

// CallsInside is how many calls are inside the communicator now: a test
// that must act while one is waits for it instead of sleeping.
func (c *Comm) CallsInside() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// Abort ends this member's waiting collectives with ErrAborted; later
// calls fail. Like ncclCommAbort it then waits for the device, i.e. for
// every other communicator's collectives in flight on it. Called while
// another goroutine is inside a blocking call on the communicator, it
// frees the communicator under that call: the device records it.
func (c *Comm) Abort() error {
	c.mu.Lock()
	calls := slices.Clone(c.calls)
	c.mu.Unlock()
	d := c.dev
	if len(calls) > 0 {
		d.mu.Lock()
		d.fail(fmt.Errorf("gputest: Abort of communicator rank %d of %d freed it while %s was inside it: a use after free: %w",
			c.rank, c.g.n, strings.Join(calls, ", "), ErrAbortInCall))
		d.mu.Unlock()
	}
	c.abort.Do(func() { close(c.aborted) })
	d.mu.Lock()
	defer d.mu.Unlock()
	for !d.closed {
		others := false
		for g := range d.running {
			others = others || g != c.g
		}
		if !others {
			break
		}
		d.cond.Wait()
	}
	return nil
}

// ErrAbortInCall: a communicator aborted while a call was inside it.
var ErrAbortInCall = errors.New("communicator aborted during a call")

// Close releases the member; closing twice is harmless.
func (c *Comm) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}
