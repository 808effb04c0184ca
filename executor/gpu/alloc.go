package gpu

import (
	"fmt"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/schedule"
)

// mem is one block of a rank's pool.
type mem struct {
	ptr   Ptr
	bytes int64
	pool  schedule.Pool
}

func (m *mem) Bytes() int64 { return m.bytes }

// pool is a caching allocator pool, as PyTorch's: a freed block goes back
// to the pool at once and serves the next allocation of the same size;
// its reuse is ordered by the pool's stream, on which the plan allocates
// and frees. Blocks are never returned to the device before Close.
type pool struct {
	free  map[int64][]*mem
	all   []*mem
	stats executor.PoolStats
}

func (b *Backend) alloc(r *rank, p schedule.Pool, bytes int64) (*mem, error) {
	pl := &r.pools[p]
	if pl.free == nil {
		pl.free = map[int64][]*mem{}
	}
	var m *mem
	if list := pl.free[bytes]; len(list) > 0 {
		m = list[len(list)-1]
		pl.free[bytes] = list[:len(list)-1]
	} else {
		var ptr Ptr
		var err error
		// Zero-byte buffers still get a distinct block, as the host's do.
		n := max(bytes, 1)
		if p == schedule.PoolHost {
			ptr, err = b.dev.AllocHost(n)
		} else {
			ptr, err = b.dev.Alloc(n)
		}
		if err != nil {
			return nil, fmt.Errorf("rank %d, pool %s: allocating %d bytes: %w", r.rank, p, bytes, err)
		}
		m = &mem{ptr: ptr, bytes: bytes, pool: p}
		pl.all = append(pl.all, m)
		pl.stats.Reserved += bytes
	}
	pl.stats.Allocs++
	pl.stats.Live += bytes
	pl.stats.Peak = max(pl.stats.Peak, pl.stats.Live)
	return m, nil
}

func (b *Backend) release(r *rank, m *mem) {
	pl := &r.pools[m.pool]
	pl.stats.Live -= m.bytes
	pl.free[m.bytes] = append(pl.free[m.bytes], m)
}

// exactSizeReserved is what the pools above reserve for one rank of p,
// outside the host pool: the persistent buffers, and the plan's
// allocations and frees replayed in
// program order, each allocation served by a freed block of exactly its
// size or else reserving a new one. The plan frees every block it
// allocates within a step, so one step's replay is every step's. It is
// the backend's own policy, the like-for-like model of
// Measurement.AllocatorReserved; the simulator's prediction models
// PyTorch's caching allocator instead (rounding, splitting, 2 MiB
// segments), which reserves differently (issue 29, N5).
func exactSizeReserved(p *schedule.Plan) int64 {
	free := map[[2]int64]int{} // (pool, bytes): freed blocks
	var reserved int64
	// The persistent buffers (parameters, gradients, optimizer state)
	// are allocated once, at set-up, and never freed.
	for i := range p.Buffers {
		if buf := &p.Buffers[i]; buf.Persistent && buf.Pool != schedule.PoolHost {
			reserved += buf.Bytes
		}
	}
	for i := range p.Ops {
		o := &p.Ops[i]
		if (o.Kind != schedule.OpAlloc && o.Kind != schedule.OpFree) || o.Buffer < 0 || int(o.Buffer) >= len(p.Buffers) {
			continue
		}
		buf := &p.Buffers[o.Buffer]
		if buf.Pool == schedule.PoolHost {
			continue
		}
		key := [2]int64{int64(buf.Pool), buf.Bytes}
		switch {
		case o.Kind == schedule.OpFree:
			free[key]++
		case free[key] > 0:
			free[key]--
		default:
			reserved += buf.Bytes
		}
	}
	return reserved
}
