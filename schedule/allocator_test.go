package schedule

import "testing"

const mib = 1 << 20

// TestCachingAllocator: what PyTorch's caching allocator reserves for a
// sequence of allocations and frees (buffer > 0 allocates that many
// bytes, < 0 frees buffer -n), in fixed segments and in expandable ones.
func TestCachingAllocator(t *testing.T) {
	type step struct {
		buf   int
		bytes int64 // 0 frees buf
	}
	for _, tc := range []struct {
		name         string
		steps        []step
		budget       int64
		fixed, expan int64 // reserved at the end
		peak         int64 // fixed segments' peak, when it differs
	}{
		{"small requests share a 2 MiB segment", []step{{1, 100}, {2, 100}, {3, 1 << 20}}, 0, 2 * mib, 2 * mib, 0},
		{"1-10 MiB requests share a 20 MiB segment", []step{{1, 5 * mib}, {2, 5 * mib}, {3, 5 * mib}}, 0, 20 * mib, 20 * mib, 0},
		{"a large request rounds to 2 MiB", []step{{1, 11*mib + 1}}, 0, 12 * mib, 20 * mib, 0},
		{"a freed block too small for the next request", []step{{1, 30 * mib}, {1, 0}, {2, 50 * mib}}, 0, 80 * mib, 60 * mib, 0},
		{"a freed block reused", []step{{1, 50 * mib}, {1, 0}, {2, 30 * mib}}, 0, 50 * mib, 60 * mib, 0},
		// Fixed: three 30 MiB segments, and freeing two frees no 60 MiB
		// block (segments never merge). Expandable: one segment whose
		// freed neighbours merge into a 60 MiB block.
		{"freed neighbours merge only within a segment", []step{{1, 30 * mib}, {2, 30 * mib}, {3, 30 * mib}, {1, 0}, {2, 0}, {4, 60 * mib}},
			0, 150 * mib, 100 * mib, 0},
		{"out of memory: the cache is freed and the request retried", []step{{1, 60 * mib}, {1, 0}, {2, 70 * mib}},
			100 * mib, 70 * mib, 80 * mib, 70 * mib},
	} {
		for _, expandable := range []bool{false, true} {
			a := newCachingAllocator(expandable, tc.budget)
			for _, s := range tc.steps {
				if s.bytes == 0 {
					a.release(PoolCompute, s.buf)
				} else {
					a.alloc(PoolCompute, s.buf, s.bytes)
				}
			}
			want := tc.fixed
			if expandable {
				want = tc.expan
			}
			if a.total != want || a.reserved[PoolCompute] != want {
				t.Errorf("%s (expandable %t): reserves %d MiB, want %d MiB", tc.name, expandable, a.total/mib, want/mib)
			}
			if !expandable && tc.peak > 0 && a.peak != tc.peak {
				t.Errorf("%s: peak %d MiB, want %d MiB", tc.name, a.peak/mib, tc.peak/mib)
			}
		}
	}
	// Pools do not share blocks: a block freed in one serves no other.
	a := newCachingAllocator(false, 0)
	a.alloc(PoolCompute, 1, 50*mib)
	a.release(PoolCompute, 1)
	a.alloc(PoolCopyIn, 2, 50*mib)
	if a.total != 100*mib {
		t.Errorf("two pools reserve %d MiB, want 100", a.total/mib)
	}
}
