package schedule

import (
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
	// Memory is device memory on the GPU clock, one sample per allocation
	// or free in time order, with the live bytes of every buffer kind.
	Memory []KindMemoryPoint
	// Peak is the index in Memory of the largest total; PeakOp the
	// allocation that reached it.
	Peak, PeakOp int
}

// KindMemoryPoint is device memory at one instant by what it holds.
type KindMemoryPoint struct {
	Time  float64
	Op    int
	Bytes [numBufferKinds]int64
	Total int64
}

// NumBufferKinds is how many buffer kinds there are, for tables indexed by
// BufferKind.
const NumBufferKinds = int(numBufferKinds)

// GPUClocks derives the issue times and the GPU-clock memory curve of a
// simulated step. m must be the model sim was computed with.
func GPUClocks(p *Plan, m *Model, sim *Simulation) *Clocks {
	c := &Clocks{Issue: make([]float64, len(p.Ops)), IssueEnd: make([]float64, len(p.Ops)), PeakOp: -1}
	var ready [numStreams]float64
	type change struct {
		t     float64
		op    int
		kind  BufferKind
		bytes int64
	}
	var changes []change
	var live [numBufferKinds]int64
	for _, b := range p.Buffers {
		if b.Persistent && b.Pool != PoolHost {
			live[b.Kind] += b.Bytes
		}
	}
	cpu := 0.0
	for i := range p.Ops {
		o := &p.Ops[i]
		tm := sim.Ops[i]
		c.Issue[i] = cpu
		cpu += m.issueCost(o)
		s := o.Stream
		switch o.Kind {
		case OpAlloc, OpFree:
			b := &p.Buffers[o.Buffer]
			if b.Pool != PoolHost {
				d := b.Bytes
				if o.Kind == OpFree {
					d = -d
				}
				changes = append(changes, change{math.Max(ready[s], c.Issue[i]), i, b.Kind, d})
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
	sort.SliceStable(changes, func(a, b int) bool { return changes[a].t < changes[b].t })
	total := int64(0)
	for _, b := range live {
		total += b
	}
	c.Memory = append(c.Memory, KindMemoryPoint{Time: 0, Op: -1, Bytes: live, Total: total})
	for _, ch := range changes {
		live[ch.kind] += ch.bytes
		total += ch.bytes
		c.Memory = append(c.Memory, KindMemoryPoint{Time: ch.t, Op: ch.op, Bytes: live, Total: total})
		if total > c.Memory[c.Peak].Total {
			c.Peak, c.PeakOp = len(c.Memory)-1, ch.op
		}
	}
	return c
}
