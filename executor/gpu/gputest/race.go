package gputest

import (
	"fmt"
	"slices"
	"sort"
)

// The race detector: vector clocks over threads (thread 0 is the host,
// thread i stream i; in a capture, the capture's streams in joining
// order) and, per allocation, the last write and the reads since of every
// byte range. An access by thread t with clock v is ordered after an
// earlier one with epoch (u, c) iff c <= v[u].

// vclock is a vector clock. A vclock is never changed once made: tick and
// join return new ones.
type vclock []uint64

func (v vclock) get(t int) uint64 {
	if t < len(v) {
		return v[t]
	}
	return 0
}

// tick is v with thread t one step on.
func (v vclock) tick(t int) vclock {
	w := make(vclock, max(len(v), t+1))
	copy(w, v)
	w[t]++
	return w
}

// join is the elementwise maximum of v and u.
func (v vclock) join(u vclock) vclock {
	grows := false
	for i, c := range u {
		if c > v.get(i) {
			grows = true
			break
		}
	}
	if !grows {
		return v
	}
	w := make(vclock, max(len(v), len(u)))
	copy(w, v)
	for i, c := range u {
		w[i] = max(w[i], c)
	}
	return w
}

// epoch is one access: thread t at its clock c (0: none).
type epoch struct {
	t int
	c uint64
}

func (e epoch) before(v vclock) bool { return e.c <= v.get(e.t) }

// seg is the access history of bytes [lo, hi).
type seg struct {
	lo, hi int64
	w      epoch   // the last write
	r      []epoch // the reads since, one per thread
}

// shadow is an allocation's history: segments covering it, in order.
type shadow struct{ segs []seg }

func newShadow(size int64) *shadow { return &shadow{segs: []seg{{lo: 0, hi: size}}} }

// split makes a segment start at at and returns its index (len(segs) if
// at is the end).
func (sh *shadow) split(at int64) int {
	i := sort.Search(len(sh.segs), func(i int) bool { return sh.segs[i].hi > at })
	if i == len(sh.segs) || sh.segs[i].lo == at {
		return i
	}
	g := sh.segs[i]
	right := seg{lo: at, hi: g.hi, w: g.w, r: slices.Clone(g.r)}
	sh.segs[i].hi = at
	sh.segs = slices.Insert(sh.segs, i+1, right)
	return i + 1
}

// conflict is an earlier access that an access is not ordered after.
type conflict struct {
	other  epoch
	wrote  bool // the earlier access was a write
	lo, hi int64
}

// access records an access to [lo, hi) by e with clock v and returns the
// first earlier access it conflicts with, if any.
func (sh *shadow) access(lo, hi int64, write bool, e epoch, v vclock) *conflict {
	i, j := sh.split(lo), sh.split(hi)
	var hz *conflict
	for k := i; k < j; k++ {
		g := &sh.segs[k]
		if hz == nil {
			if g.w.c != 0 && !g.w.before(v) {
				hz = &conflict{other: g.w, wrote: true, lo: g.lo, hi: g.hi}
			} else if write {
				for _, r := range g.r {
					if !r.before(v) {
						hz = &conflict{other: r, lo: g.lo, hi: g.hi}
						break
					}
				}
			}
		}
		if !write {
			at := slices.IndexFunc(g.r, func(r epoch) bool { return r.t == e.t })
			if at < 0 {
				g.r = append(g.r, e)
			} else {
				g.r[at] = e
			}
		}
	}
	if write {
		sh.segs = slices.Replace(sh.segs, i, j, seg{lo: lo, hi: hi, w: e})
	}
	return hz
}

// liveName names a thread of the live streams.
func liveName(t int) string {
	if t == 0 {
		return "the host"
	}
	return fmt.Sprintf("stream %d", t)
}

// hazard records thread t's access, with clock v, to bytes [off, off+n)
// of a in the history sh, and returns an ErrHazard if it conflicts.
func hazard(a *alloc, sh *shadow, off, n int64, write bool, t int, v vclock, name func(int) string) error {
	if sh == nil || n == 0 {
		return nil
	}
	hz := sh.access(off, off+n, write, epoch{t, v.get(t)}, v)
	if hz == nil {
		return nil
	}
	verb, past := "reads", "read"
	if write {
		verb = "writes"
	}
	if hz.wrote {
		past = "wrote"
	}
	who, other := name(t), name(hz.other.t)
	how := fmt.Sprintf("no Record on %s and Wait on %s orders them", other, who)
	if t == 0 {
		how = fmt.Sprintf("no SyncEvent orders the host after %s", other)
	}
	return fmt.Errorf("%w: %s %s bytes [%#x, %#x) of %s, which %s %s, and %s",
		ErrHazard, who, verb, uint64(a.base)+uint64(max(hz.lo, off)), uint64(a.base)+uint64(min(hz.hi, off+n)), a, other, past, how)
}
