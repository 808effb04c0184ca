package schedule

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Verify proves the plan's program safe on every rank, from stream order
// and event edges alone:
//
//   - every buffer is allocated before any use and freed after every use,
//     and freed on the stream that allocated it (the caching allocator
//     hands a freed block to that stream's next allocation at once);
//   - every read of a buffer comes after the write it needs, and no write
//     can overtake an earlier read (so compute reads unsharded parameters
//     after their all-gather and copy-out, a reduce-scatter reads
//     gradients after they are written);
//   - the collectives are the ones the layout calls for: each group
//     gathered once per unshard, reduced once per synchronising
//     micro-batch (and all-reduced under HSDP), each over its process
//     group with the sizes its layout gives;
//   - every waited event is recorded (Check);
//   - what the program computes (dataflow.go): every op reads and writes
//     the kinds of buffer its kind calls for, in its own group; every
//     buffer is sized as its group's layout says; nothing reads a buffer
//     no op has written; each micro-batch runs every module's forward once
//     and its backward on that forward's activations; and every gradient
//     a group has reaches its one optimizer step, each micro-batch's once,
//     reduced.
//
// Because a plan is SPMD, every rank issues the same collectives in the
// same order on each process group by construction. Verify returns every
// problem, each naming the operations, buffer and streams involved.
func Verify(p *Plan) error {
	if err := Check(p); err != nil {
		return err
	}
	if len(p.Ops) > math.MaxInt32 {
		// The clocks hold op positions as int32; the planner writes at
		// most MaxOpsPerRank ops, far fewer.
		return fmt.Errorf("the plan has %d ops, more than Verify can order (%d)", len(p.Ops), math.MaxInt32)
	}
	v := &hbVerifier{p: p}
	v.operands()
	v.layouts()
	v.sizes()
	if len(v.errs) == 0 {
		// These follow buffers through ops whose operands are now known to
		// be of the right kinds.
		v.modules()
		v.gradients()
	}
	v.clocks()
	v.buffers()
	v.collectives()
	if len(v.errs) == 0 {
		return nil
	}
	sort.Strings(v.errs)
	if len(v.errs) > 12 {
		v.errs = append(v.errs[:12], fmt.Sprintf("… and %d more", len(v.errs)-12))
	}
	return fmt.Errorf("the plan is unsafe:\n  %s", strings.Join(v.errs, "\n  "))
}

type hbVerifier struct {
	p    *Plan
	errs []string
	// pos is each op's index within its stream; vc its vector clock: for
	// each stream, the position of the latest op there that happens before
	// it (-1 for none). int32, as the ops are (planner.MaxOpsPerRank), so
	// the clocks of the largest plan take 100 MB rather than 200.
	pos []int32
	vc  [][numStreams]int32
}

func (v *hbVerifier) errorf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Sprintf(format, args...))
}

// clocks computes vector clocks in program order, which Check guarantees
// is a valid order: a wait comes after its record.
func (v *hbVerifier) clocks() {
	p := v.p
	v.pos = make([]int32, len(p.Ops))
	v.vc = make([][numStreams]int32, len(p.Ops))
	var next [numStreams]int32
	var last [numStreams][numStreams]int32
	for s := range last {
		for t := range last[s] {
			last[s][t] = -1
		}
	}
	eventClock := make([][numStreams]int32, p.Events)
	// Host-stream work (allocations in pinned memory, syncs, the host
	// optimizer) is done by the CPU itself, so everything the CPU issues
	// afterwards, on any stream, comes after it.
	var cpu [numStreams]int32
	for t := range cpu {
		cpu[t] = -1
	}
	for i := range p.Ops {
		o := &p.Ops[i]
		s := o.Stream
		c := last[s]
		for t, x := range cpu {
			c[t] = max(c[t], x)
		}
		if o.Kind == OpWait || o.Kind == OpSync {
			for t, x := range eventClock[o.Event] {
				c[t] = max(c[t], x)
			}
		}
		v.pos[i] = next[s]
		c[s] = next[s]
		next[s]++
		v.vc[i] = c
		last[s] = c
		if s == StreamHost {
			cpu = c
		}
		if o.Kind == OpRecord {
			eventClock[o.Event] = c
		}
	}
}

// hb reports whether op a happens before op b.
func (v *hbVerifier) hb(a, b int) bool {
	if a == b {
		return true
	}
	return v.vc[b][v.p.Ops[a].Stream] >= v.pos[a]
}

func (v *hbVerifier) describe(i int) string {
	o := &v.p.Ops[i]
	what := o.Kind.String()
	if o.Group >= 0 {
		what += " " + v.p.Groups[o.Group].Label()
	}
	if o.Module >= 0 && int(o.Module) < len(v.p.Modules) {
		what += " (" + v.p.Modules[o.Module] + ")"
	}
	return fmt.Sprintf("op %d [%s on %s, %s mb%d]", i, what, o.Stream, o.Phase, o.Micro)
}

// access is one use of a buffer by an op.
type access struct {
	op    int32
	write bool
}

func (v *hbVerifier) buffers() {
	p := v.p
	alloc := make([]int32, len(p.Buffers))
	free := make([]int32, len(p.Buffers))
	for i := range alloc {
		alloc[i], free[i] = -1, -1
	}
	scratch := make([]bool, len(p.Buffers))
	// Every buffer's accesses in program order, all in one list: start[b]
	// to start[b+1] are buffer b's. Counted first, then placed, so the
	// largest plan's millions of accesses take one allocation.
	start := make([]int, len(p.Buffers)+1)
	eachAccess(p, func(_ int, b int32, _ bool) { start[b+1]++ })
	for b := range p.Buffers {
		start[b+1] += start[b]
	}
	accesses := make([]access, start[len(p.Buffers)])
	fill := slices.Clone(start[:len(p.Buffers)])
	eachAccess(p, func(i int, b int32, write bool) {
		accesses[fill[b]] = access{int32(i), write}
		fill[b]++
	})
	for i := range p.Ops {
		o := &p.Ops[i]
		switch o.Kind {
		case OpAlloc:
			alloc[o.Buffer] = int32(i)
		case OpFree:
			free[o.Buffer] = int32(i)
			if want := StreamOfPool(p.Buffers[o.Buffer].Pool); o.Stream != want {
				v.errorf("buffer %q is freed on the %s stream but belongs to the %s pool: the allocator can give its block to the next %s allocation while %s work still uses it; free it on %s after waiting for its uses",
					p.Buffers[o.Buffer].Name, o.Stream, p.Buffers[o.Buffer].Pool, want, o.Stream, want)
			}
		case OpRecord, OpWait, OpSync:
		default:
			for _, u := range p.OpUses(o) {
				// A backward recomputes into its scratch buffer: for order
				// it counts as a read, but it needs nothing written there
				// first.
				if p.Buffers[u].Kind == BufRecompute {
					scratch[u] = true
				}
			}
		}
	}
	var readsSinceWrite []int
	for b := range p.Buffers {
		name := p.Buffers[b].Name
		lastWrite := -1
		readsSinceWrite = readsSinceWrite[:0]
		for j, u := range accesses[start[b]:start[b+1]] {
			op := int(u.op)
			if j == 0 && !u.write && !p.Buffers[b].Persistent && !scratch[b] {
				v.errorf("%s reads buffer %q, which no op has written since its allocation", v.describe(op), name)
			}
			if a := int(alloc[b]); a >= 0 && !v.hb(a, op) {
				v.errorf("%s uses buffer %q before its allocation %s is ordered before it", v.describe(op), name, v.describe(a))
			}
			if f := int(free[b]); f >= 0 && !v.hb(op, f) {
				v.errorf("buffer %q is freed by %s while %s may still use it: no event orders the use before the free", name, v.describe(f), v.describe(op))
			}
			if lastWrite >= 0 && !v.hb(lastWrite, op) {
				v.errorf("%s reads or writes buffer %q without waiting for %s, which writes it", v.describe(op), name, v.describe(lastWrite))
			}
			if u.write {
				for _, r := range readsSinceWrite {
					if !v.hb(r, op) {
						v.errorf("%s overwrites buffer %q while %s may still read it", v.describe(op), name, v.describe(r))
					}
				}
				lastWrite, readsSinceWrite = op, readsSinceWrite[:0]
			} else {
				readsSinceWrite = append(readsSinceWrite, op)
			}
		}
	}
}

// eachAccess calls fn for every buffer an op other than an allocation,
// free or event reads (its source, then its uses) or writes (its target),
// in program order.
func eachAccess(p *Plan, fn func(op int, buf int32, write bool)) {
	for i := range p.Ops {
		o := &p.Ops[i]
		switch o.Kind {
		case OpAlloc, OpFree, OpRecord, OpWait, OpSync:
			continue
		}
		if o.Source >= 0 {
			fn(i, o.Source, false)
		}
		for _, u := range p.OpUses(o) {
			fn(i, u, false)
		}
		if o.Buffer >= 0 {
			fn(i, o.Buffer, true)
		}
	}
}

// collectives checks every collective against the groups' layouts and
// policies, and that each group is gathered and reduced as often as the
// step needs.
func (v *hbVerifier) collectives() {
	p := v.p
	W, R := p.Cluster.Shard, p.Cluster.Replicate
	type count struct{ gather, reduce, allReduce int }
	perMicro := map[[2]int]*count{}  // (group, micro)
	pendingGather := map[int32]int{} // group -> op of a gather not yet copied out
	// A gather nothing waited for (a mistargeted backward prefetch) is
	// waited and dropped, as FSDP2's finalize_backward does: freeing its
	// output ends it as a copy-out would.
	gatherOf := map[int32]int32{} // output buffer -> group of a pending gather
	for i := range p.Ops {
		o := &p.Ops[i]
		if o.Kind == OpFree {
			if g, ok := gatherOf[o.Buffer]; ok {
				delete(gatherOf, o.Buffer)
				delete(pendingGather, g)
			}
		}
		if o.Group < 0 {
			continue
		}
		g := &p.Groups[o.Group]
		key := [2]int{int(o.Group), int(o.Micro)}
		if perMicro[key] == nil {
			perMicro[key] = &count{}
		}
		c := perMicro[key]
		gatherBytes := g.ShardBytes * int64(W)
		switch o.Kind {
		case OpAllGather:
			c.gather++
			if prev, ok := pendingGather[o.Group]; ok {
				v.errorf("%s gathers group %s again before %s was copied out", v.describe(i), (g).Label(), v.describe(prev))
			}
			pendingGather[o.Group] = i
			gatherOf[o.Buffer] = o.Group
			wantPG, wantSize := PGShard, W
			if o.PG == PGPostForward {
				wantPG, wantSize = PGPostForward, g.Policy.ReshardTo
				if g.Policy.Reshard != ReshardTo {
					wantPG = PGShard
				}
			}
			if o.PG != wantPG || int(o.PGSize) != wantSize {
				v.errorf("%s runs over %s(%d); the group's layout needs %s(%d)", v.describe(i), o.PG, o.PGSize, wantPG, wantSize)
			}
			if o.Bytes != gatherBytes || o.DType != g.Policy.Param {
				v.errorf("%s moves %d bytes of %s; the layout gives %d bytes of %s", v.describe(i), o.Bytes, o.DType, gatherBytes, g.Policy.Param)
			}
		case OpCopyOut:
			if prev, ok := pendingGather[o.Group]; ok {
				delete(gatherOf, p.Ops[prev].Buffer)
			}
			delete(pendingGather, o.Group)
		case OpReduceScatter:
			c.reduce++
			want := g.GradShardNumel * int64(W) * g.Policy.Reduce.Size()
			if o.PG != PGShard || int(o.PGSize) != W {
				v.errorf("%s runs over %s(%d); gradients are reduce-scattered over shard(%d)", v.describe(i), o.PG, o.PGSize, W)
			}
			if o.Bytes != want || o.DType != g.Policy.Reduce {
				v.errorf("%s reduces %d bytes of %s; the layout gives %d bytes of %s", v.describe(i), o.Bytes, o.DType, want, g.Policy.Reduce)
			}
			if o.Reduce != g.Policy.ReduceScatterOp {
				v.errorf("%s reduces with %s; the group's policy says %s", v.describe(i), o.Reduce, g.Policy.ReduceScatterOp)
			} else if o.Reduce == ReducePremulSum && o.Factor != g.Policy.PremulFactor {
				v.errorf("%s pre-multiplies by %g; the group's policy says %g", v.describe(i), o.Factor, g.Policy.PremulFactor)
			}
		case OpAllReduce:
			c.allReduce++
			if o.PG != PGReplicate || int(o.PGSize) != R {
				v.errorf("%s runs over %s(%d); HSDP all-reduces over replicate(%d)", v.describe(i), o.PG, o.PGSize, R)
			}
			if o.Reduce != g.Policy.AllReduceOp {
				v.errorf("%s reduces with %s; the group's policy says %s", v.describe(i), o.Reduce, g.Policy.AllReduceOp)
			}
		}
	}
	for g := range p.Groups {
		grp := &p.Groups[g]
		if grp.GradShardNumel == 0 {
			continue
		}
		// Every synchronising micro-batch reduces each trainable group
		// exactly once: all of them, or with unsharded accumulation only
		// the last.
		for mb := 0; mb < int(p.Train.GradAccum); mb++ {
			c := perMicro[[2]int{g, mb}]
			if c == nil {
				c = &count{}
			}
			want := 1
			if p.Train.AccumulateUnsharded && mb < int(p.Train.GradAccum)-1 {
				want = 0
			}
			if c.reduce != want {
				v.errorf("group %s is reduce-scattered %d times in micro-batch %d; it must be %d", (grp).Label(), c.reduce, mb, want)
			}
			wantAR := 0
			if R > 1 {
				wantAR = want
			}
			if c.allReduce != wantAR {
				v.errorf("group %s is all-reduced %d times in micro-batch %d; it must be %d", (grp).Label(), c.allReduce, mb, wantAR)
			}
		}
	}
}

// StreamOfPool is the stream whose allocations a pool serves: the inverse
// of PoolOf, and the stream a buffer of that pool must be freed on.
func StreamOfPool(p Pool) Stream {
	switch p {
	case PoolCopyIn:
		return StreamCopyIn
	case PoolReduceScatter:
		return StreamReduceScatter
	case PoolAllReduce:
		return StreamAllReduce
	case PoolHost:
		return StreamHost
	}
	return StreamCompute
}
