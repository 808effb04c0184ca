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
func writers(l *Layout) [][]int {
	R, S, world := l.Replicate, l.Shard, l.World()
	w := make([][]int, len(l.Tensors))
	for ti := range l.Tensors {
		w[ti] = make([]int, l.Tensors[ti].Chunks(S))
		for k := range w[ti] {
			w[ti][k] = -2 // not seen yet
		}
	}
	size := make([]int64, world)
	for r := range world {
		k := r % S
		for ti := range l.Tensors {
			t := &l.Tensors[ti]
			kk := k
			if t.ShardDim < 0 {
				kk = 0
			}
			if w[ti][kk] != -2 {
				continue
			}
			n := t.Chunk(kk).Numel() * t.DType.Size()
			if t.ShardDim >= 0 && t.Chunk(kk).Numel() == 0 {
				w[ti][kk] = -1
				continue
			}
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
