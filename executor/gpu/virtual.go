package gpu

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Virtual collectives: the ranks of a single-GPU rehearsal share one
// device, so a collective is device work on every member's stream. A
// member's launch blocks its CPU until all members have launched (as the
// host backend's do); the last one enqueues, for every member m:
//
//	record arrived_m on m's stream
//	m's stream waits for every arrived_j      (the inputs are written)
//	m's part: copies from the peers, or a reduction of their chunks
//	record done_m on m's stream
//	m's stream waits for every done_j         (no one reads m's buffers
//	                                           after m moves on)
//
// which is what NCCL's kernels guarantee between processes. An all-reduce
// reduces once, on the first member's stream, into a scratch block that
// every member then copies from.

type instKey struct {
	executor.Communicator
	seq int
}

type member struct {
	r  *rank
	st Stream
	s  schedule.Stream
	k  *executor.Kernel
	a  executor.Args
}

type vcoll struct {
	key     instKey
	members []*member
	arrived int
	done    chan struct{}
}

type virtualColls struct {
	b       *Backend
	mu      sync.Mutex
	pending map[instKey]*vcoll
	seq     map[[2]any]int // (rank, communicator) → collectives issued
	scratch map[executor.Communicator]*scratchBlock
	// shifted are the reduce-scatter members' scratch blocks for chunks
	// whose offset is not a multiple of 16 bytes (reduceShifted).
	shifted map[shiftKey]*scratchBlock
	stop    chan struct{}
	once    sync.Once
	// Events for the arrivals and completions, and the all-reduce's
	// reduction, per rank. Reusing them is safe: a rank's CPU is blocked
	// in a collective until the collective is enqueued, so no two
	// collectives that share a member are enqueued at once, and each
	// wait is enqueued right after the record it waits for.
	arrived, done, reduced []Event
}

type scratchBlock struct {
	ptr   Ptr
	bytes int64
}

func (v *virtualColls) init(b *Backend) error {
	v.b = b
	v.pending = map[instKey]*vcoll{}
	v.seq = map[[2]any]int{}
	v.scratch = map[executor.Communicator]*scratchBlock{}
	v.shifted = map[shiftKey]*scratchBlock{}
	v.stop = make(chan struct{})
	if b.opt.Comm != nil {
		return nil
	}
	for _, list := range []*[]Event{&v.arrived, &v.done, &v.reduced} {
		*list = make([]Event, len(b.ranks))
		for r := range *list {
			ev, err := b.dev.NewSyncEvent()
			if err != nil {
				return fmt.Errorf("gpu backend: collective events: %w", err)
			}
			(*list)[r] = ev
		}
	}
	return nil
}

func (v *virtualColls) abort() { v.once.Do(func() { close(v.stop) }) }

// collective runs a collective of one member: through the communicator
// when the process has one, else among the virtual ranks.
func (b *Backend) collective(r *rank, st Stream, s schedule.Stream, k *executor.Kernel, a executor.Args, checked bool) error {
	if c := b.comms[commKey{k.PG, k.PGSize}]; c != nil {
		return b.commCollective(c, r, st, s, k, a)
	}
	if k.PGSize <= 1 {
		return b.selfCollective(st, k, a)
	}
	key, pos, err := executor.Membership(k.PG, k.PGSize, r.rank, b.t.World())
	if err != nil {
		return fmt.Errorf("%w: %w", errProtocol, err)
	}
	v := &b.virt
	v.mu.Lock()
	sk := [2]any{r.rank, key}
	seq := v.seq[sk]
	v.seq[sk] = seq + 1
	ik := instKey{key, seq}
	inst := v.pending[ik]
	if inst == nil {
		inst = &vcoll{key: ik, members: make([]*member, key.Size), done: make(chan struct{})}
		v.pending[ik] = inst
	}
	inst.members[pos] = &member{r: r, st: st, s: s, k: k, a: a}
	inst.arrived++
	last := inst.arrived == key.Size
	if last {
		delete(v.pending, ik)
	}
	v.mu.Unlock()
	if !last {
		timeout := b.t.Timeout
		if timeout <= 0 {
			timeout = time.Minute
		}
		select {
		case <-inst.done:
			return nil
		case <-v.stop:
			return nil
		case <-time.After(timeout):
			b.Abort(executor.Failure{Kind: executor.Deadlock, Rank: r.rank, Stream: s, Step: a.Step, Op: k.Op,
				What: fmt.Sprintf("%s waited %v for the other ranks of its collective: %s", b.describe(k.Op), timeout, v.describe(inst))})
			return nil
		}
	}
	defer close(inst.done)
	var in [][]byte
	if checked {
		if in, err = b.snapshot(inst); err != nil {
			return err
		}
	}
	if err := v.enqueue(inst); err != nil {
		return err
	}
	if checked {
		return b.checkVirtual(inst, in)
	}
	return nil
}

// describe says who arrived at a collective and who did not.
func (v *virtualColls) describe(inst *vcoll) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var in, out []string
	for pos, m := range inst.members {
		rk := inst.key.Member(pos, v.b.t.World())
		if m != nil {
			in = append(in, fmt.Sprint(rk))
		} else {
			out = append(out, fmt.Sprint(rk))
		}
	}
	return fmt.Sprintf("#%d over %s(%d): ranks %s launched it, ranks %s never did", inst.key.seq, inst.key.PG, inst.key.Size, strings.Join(in, ","), strings.Join(out, ","))
}

// enqueue puts a complete collective on its members' streams.
func (v *virtualColls) enqueue(inst *vcoll) error {
	b := v.b
	m0 := inst.members[0]
	for _, m := range inst.members {
		if m.k.Kind != m0.k.Kind || m.k.DType != m0.k.DType || m.k.Reduce != m0.k.Reduce || m.k.Factor != m0.k.Factor {
			return fmt.Errorf("%w: collective #%d over %s(%d): the members call different collectives (%s and %s)", errProtocol, inst.key.seq, inst.key.PG, inst.key.Size, b.describe(m0.k.Op), b.describe(m.k.Op))
		}
	}
	arrived, done := make([]Event, len(inst.members)), make([]Event, len(inst.members))
	for i, m := range inst.members {
		arrived[i], done[i] = v.arrived[m.r.rank], v.done[m.r.rank]
	}
	for i, m := range inst.members {
		if err := b.dev.Record(arrived[i], m.st); err != nil {
			return err
		}
	}
	for _, m := range inst.members {
		for j := range inst.members {
			if err := b.dev.Wait(m.st, arrived[j]); err != nil {
				return err
			}
		}
	}
	if err := v.work(inst, done); err != nil {
		return err
	}
	for _, m := range inst.members {
		for j := range inst.members {
			if err := b.dev.Wait(m.st, done[j]); err != nil {
				return err
			}
		}
	}
	return nil
}

// work enqueues every member's part and records its done event.
func (v *virtualColls) work(inst *vcoll, done []Event) error {
	b := v.b
	m0 := inst.members[0]
	n := int64(len(inst.members))
	bw := b.opt.LinkBandwidth
	switch m0.k.Kind {
	case schedule.OpAllGather:
		size := operand(m0, executor.ArgDst).bytes
		if size%n != 0 {
			return fmt.Errorf("%w: all-gather of %d bytes over %d ranks", errProtocol, size, n)
		}
		c := size / n
		for i, m := range inst.members {
			dst := operand(m, executor.ArgDst)
			if dst.bytes != size {
				return fmt.Errorf("%w: all-gather members hold %d and %d bytes", errProtocol, size, dst.bytes)
			}
			for j, peer := range inst.members {
				if j == i {
					continue
				}
				from := operand(peer, executor.ArgDst).ptr + Ptr(int64(j)*c)
				to := dst.ptr + Ptr(int64(j)*c)
				var err error
				if bw > 0 {
					err = b.dev.PacedCopy(to, from, c, bw, m.st)
				} else {
					err = b.dev.Copy(to, from, c, m.st)
				}
				if err != nil {
					return err
				}
			}
			if err := b.dev.Record(done[i], m.st); err != nil {
				return err
			}
		}
		return nil
	case schedule.OpReduceScatter:
		dt := m0.k.DType
		in := operand(m0, executor.ArgSrc).bytes
		elems := in / dt.Size()
		if in%dt.Size() != 0 || elems%n != 0 || operand(m0, executor.ArgDst).bytes != in/n {
			return fmt.Errorf("%w: reduce-scatter of %d bytes of %s over %d ranks into %d", errProtocol, in, dt, n, operand(m0, executor.ArgDst).bytes)
		}
		chunk := elems / n
		scale, err := reduceScale(m0.k, int(n))
		if err != nil {
			return err
		}
		for i, m := range inst.members {
			srcs := make([]Ptr, n)
			for j, peer := range inst.members {
				src := operand(peer, executor.ArgSrc)
				if src.bytes != in {
					return fmt.Errorf("%w: reduce-scatter members hold %d and %d bytes", errProtocol, in, src.bytes)
				}
				srcs[j] = src.ptr + Ptr(int64(i)*chunk*dt.Size())
			}
			if bw > 0 {
				// What the ring moves into this rank: n−1 chunks.
				if err := b.dev.Spin(linkTime(int64(n-1)*chunk*dt.Size(), bw), m.st); err != nil {
					return err
				}
			}
			if err := v.reduceInto(inst.key.Communicator, i, operand(m, executor.ArgDst).ptr, srcs, chunk, dt, scale, m.st); err != nil {
				return err
			}
			if err := b.dev.Record(done[i], m.st); err != nil {
				return err
			}
		}
		return nil
	case schedule.OpAllReduce:
		dt := m0.k.DType
		size := operand(m0, executor.ArgDst).bytes
		if size%dt.Size() != 0 {
			return fmt.Errorf("%w: all-reduce of %d bytes of %s", errProtocol, size, dt)
		}
		scale, err := reduceScale(m0.k, int(n))
		if err != nil {
			return err
		}
		tmp, err := v.scratchFor(inst.key.Communicator, size)
		if err != nil {
			return err
		}
		srcs := make([]Ptr, n)
		for j, m := range inst.members {
			if operand(m, executor.ArgDst).bytes != size {
				return fmt.Errorf("%w: all-reduce members hold %d and %d bytes", errProtocol, size, operand(m, executor.ArgDst).bytes)
			}
			srcs[j] = operand(m, executor.ArgDst).ptr
		}
		if bw > 0 {
			// A ring all-reduce moves 2(n−1)/n of the buffer each way.
			if err := b.dev.Spin(linkTime(2*(n-1)*size/n, bw), m0.st); err != nil {
				return err
			}
		}
		if err := b.dev.Reduce(tmp.ptr, srcs, size/dt.Size(), dt, scale, m0.st); err != nil {
			return err
		}
		reduced := v.reduced[m0.r.rank]
		if err := b.dev.Record(reduced, m0.st); err != nil {
			return err
		}
		for i, m := range inst.members {
			if err := b.dev.Wait(m.st, reduced); err != nil {
				return err
			}
			if err := b.dev.Copy(operand(m, executor.ArgDst).ptr, tmp.ptr, size, m.st); err != nil {
				return err
			}
			if err := b.dev.Record(done[i], m.st); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s is not a collective", m0.k.Kind)
}

// shiftKey names a reduce-scatter member's shifted scratch.
type shiftKey struct {
	c      executor.Communicator
	member int
}

// reduceInto reduces srcs into dst on st. The reduce kernel runs in
// 16-byte words only where dst and every source share their alignment
// modulo 16, and element by element otherwise, at a fraction of the
// bandwidth; member i's chunk of a reduce-scatter starts i·chunk bytes
// into each source, so where that is not a multiple of 16 the sources
// agree with one another but not with dst, a fresh block. Then the
// reduction goes to the member's scratch block at the sources' offset
// and a copy moves it to dst: a copy of one chunk instead of a scalar
// reduction of n (issue 29, N10).
func (v *virtualColls) reduceInto(c executor.Communicator, member int, dst Ptr, srcs []Ptr, n int64, dt ir.DType, scale float32, st Stream) error {
	shift := int64(srcs[0] % 16)
	if int64(dst%16) == shift || dt == ir.FP64 {
		return v.b.dev.Reduce(dst, srcs, n, dt, scale, st)
	}
	for _, p := range srcs[1:] {
		if int64(p%16) != shift {
			return v.b.dev.Reduce(dst, srcs, n, dt, scale, st)
		}
	}
	bytes := n * dt.Size()
	s, err := v.shiftedFor(shiftKey{c, member}, bytes+16)
	if err != nil {
		return err
	}
	tmp := s.ptr + Ptr((shift-int64(s.ptr%16)+16)%16)
	if err := v.b.dev.Reduce(tmp, srcs, n, dt, scale, st); err != nil {
		return err
	}
	return v.b.dev.Copy(dst, tmp, bytes, st)
}

// shiftedFor is a member's shifted scratch of at least bytes; it is only
// used on that member's stream.
func (v *virtualColls) shiftedFor(k shiftKey, bytes int64) (*scratchBlock, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.shifted[k]
	if s != nil && s.bytes >= bytes {
		return s, nil
	}
	if s != nil {
		if err := v.b.dev.Free(s.ptr); err != nil {
			return nil, err
		}
	}
	ptr, err := v.b.dev.Alloc(bytes)
	if err != nil {
		return nil, fmt.Errorf("reduce-scatter scratch of %d bytes: %w", bytes, err)
	}
	s = &scratchBlock{ptr: ptr, bytes: bytes}
	v.shifted[k] = s
	return s, nil
}

// scratchFor is a communicator's all-reduce scratch of at least bytes.
// Its reuse is ordered: the next all-reduce on the communicator waits for
// every member's arrival, which follows every member's wait for the
// previous one's completion.
func (v *virtualColls) scratchFor(k executor.Communicator, bytes int64) (*scratchBlock, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.scratch[k]
	if s != nil && s.bytes >= bytes {
		return s, nil
	}
	if s != nil {
		if err := v.b.dev.Free(s.ptr); err != nil {
			return nil, err
		}
	}
	ptr, err := v.b.dev.Alloc(max(bytes, 1))
	if err != nil {
		return nil, fmt.Errorf("all-reduce scratch of %d bytes: %w", bytes, err)
	}
	s = &scratchBlock{ptr: ptr, bytes: bytes}
	v.scratch[k] = s
	return s, nil
}

// selfCollective is a collective over one rank: an all-gather or
// all-reduce in place is nothing, a reduce-scatter a reduction of one.
func (b *Backend) selfCollective(st Stream, k *executor.Kernel, a executor.Args) error {
	if k.Kind != schedule.OpReduceScatter {
		return nil
	}
	dst, src := a.Mem[executor.ArgDst].(*mem), a.Mem[executor.ArgSrc].(*mem)
	scale, err := reduceScale(k, 1)
	if err != nil {
		return err
	}
	return b.dev.Reduce(dst.ptr, []Ptr{src.ptr}, dst.bytes/k.DType.Size(), k.DType, scale, st)
}

func operand(m *member, arg int) *mem {
	x, _ := m.a.Mem[arg].(*mem)
	if x == nil {
		return &mem{}
	}
	return x
}

// reduceScale is the factor every input is multiplied by: 1/n rounded to
// the dtype for an average, the premul factor rounded likewise, 1 for a
// sum (the host reference's reducer).
func reduceScale(k *executor.Kernel, n int) (float32, error) {
	switch k.Reduce {
	case schedule.ReduceSum:
		return 1, nil
	case schedule.ReduceAvg:
		return float32(executor.RoundTo(k.DType, 1/float64(n))), nil
	case schedule.ReducePremulSum:
		if !(k.Factor > 0) {
			return 0, fmt.Errorf("%w: premul-sum with factor %v", errProtocol, k.Factor)
		}
		return float32(executor.RoundTo(k.DType, k.Factor)), nil
	}
	return 0, fmt.Errorf("%w: reduce op %s cannot reduce", errProtocol, k.Reduce)
}

// linkTime is how long bytes take over a link of bw bytes per second.
func linkTime(bytes int64, bw float64) time.Duration {
	return time.Duration(float64(bytes) / bw * 1e9)
}

var errProtocol = errors.New("protocol")

func failureKind(err error) executor.FailureKind {
	switch {
	case errors.Is(err, errProtocol):
		return executor.Protocol
	case errors.Is(err, errMismatch):
		return executor.Mismatch
	}
	return executor.Internal
}
