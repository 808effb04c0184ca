package checkpoint

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"sort"
)

// A new rank's reads depend only on its shard index k (visit), and every
// k past the last chunk with elements of any sharded tensor reads the same:
// the replicated tensors (the optimizer's step counts) alone. So the ranks
// fall into at most one class per chunk with elements plus one: a plan of
// 2²⁰ ranks of gpt2-124m has 50,258 classes, not 2²⁰ ranks to visit for
// each figure. The figures that depend on the rank beyond its class — the
// bytes read from another node's files — are kept per old node.
//
// A class's figures are split into the reads of the replicated tensors,
// which every class shares (common), and those of the sharded tensors
// (own), so a plan of many parameters keeps their step counts' sources
// once, not once a class.

// nodeBytes is what a set of reads takes from files one old node wrote.
type nodeBytes struct {
	node  int
	bytes int64
}

// readSet sums a set of reads.
type readSet struct {
	written // model, optimizer and device bytes (device: the host copy)
	reads   int
	byNode  []nodeBytes
	total   int64 // model + optim
	ranks   []int // the old ranks read, sorted
}

// at is the bytes the set reads from old node n's files.
func (s *readSet) at(n int) int64 {
	i, ok := slices.BinarySearchFunc(s.byNode, n, func(e nodeBytes, n int) int { return e.node - n })
	if !ok {
		return 0
	}
	return s.byNode[i].bytes
}

// remote is the bytes the set reads from files written on a node other
// than new node n (new node n is the machine old node n was).
func (s *readSet) remote(n int) int64 { return s.total - s.at(n) }

// readClass is the reads of the ranks of one class.
type readClass struct {
	own   readSet // the sharded tensors' reads (ranks: those not in common)
	files int     // distinct old ranks read
	from  string  // rangesOf the old ranks read
	print uint64  // readsPrint
}

// buildClasses sums the reads of each class of rs's new ranks.
func (rs *Reshard) buildClasses() {
	new := rs.New
	maxFilled := 0
	for ti := range new.Tensors {
		if new.Tensors[ti].ShardDim >= 0 {
			maxFilled = max(maxFilled, rs.filled[ti])
		}
	}
	rs.maxFilled = maxFilled
	n := min(new.Shard, maxFilled+1)
	rs.classes = make([]readClass, n)
	inCommon := make(map[int]bool)
	oldG := rs.Old.GPUsPerNode
	add := func(s *readSet, ti, oi, ok int, numel int64, byNode map[int]int64, seen map[int]bool) {
		t := &new.Tensors[ti]
		b := numel * t.DType.Size()
		s.reads++
		s.add(t, b)
		s.total += b
		o := rs.Old.Writer[oi][ok]
		byNode[o/oldG] += b
		if !seen[o] {
			seen[o] = true
			s.ranks = append(s.ranks, o)
		}
	}
	finish := func(s *readSet, byNode map[int]int64) {
		for nd, b := range byNode {
			s.byNode = append(s.byNode, nodeBytes{nd, b})
		}
		slices.SortFunc(s.byNode, func(a, b nodeBytes) int { return a.node - b.node })
		sort.Ints(s.ranks)
	}
	// The replicated tensors' reads, with k = 0 (visit's kk for them).
	byNode := make(map[int]int64)
	rs.visit(0, func(ti, oi, k, ok int, numel int64) {
		if new.Tensors[ti].ShardDim < 0 {
			add(&rs.common, ti, oi, ok, numel, byNode, inCommon)
		}
	})
	finish(&rs.common, byNode)
	for c := range rs.classes {
		cl := &rs.classes[c]
		byNode := make(map[int]int64)
		seen := make(map[int]bool)
		h := fnv.New64a()
		var buf [8]byte
		put := func(v int64) {
			binary.LittleEndian.PutUint64(buf[:], uint64(v))
			h.Write(buf[:])
		}
		rs.visit(c, func(ti, oi, k, ok int, numel int64) {
			put(int64(ti))
			put(int64(k))
			put(int64(ok))
			put(int64(rs.Old.Writer[oi][ok]))
			put(numel)
			if new.Tensors[ti].ShardDim >= 0 {
				add(&cl.own, ti, oi, ok, numel, byNode, seen)
			}
		})
		finish(&cl.own, byNode)
		cl.print = h.Sum64()
		// The old ranks the class reads: the common ones and its own.
		all := slices.Clone(rs.common.ranks)
		for _, o := range cl.own.ranks {
			if !inCommon[o] {
				all = append(all, o)
			}
		}
		cl.own.ranks = nil
		sort.Ints(all)
		cl.files, cl.from = len(all), rangesOf(all)
	}
}

// class is new rank r's class.
func (rs *Reshard) class(r int) *readClass {
	return &rs.classes[min(r%rs.New.Shard, rs.maxFilled)]
}
