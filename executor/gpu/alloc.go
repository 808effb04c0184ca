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
