package schedule

// The caching allocator: what PyTorch's CUDA caching allocator reserves
// (torch.cuda.max_memory_reserved) for the plan's allocations and frees
// in program order. Its rules, as c10/cuda/CUDACachingAllocator.cpp
// states them (docs/cost-model.md, "Memory"):
//
//   - every request is rounded up to a multiple of 512 B (kMinBlockSize);
//   - requests up to 1 MiB (kSmallSize) use the small pool, larger ones
//     the large pool; blocks are never shared between streams, so each
//     of the plan's device pools (one per stream) has its own two;
//   - a request takes the smallest free block of its pool and stream
//     that holds it (lowest address on ties) and splits off the rest
//     when the rest is at least 512 B (small pool) or more than 1 MiB
//     (large pool);
//   - with no such block it reserves a segment: 2 MiB (kSmallBuffer) for
//     a small request, 20 MiB (kLargeBuffer) below 10 MiB
//     (kMinLargeAlloc), else the request rounded up to 2 MiB
//     (kRoundLarge);
//   - a freed block merges with free neighbours of its segment; segments
//     are kept (cached), so reserved memory only grows.
//
// With expandable_segments each pool and stream has one segment that
// grows by mapping pages (2 MiB small, 20 MiB large) at its end: a request
// no free block holds extends a free block at the end, or maps new pages
// after the last one; any remainder at least 512 B is split off.
//
// When reserving more would pass the budget (cudaMalloc failing on a
// full card), PyTorch frees its cached blocks and retries
// (release_cached_blocks): whole free segments are returned, and with
// expandable_segments free blocks' pages are unmapped, to be mapped again
// when a block is used. If the request still does not fit, the run is out
// of memory; the model then keeps reserving, so the peak says by how much.

const (
	minBlockSize  = 512
	smallSize     = 1 << 20
	smallBuffer   = 2 << 20
	largeBuffer   = 20 << 20
	minLargeAlloc = 10 << 20
	roundLarge    = 2 << 20
)

type block struct {
	size       int64
	free       bool
	small      bool   // in the small pool
	prev, next *block // neighbours in the same segment, by address
	segment    int    // the segment's number, for a deterministic order
	offset     int64
	// unmapped is how much of a free block's memory was returned to the
	// device (expandable segments after an out-of-memory retry).
	unmapped int64
	// at is the block's index in its pool's free list, so taking it out
	// does not search the list.
	at int
}

// kindOf indexes a device pool's two block pools: 0 large, 1 small.
func kindOf(small bool) int {
	if small {
		return 1
	}
	return 0
}

type cachingAllocator struct {
	expandable bool
	budget     int64 // what the allocator may reserve in all; 0: no limit
	total      int64 // reserved over every pool
	peak       int64
	retries    int // times the cache was freed to stay within the budget
	// free holds each pool's free blocks, [pool][kind], in no order.
	free [numPools][2][]*block
	// tail is the last block of each expandable segment.
	tail     [numPools][2]*block
	segments int
	reserved [numPools]int64
	used     []*block // by buffer; nil where none
}

func newCachingAllocator(expandable bool, budget int64) *cachingAllocator {
	return &cachingAllocator{expandable: expandable, budget: budget}
}

// push adds b to the pool's free blocks.
func (a *cachingAllocator) push(pool Pool, k int, b *block) {
	b.at = len(a.free[pool][k])
	a.free[pool][k] = append(a.free[pool][k], b)
}

// grow adds n reserved bytes to pool, first freeing the cache when the
// budget would be passed.
func (a *cachingAllocator) grow(pool Pool, n int64) {
	if a.budget > 0 && a.total+n > a.budget {
		a.releaseCached()
	}
	a.reserved[pool] += n
	a.total += n
	a.peak = max(a.peak, a.total)
}

// releaseCached returns what no live block uses: whole free segments, or
// the free blocks of expandable segments.
func (a *cachingAllocator) releaseCached() {
	a.retries++
	for pool := range a.free {
		for k := range a.free[pool] {
			kept := a.free[pool][k][:0]
			for _, b := range a.free[pool][k] {
				switch {
				case a.expandable:
					a.reserved[pool] -= b.size - b.unmapped
					a.total -= b.size - b.unmapped
					b.unmapped = b.size
					b.at = len(kept)
					kept = append(kept, b)
				case b.prev == nil && b.next == nil:
					a.reserved[pool] -= b.size
					a.total -= b.size
				default:
					b.at = len(kept)
					kept = append(kept, b)
				}
			}
			a.free[pool][k] = kept
		}
	}
}

func roundSize(n int64) int64 {
	if n < minBlockSize {
		return minBlockSize
	}
	return (n + minBlockSize - 1) / minBlockSize * minBlockSize
}

func allocationSize(n int64) int64 {
	switch {
	case n <= smallSize:
		return smallBuffer
	case n < minLargeAlloc:
		return largeBuffer
	}
	return (n + roundLarge - 1) / roundLarge * roundLarge
}

// alloc gives buffer buf a block of n bytes in pool.
func (a *cachingAllocator) alloc(pool Pool, buf int, n int64) {
	if n <= 0 {
		return
	}
	size := roundSize(n)
	small := size <= smallSize
	k := kindOf(small)
	b := a.bestFit(pool, k, size)
	if b == nil {
		b = a.reserve(pool, small, size)
	}
	a.take(pool, k, b)
	if b.unmapped > 0 {
		// Map the block's pages again.
		a.grow(pool, b.unmapped)
		b.unmapped = 0
	}
	rest := b.size - size
	split := rest > smallSize
	if small || a.expandable {
		split = rest >= minBlockSize
	}
	if split {
		r := &block{size: rest, free: true, small: small, prev: b, next: b.next, segment: b.segment, offset: b.offset + size}
		if b.next != nil {
			b.next.prev = r
		}
		b.next, b.size = r, size
		if a.tail[pool][k] == b {
			a.tail[pool][k] = r
		}
		a.push(pool, k, r)
	}
	for buf >= len(a.used) {
		a.used = append(a.used, nil)
	}
	a.used[buf] = b
}

// bestFit is the smallest free block of the pool that holds size, the
// lowest-addressed among equals.
func (a *cachingAllocator) bestFit(pool Pool, k int, size int64) *block {
	var best *block
	for _, b := range a.free[pool][k] {
		if b.size < size {
			continue
		}
		if best == nil || b.size < best.size || b.size == best.size &&
			(b.segment < best.segment || b.segment == best.segment && b.offset < best.offset) {
			best = b
		}
	}
	return best
}

// reserve gets a free block of at least size from the device: a new
// segment, or pages mapped at the end of the expandable one.
func (a *cachingAllocator) reserve(pool Pool, small bool, size int64) *block {
	k := kindOf(small)
	if !a.expandable {
		seg := allocationSize(size)
		a.grow(pool, seg)
		a.segments++
		b := &block{size: seg, free: true, small: small, segment: a.segments}
		a.push(pool, k, b)
		return b
	}
	page := int64(largeBuffer)
	if small {
		page = smallBuffer
	}
	t := a.tail[pool][k]
	if t == nil {
		a.segments++
		t = &block{free: true, small: small, segment: a.segments}
		a.tail[pool][k] = t
		a.push(pool, k, t)
	} else if !t.free {
		n := &block{free: true, small: small, prev: t, segment: t.segment, offset: t.offset + t.size}
		t.next, t = n, n
		a.tail[pool][k] = t
		a.push(pool, k, t)
	}
	grow := (size - t.size + page - 1) / page * page
	t.size += grow
	t.unmapped += grow
	return t
}

// take removes b from the pool's free blocks: the last one takes its
// place.
func (a *cachingAllocator) take(pool Pool, k int, b *block) {
	list := a.free[pool][k]
	if i := b.at; i < len(list) && list[i] == b {
		last := list[len(list)-1]
		list[i], last.at = last, i
		a.free[pool][k] = list[:len(list)-1]
	}
	b.free = false
}

// absorb merges block right into its left neighbour left, in place.
func (a *cachingAllocator) absorb(pool Pool, k int, left, right *block) {
	left.unmapped += right.unmapped
	left.size += right.size
	left.next = right.next
	if right.next != nil {
		right.next.prev = left
	}
	if a.tail[pool][k] == right {
		a.tail[pool][k] = left
	}
}

// release frees buffer buf's block and merges it with free neighbours.
func (a *cachingAllocator) release(pool Pool, buf int) {
	if buf < 0 || buf >= len(a.used) || a.used[buf] == nil {
		return
	}
	b := a.used[buf]
	a.used[buf] = nil
	k := kindOf(b.small)
	if p := b.prev; p != nil && p.free {
		a.take(pool, k, p)
		a.absorb(pool, k, p, b)
		b = p
	}
	if n := b.next; n != nil && n.free {
		a.take(pool, k, n)
		a.absorb(pool, k, b, n)
	}
	b.free = true
	a.push(pool, k, b)
}
