package checkpoint

import (
	"fmt"
	"slices"
	"strings"
)

// Read is one read DCP's load planner performs for a rank of the new plan:
// the part of an old chunk that the new rank's chunk needs. Offsets and
// Lengths are in the tensor's global index space (the intersection of the
// two chunks); the bytes are read from the file the old rank wrote.
type Read struct {
	Tensor  int // index into both layouts' Tensors (they match)
	OldRank int // the rank whose file holds the chunk
	OldK    int // the chunk's shard index in the old layout
	Offsets []int64
	Lengths []int64
	Bytes   int64
}

// Mismatch is one reason an old checkpoint cannot be loaded under a new
// plan, naming the state-dict entry.
type Mismatch struct {
	FQN    string
	Reason string
}

func (m Mismatch) String() string { return m.FQN + ": " + m.Reason }

// IncompatibleError lists every entry the new plan cannot load.
type IncompatibleError struct {
	Old, New   string // the plans' model names
	Mismatches []Mismatch
}

func (e *IncompatibleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the checkpoint of %s cannot be loaded under %s: %d state entries differ", e.Old, e.New, len(e.Mismatches))
	const shown = 20
	for i, m := range e.Mismatches {
		if i == shown {
			fmt.Fprintf(&b, "\n  … and %d more", len(e.Mismatches)-shown)
			break
		}
		b.WriteString("\n  " + m.String())
	}
	return b.String()
}

// match checks that two layouts hold the same state: the same entries
// (no renamed parameter, no optimizer state gained or lost), each with the
// same global shape and dtype, and the same optimizer. DCP's default load
// planner fails on a key missing from the checkpoint and loads a tensor
// only into one of the same size; fsdpc refuses before the job runs and
// names every entry. The chunking may differ: that is resharding. It
// returns the old layout's index of each new tensor.
func match(old, new *Layout) ([]int, error) {
	var ms []Mismatch
	if old.Optimizer != new.Optimizer {
		ms = append(ms, Mismatch{"optim", fmt.Sprintf("optimizer %s was saved, the new plan uses %s", old.Optimizer, new.Optimizer)})
	}
	byName := make(map[string]int, len(old.Tensors))
	for i := range old.Tensors {
		byName[old.Tensors[i].FQN] = i
	}
	seen := make([]bool, len(old.Tensors))
	oldIndex := make([]int, len(new.Tensors))
	for i := range new.Tensors {
		n := &new.Tensors[i]
		oi, ok := byName[n.FQN]
		if !ok {
			ms = append(ms, Mismatch{n.FQN, "not in the old checkpoint (a renamed or new parameter, or optimizer state the old plan did not keep)"})
			continue
		}
		seen[oi], oldIndex[i] = true, oi
		o := &old.Tensors[oi]
		if !slices.Equal(o.Shape, n.Shape) {
			ms = append(ms, Mismatch{n.FQN, fmt.Sprintf("shape %v was saved, the new plan has %v", o.Shape, n.Shape)})
		}
		if o.DType != n.DType {
			ms = append(ms, Mismatch{n.FQN, fmt.Sprintf("dtype %s was saved, the new plan has %s", o.DType, n.DType)})
		}
	}
	for i := range old.Tensors {
		if !seen[i] {
			ms = append(ms, Mismatch{old.Tensors[i].FQN, "saved, but not in the new plan (a renamed or removed parameter, or optimizer state the new plan does not keep)"})
		}
	}
	if len(ms) > 0 {
		return nil, &IncompatibleError{Old: old.Model, New: new.Model, Mismatches: ms}
	}
	return oldIndex, nil
}

// Reshard is the load of an old checkpoint under a new plan. The reads
// are computed per rank on demand (Reads), so a plan of thousands of ranks
// never holds them all.
type Reshard struct {
	Old, New *Layout
	// oldIndex maps a new tensor index to the old one.
	oldIndex []int
	// filled is each new tensor's number of chunks with elements.
	filled []int
	// The reads of the new ranks by class (readclass.go): common are the
	// replicated tensors' reads, which every rank performs; a rank whose
	// shard index is maxFilled or more reads nothing else.
	common    readSet
	classes   []readClass
	maxFilled int
}

// OldTensor is the old layout's index of new tensor i.
func (rs *Reshard) OldTensor(i int) int { return rs.oldIndex[i] }

// Plan prepares the load of old's checkpoint under new, refusing layouts
// that do not hold the same state.
func Plan(old, new *Layout) (*Reshard, error) {
	oldIndex, err := match(old, new)
	if err != nil {
		return nil, err
	}
	rs := &Reshard{Old: old, New: new, oldIndex: oldIndex, filled: make([]int, len(new.Tensors))}
	for ti := range new.Tensors {
		rs.filled[ti] = filled(&new.Tensors[ti], new.Shard)
	}
	rs.buildClasses()
	return rs, nil
}

// Reads are the reads new rank r performs, in state-dict order, as DCP's
// DefaultLoadPlanner does (create_read_items): for each entry of the
// rank's state dict, its chunk is intersected with every saved chunk of
// that entry, and each non-empty overlap is one read from the file of the
// rank that wrote the saved chunk. Every replica of an HSDP plan reads its
// own copy.
func (rs *Reshard) Reads(r int) []Read {
	var out []Read
	rs.visit(r, func(ti, oi, k, ok int, numel int64) {
		nt := &rs.New.Tensors[ti]
		offs, lens, _ := intersect(nt.Chunk(k), rs.Old.Tensors[oi].Chunk(ok))
		out = append(out, Read{Tensor: ti, OldRank: rs.Old.Writer[oi][ok], OldK: ok,
			Offsets: offs, Lengths: lens, Bytes: numel * nt.DType.Size()})
	})
	return out
}

// visit calls f for each read new rank r performs, in Reads' order: new
// tensor ti (its chunk k), old tensor oi's chunk ok, and the elements
// read; it builds no boxes, so the estimates of a plan of 2²⁰ ranks, each
// reading every step count, allocate nothing per read.
func (rs *Reshard) visit(r int, f func(ti, oi, k, ok int, numel int64)) {
	old, new := rs.Old, rs.New
	k := r % new.Shard
	for ti := range new.Tensors {
		nt := &new.Tensors[ti]
		kk := k
		if nt.ShardDim < 0 {
			kk = 0
		}
		if kk >= rs.filled[ti] {
			continue // a chunk without elements
		}
		oi := rs.oldIndex[ti]
		ot := &old.Tensors[oi]
		// Old chunks are row ranges of one dimension: when both plans
		// chunk the same one, only those that cover the new rows can
		// overlap.
		lo, hi := 0, len(old.Writer[oi]) // the chunks with elements
		if ot.ShardDim >= 0 && ot.ShardDim == nt.ShardDim {
			start, rows := nt.span(kk, nt.ShardDim)
			lo = int(start / ot.ChunkRows)
			hi = min(hi, int((start+rows-1)/ot.ChunkRows)+1)
		}
		for ok := lo; ok < hi; ok++ {
			if n := overlap(nt, kk, ot, ok); n > 0 {
				f(ti, oi, kk, ok, n)
			}
		}
	}
}

// span is where chunk k of t starts on dimension d, and how far it runs.
func (t *Tensor) span(k, d int) (start, length int64) {
	n := t.Shape[d]
	if d != t.ShardDim {
		return 0, n
	}
	start = min(int64(k)*t.ChunkRows, n)
	return start, min(t.ChunkRows, n-start)
}

// overlap is the number of elements chunk ka of a and chunk kb of b (one
// tensor's shape, chunked by two plans) share.
func overlap(a *Tensor, ka int, b *Tensor, kb int) int64 {
	n := int64(1)
	for d := range a.Shape {
		alo, alen := a.span(ka, d)
		blo, blen := b.span(kb, d)
		lo, hi := max(alo, blo), min(alo+alen, blo+blen)
		if hi <= lo {
			return 0
		}
		n *= hi - lo
	}
	return n
}

// intersect is the overlap of two chunks of one tensor, and its numel.
func intersect(a, b Chunk) (offs, lens []int64, numel int64) {
	offs, lens = make([]int64, len(a.Offsets)), make([]int64, len(a.Offsets))
	numel = 1
	for d := range a.Offsets {
		lo := max(a.Offsets[d], b.Offsets[d])
		hi := min(a.Offsets[d]+a.Lengths[d], b.Offsets[d]+b.Lengths[d])
		if hi <= lo {
			return nil, nil, 0
		}
		offs[d], lens[d] = lo, hi-lo
		numel *= hi - lo
	}
	return offs, lens, numel
}

// RankBytes is what new rank r reads in all, and the part of it from
// files written on another node (which, on node-local storage, must be
// copied there first).
func (rs *Reshard) RankBytes(r int) (total, remote int64) {
	node, own := r/rs.New.GPUsPerNode, &rs.class(r).own
	return rs.common.total + own.total, rs.common.remote(node) + own.remote(node)
}
