package checkpoint

// writers decides which rank writes each chunk. Every rank's save plan
// lists the chunks it holds, in state-dict order; a chunk held by several
// ranks (an HSDP replica's shard, an optimizer's step count) is one entry
// that DCP writes once. torch.distributed.checkpoint's dedup_save_plans
// (_dedup_save_plans.py, torch ≥ 2.4, the default
// dedup_save_to_lowest_rank=False) visits the entries in the order they
// first appear over the ranks' plans (rank 0's, then rank 1's new ones, …)
// and gives each to the holder whose plan is smallest so far in bytes,
// the lowest rank on a tie (Python's min over a set of small ints visits
// them in ascending order). Chunks without elements are not written.
//
// Only the chunks with elements get a slot: they are the first ones of a
// tensor (filled), so a tensor of d rows over W > d ranks has d slots, not
// W, and a plan of 2²⁰ ranks needs no table of world × tensors. A rank past
// every tensor's filled chunks holds nothing new and is skipped.
func writers(l *Layout) [][]int {
	R, S, world := l.Replicate, l.Shard, l.World()
	w := make([][]int, len(l.Tensors))
	widest := 0
	for ti := range l.Tensors {
		w[ti] = make([]int, filled(&l.Tensors[ti], S))
		for k := range w[ti] {
			w[ti][k] = -2 // not seen yet
		}
		widest = max(widest, len(w[ti]))
	}
	size := make([]int64, world)
	for r := range world {
		k := r % S
		if k >= widest && r > 0 {
			continue // rank 0 took every replicated tensor
		}
		for ti := range l.Tensors {
			t := &l.Tensors[ti]
			kk := k
			if t.ShardDim < 0 {
				kk = 0
			}
			if kk >= len(w[ti]) || w[ti][kk] != -2 {
				continue
			}
			n := t.chunkNumel(kk) * t.DType.Size()
			// The holders: every rank for a replicated tensor, else the
			// ranks with shard index kk, one per replicate group. They
			// are visited in ascending order, so the first smallest wins.
			best := -1
			if t.ShardDim < 0 {
				for h := range world {
					if best < 0 || size[h] < size[best] {
						best = h
					}
				}
			} else {
				for rep := range R {
					h := rep*S + kk
					if best < 0 || size[h] < size[best] {
						best = h
					}
				}
			}
			w[ti][kk] = best
			size[best] += n
		}
	}
	return w
}

// filled is the number of chunks of t over shard ranks that hold elements:
// the first ones, as chunk k holds rows [k·c, min((k+1)·c, d)).
func filled(t *Tensor, shard int) int {
	switch {
	case t.Numel() == 0:
		return 0
	case t.ShardDim < 0:
		return 1
	default:
		return int(min(int64(shard), (t.Shape[t.ShardDim]+t.ChunkRows-1)/t.ChunkRows))
	}
}
