package schedule

import (
	"iter"
	"math"
	"sort"
)

// Clocks places a simulated step's bookkeeping on the two clocks a profiler
// shows: when the CPU issued each operation, and when each allocation and
// free takes effect on the GPU. The simulation itself accounts memory when
// the CPU asks the caching allocator (that is what bounds reservation), but
// a timeline next to the streams needs memory on the GPU clock: a buffer is
// in use from when its stream reaches the allocation until its stream
// reaches the free.
type Clocks struct {
	// Issue[i] is when the CPU issued op i; IssueEnd[i] when it returned
	// (later than Issue[i] + its launch cost for a blocking sync or a
	// host-stream op the CPU runs itself).
	Issue, IssueEnd []float64
	// Memory is device memory on the GPU clock as changes in time order:
	// Memory[0] is the start of the step (Op -1, no change; Start holds
	// the persistent buffers), then one per allocation or free.
	// MemoryPoints adds them up into the live bytes of every buffer kind.
	// A change is 24 bytes where a point is 136: a plan of millions of
	// operations keeps its changes, not its points.
	Memory []MemoryChange
	Start  [numBufferKinds]int64
	// Peak is the index in Memory of the largest total, PeakOp the
	// allocation that reached it, and PeakPoint the live bytes then.
	Peak, PeakOp int
	PeakPoint    KindMemoryPoint
}

// MemoryChange is one allocation or free taking effect on the GPU clock.
type MemoryChange struct {
	Time  float64
	Bytes int64 // negative for a free
	Op    int32 // -1 for the start of the step
	Kind  BufferKind
}

// KindMemoryPoint is device memory at one instant by what it holds.
type KindMemoryPoint struct {
	Time  float64
	Op    int
	Bytes [numBufferKinds]int64
	Total int64
}

// MemoryPoints yields the live device memory after each of Memory's
// changes, with its index in Memory.
func (c *Clocks) MemoryPoints() iter.Seq2[int, KindMemoryPoint] {
	return func(yield func(int, KindMemoryPoint) bool) {
		pt := KindMemoryPoint{Bytes: c.Start}
		for _, b := range c.Start {
			pt.Total += b
		}
		for j, ch := range c.Memory {
			pt.Time, pt.Op = ch.Time, int(ch.Op)
			pt.Bytes[ch.Kind] += ch.Bytes
			pt.Total += ch.Bytes
			if !yield(j, pt) {
				return
			}
		}
	}
}

// NumBufferKinds is how many buffer kinds there are, for tables indexed by
// BufferKind.
const NumBufferKinds = int(numBufferKinds)

// GPUClocks derives the issue times and the GPU-clock memory curve of a
// simulated step. m must be the model sim was computed with.
func GPUClocks(p *Plan, m *Model, sim *Simulation) *Clocks {
	c := &Clocks{Issue: make([]float64, len(p.Ops)), IssueEnd: make([]float64, len(p.Ops)), PeakOp: -1}
	var ready [numStreams]float64
	n := 1
	for i := range p.Ops {
		if o := &p.Ops[i]; (o.Kind == OpAlloc || o.Kind == OpFree) && p.Buffers[o.Buffer].Pool != PoolHost {
			n++
		}
	}
	changes := make([]MemoryChange, 1, n)
	changes[0] = MemoryChange{Op: -1}
	for _, b := range p.Buffers {
		if b.Persistent && b.Pool != PoolHost {
			c.Start[b.Kind] += b.Bytes
		}
	}
	cpu := 0.0
	for i := range p.Ops {
		o := &p.Ops[i]
		tm := sim.Ops[i]
		c.Issue[i] = cpu
		cpu += m.issueCost(o.Kind)
		s := o.Stream
		switch o.Kind {
		case OpAlloc, OpFree:
			b := &p.Buffers[o.Buffer]
			if b.Pool != PoolHost {
				d := b.Bytes
				if o.Kind == OpFree {
					d = -d
				}
				// int32 holds any op index: planner.MaxOpsPerRank is 2²².
				changes = append(changes, MemoryChange{math.Max(ready[s], c.Issue[i]), d, int32(i), b.Kind})
			}
		case OpSync:
			cpu = math.Max(cpu, tm.End)
		case OpRecord:
		default:
			ready[s] = math.Max(ready[s], tm.End)
			if s == StreamHost {
				cpu = math.Max(cpu, tm.End)
			}
		}
		c.IssueEnd[i] = cpu
	}
	rest := changes[1:]
	sort.SliceStable(rest, func(a, b int) bool { return rest[a].Time < rest[b].Time })
	c.Memory = changes
	for j, pt := range c.MemoryPoints() {
		if j == 0 || pt.Total > c.PeakPoint.Total {
			c.Peak, c.PeakPoint = j, pt
		}
	}
	c.PeakOp = c.PeakPoint.Op
	return c
}
