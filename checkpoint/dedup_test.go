package checkpoint

import (
	"fmt"
	"testing"
)

// Every chunk with elements is written once, by a rank that holds it; the
// ranks' bytes add up to the checkpoint.
func TestWritersOnce(t *testing.T) {
	for _, tc := range []struct {
		world int
		mesh  string
	}{{1, ""}, {4, ""}, {12, ""}, {8, "2x4"}, {12, "3x4"}, {4, "4x1"}} {
		t.Run(fmt.Sprintf("%d%s", tc.world, tc.mesh), func(t *testing.T) {
			l := tinyLayout(t, tc.world, tc.mesh)
			for ti, x := range l.Tensors {
				for k, w := range l.Writer[ti] {
					switch {
					case x.ShardDim >= 0 && x.Chunk(k).Numel() == 0:
						if w != -1 {
							t.Errorf("%s chunk %d is empty but rank %d writes it", x.FQN, k, w)
						}
					case w < 0 || w >= l.World():
						t.Errorf("%s chunk %d: writer %d", x.FQN, k, w)
					case x.ShardDim >= 0 && w%l.Shard != k:
						t.Errorf("%s chunk %d: rank %d does not hold it (shard index %d)", x.FQN, k, w, w%l.Shard)
					}
				}
			}
			var sum int64
			for _, w := range l.rankWrites() {
				sum += w.model + w.optim
			}
			if m, o := l.Totals(); sum != m+o {
				t.Errorf("ranks write %d bytes, the checkpoint is %d", sum, m+o)
			}
		})
	}
}

// dedup_save_plans gives each duplicated chunk to the holder with the
// smallest plan so far, the lowest rank on a tie. On a 2×2 mesh the
// embedding's chunk 0 (first in rank 0's plan, every plan empty) goes to
// rank 0, the next tensor's chunk 0 to rank 2 (rank 0 is no longer
// empty); the first step count, held by every rank, goes to the lowest
// rank with the fewest bytes.
func TestDedupGreedy(t *testing.T) {
	l := tinyLayout(t, 4, "2x2")
	first, second := l.Tensors[0], l.Tensors[1]
	if l.Writer[0][0] != 0 || l.Writer[1][0] != 2 {
		t.Errorf("%s chunk 0 written by %d (want 0), %s chunk 0 by %d (want 2)", first.FQN, l.Writer[0][0], second.FQN, l.Writer[1][0])
	}
	// Replay the rule by hand over the plans in rank order.
	size := make([]int64, l.World())
	done := map[[2]int]bool{}
	for r := range l.World() {
		for ti, x := range l.Tensors {
			k := r % l.Shard
			if x.ShardDim < 0 {
				k = 0
			}
			n := x.Chunk(k).Numel() * x.DType.Size()
			if done[[2]int{ti, k}] || x.ShardDim >= 0 && n == 0 {
				continue
			}
			done[[2]int{ti, k}] = true
			best := -1
			for h := range l.World() {
				holds := x.ShardDim < 0 || h%l.Shard == k
				if holds && (best < 0 || size[h] < size[best]) {
					best = h
				}
			}
			if l.Writer[ti][k] != best {
				t.Errorf("%s chunk %d: writer %d, the rule gives %d", x.FQN, k, l.Writer[ti][k], best)
			}
			size[best] += n
		}
	}
	// The replicas share the writing: neither writes everything.
	writes := l.rankWrites()
	for k := range l.Shard {
		a, b := writes[k].model, writes[l.Shard+k].model
		if a == 0 || b == 0 {
			t.Errorf("shard %d: replicas write %d and %d model bytes; dedup should split them", k, a, b)
		}
	}
}
