package executor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// The host backend's kernels: the FSDP copies and casts, the collectives,
// and the compute stand-ins (forward, backward, optimizer), which check
// what they read against the reference's expectations.

func (st *hostStream) runKernel(it *item) {
	k := it.k
	h := st.r.h
	defer func() {
		if r := recover(); r != nil {
			st.fail(Internal, it, "the host kernel for %s panicked (please report): %v", h.describe(int(it.op)), r)
		}
	}()
	reads, writes := k.accesses()
	if h.t.HazardCheck {
		for _, a := range writes {
			st.check(it, blk(it, a), a, true)
		}
		for _, a := range reads {
			if !contains(writes, a) {
				st.check(it, blk(it, a), a, false)
			}
		}
		if h.Failed() {
			return
		}
	}
	collective := k.Kind == schedule.OpAllGather || k.Kind == schedule.OpReduceScatter || k.Kind == schedule.OpAllReduce
	if collective && h.t.HazardCheck && !st.fresh(it) {
		return
	}
	switch k.Kind {
	case schedule.OpCopyIn:
		st.copyIn(it)
	case schedule.OpH2D, schedule.OpD2H:
		st.copyRaw(it)
	case schedule.OpCopyOut:
		st.copyOut(it)
	case schedule.OpReshard:
		st.reshard(it)
	case schedule.OpForward:
		st.forward(it)
	case schedule.OpBackward:
		st.backward(it)
	case schedule.OpReduceCopyIn:
		st.reduceCopyIn(it)
	case schedule.OpDivide:
		st.divide(it)
	case schedule.OpCastGrad, schedule.OpAccumulate:
		st.elementwise(it)
	case schedule.OpAllGather, schedule.OpReduceScatter, schedule.OpAllReduce:
		st.join(it)
	case schedule.OpOptimizer:
		st.optimize(it)
	default:
		st.fail(Internal, it, "no host kernel for %s", k.Kind)
	}
	// Writes make a block's contents new, except a collective's in place:
	// an all-gather or all-reduce of a block nobody wrote since is a
	// repeated collective (see fresh).
	for _, a := range writes {
		if b := blk(it, a); b != nil && !(collective && a == ArgDst && (k.Kind != schedule.OpReduceScatter)) {
			b.mu.Lock()
			b.writeSeq++
			b.mu.Unlock()
		}
	}
}

func contains(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func blk(it *item, arg int) *block { return it.mem[arg] }

// fresh checks that a collective consumes data written since the last
// collective of its kind consumed that block: gathering or reducing the
// same bytes twice is a doubled or misplaced collective even where the
// result would not change.
func (st *hostStream) fresh(it *item) bool {
	k := it.k
	in, kind := ArgDst, 0
	switch k.Kind {
	case schedule.OpReduceScatter:
		in, kind = ArgSrc, 1
	case schedule.OpAllReduce:
		kind = 2
	}
	b := blk(it, in)
	if b == nil {
		return true
	}
	b.mu.Lock()
	stale := b.consumed[kind] == b.writeSeq
	b.consumed[kind] = b.writeSeq
	b.mu.Unlock()
	if stale {
		st.fail(Protocol, it, "%s reads %s, which no op has written since the previous %s consumed it: a repeated or misplaced collective",
			st.r.h.describe(int(it.op)), st.r.h.operandName(it, in), k.Kind)
		return false
	}
	return true
}

// need returns an operand's bytes, failing unless it holds exactly n.
func (st *hostStream) need(it *item, arg int, n int64) ([]byte, bool) {
	b := blk(it, arg)
	if b == nil {
		st.fail(Protocol, it, "%s has no %s operand", st.r.h.describe(int(it.op)), argName(arg))
		return nil, false
	}
	if b.Bytes() != n {
		st.fail(Protocol, it, "%s: its %s (%s) holds %d bytes, the group's layout needs %d", st.r.h.describe(int(it.op)), argName(arg), st.r.h.operandName(it, arg), b.Bytes(), n)
		return nil, false
	}
	return b.data, true
}

func argName(arg int) string {
	return [...]string{"target", "source", "first used", "second used", "gradient"}[arg]
}

// poisoned reports the first element of [off, off+n) of a dt array that
// holds the poison pattern, or -1.
func poisoned(dt ir.DType, b []byte, off, n int64) int64 {
	sz := dt.Size()
	seg := b[off*sz : (off+n)*sz]
	first := bytes.IndexByte(seg, poisonByte)
	if first < 0 {
		return -1
	}
	// No element before the one holding the first poison byte can be
	// poison; from there compare whole elements with the all-ones word.
	switch sz {
	case 2:
		for i := int64(first) / 2; i < n; i++ {
			if binary.LittleEndian.Uint16(seg[2*i:]) == 0xffff {
				return i
			}
		}
	case 4:
		for i := int64(first) / 4; i < n; i++ {
			if binary.LittleEndian.Uint32(seg[4*i:]) == 0xffffffff {
				return i
			}
		}
	case 8:
		for i := int64(first) / 8; i < n; i++ {
			if binary.LittleEndian.Uint64(seg[8*i:]) == math.MaxUint64 {
				return i
			}
		}
	default:
		for i := int64(first) / sz; i < n; i++ {
			if isPoison(dt, seg, i) {
				return i
			}
		}
	}
	return -1
}

// castRange converts n elements: fast paths for the copies and casts FSDP
// makes, the generic loop otherwise.
func castRange(sdt ir.DType, src []byte, so int64, ddt ir.DType, dst []byte, do, n int64) {
	ss, ds := sdt.Size(), ddt.Size()
	if sdt == ddt {
		copy(dst[do*ds:(do+n)*ds], src[so*ss:(so+n)*ss])
		return
	}
	s := src[so*ss : (so+n)*ss]
	d := dst[do*ds : (do+n)*ds]
	switch {
	case sdt == ir.FP32 && ddt == ir.BF16:
		for len(s) >= 4 && len(d) >= 2 {
			b := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
			h := bf16FromF32(math.Float32frombits(b))
			d[0], d[1] = byte(h), byte(h>>8)
			s, d = s[4:], d[2:]
		}
	case sdt == ir.FP32 && ddt == ir.FP16:
		for len(s) >= 4 && len(d) >= 2 {
			b := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
			h := fp16FromF32(math.Float32frombits(b))
			d[0], d[1] = byte(h), byte(h>>8)
			s, d = s[4:], d[2:]
		}
	case sdt == ir.BF16 && ddt == ir.FP32:
		for len(s) >= 2 && len(d) >= 4 {
			d[0], d[1], d[2], d[3] = 0, 0, s[0], s[1]
			s, d = s[2:], d[4:]
		}
	default:
		for i := int64(0); i < n; i++ {
			store(ddt, d, i, load(sdt, s, i))
		}
	}
}

// copyIn writes the rank's shard, cast to each parameter's gather dtype,
// into its row of the all-gather buffer; with int reshard's backward
// gather, the post-forward slice into the rank's row of N.
func (st *hostStream) copyIn(it *item) {
	gl := it.k.Group
	W := gl.W
	dst, ok := st.need(it, ArgDst, W*gl.RowBytes)
	if !ok {
		return
	}
	if it.k.PostForward {
		N := int64(gl.Policy.ReshardTo)
		n := W * gl.RowBytes / N
		src, ok := st.need(it, ArgSrc, n)
		if !ok {
			return
		}
		j := int64(st.r.shard) % N
		copy(dst[j*n:(j+1)*n], src)
		return
	}
	src, ok := st.need(it, ArgSrc, gl.ShardedBytes)
	if !ok {
		return
	}
	row := dst[int64(st.r.shard)*gl.RowBytes:]
	for pi := range gl.Params {
		p := &gl.Params[pi]
		if e := poisoned(p.DType, src[p.ShardedOffset:], 0, p.ShardNumel); e >= 0 {
			st.fail(PoisonedRead, it, "%s reads poisoned memory in %s: element %d of the shard of %s", st.r.h.describe(int(it.op)), st.r.h.operandName(it, ArgSrc), e, p.Name)
			return
		}
		castRange(p.DType, src[p.ShardedOffset:], 0, p.Gather, row[p.GatherOffset:], 0, p.ShardNumel)
	}
}

func (st *hostStream) copyRaw(it *item) {
	src, dst := blk(it, ArgSrc), blk(it, ArgDst)
	if src == nil || dst == nil {
		st.fail(Protocol, it, "%s lacks a source or target", st.r.h.describe(int(it.op)))
		return
	}
	if src.Bytes() != dst.Bytes() {
		st.fail(Protocol, it, "%s copies %d bytes into %d", st.r.h.describe(int(it.op)), src.Bytes(), dst.Bytes())
		return
	}
	if dt := it.k.SrcDType; supported(dt) && src.Bytes()%dt.Size() == 0 {
		if e := poisoned(dt, src.data, 0, src.Bytes()/dt.Size()); e >= 0 {
			st.fail(PoisonedRead, it, "%s reads poisoned memory: element %d of %s", st.r.h.describe(int(it.op)), e, st.r.h.operandName(it, ArgSrc))
			return
		}
	}
	copy(dst.data, src.data)
}

// copyOut splits the gathered rows into each parameter's region of the
// unsharded buffer.
func (st *hostStream) copyOut(it *item) {
	gl := it.k.Group
	W := gl.W
	src, ok := st.need(it, ArgSrc, W*gl.RowBytes)
	if !ok {
		return
	}
	dst, ok := st.need(it, ArgDst, W*gl.RowBytes)
	if !ok {
		return
	}
	rows, per := W, int64(1) // rows of the gather, ranks per row
	if it.k.PostForward {
		rows = int64(gl.Policy.ReshardTo)
		per = W / rows
	}
	rowBytes := W * gl.RowBytes / rows
	check := bytes.IndexByte(src, poisonByte) >= 0 // only then look closer
	for j := int64(0); j < rows; j++ {
		for pi := range gl.Params {
			p := &gl.Params[pi]
			n := per * p.ShardNumel
			from := j*rowBytes + per*p.GatherOffset
			e := int64(-1)
			if check {
				e = poisoned(p.Gather, src[from:], 0, n)
			}
			if e >= 0 {
				st.fail(PoisonedRead, it, "%s reads poisoned memory in %s: rank %d's shard of %s, element %d: the all-gather did not deliver it",
					st.r.h.describe(int(it.op)), st.r.h.operandName(it, ArgSrc), j*per+e/p.ShardNumel, p.Name, e%p.ShardNumel)
				return
			}
			sz := p.Gather.Size()
			copy(dst[W*p.GatherOffset+j*n*sz:W*p.GatherOffset+(j+1)*n*sz], src[from:from+n*sz])
		}
	}
}

// reshard keeps the rank's 1/N of the unsharded parameters.
func (st *hostStream) reshard(it *item) {
	gl := it.k.Group
	W := gl.W
	N := int64(gl.Policy.ReshardTo)
	src, ok := st.need(it, ArgSrc, W*gl.RowBytes)
	if !ok {
		return
	}
	dst, ok := st.need(it, ArgDst, W*gl.RowBytes/N)
	if !ok {
		return
	}
	j := int64(st.r.shard) % N
	per := W / N
	for pi := range gl.Params {
		p := &gl.Params[pi]
		n := per * p.ShardNumel * p.Gather.Size()
		from := W*p.GatherOffset + j*n
		copy(dst[per*p.GatherOffset:per*p.GatherOffset+n], src[from:from+n])
	}
}

// checkParams compares the unsharded parameters an op reads with the
// reference's: every all-gather is checked where its data is used.
func (st *hostStream) checkParams(it *item, got []byte) bool {
	k := it.k
	if k.Expect == nil || int(it.step) >= len(k.Expect.gathered) {
		return true
	}
	want := k.Expect.gathered[it.step][k.Group.Index]
	if bytes.Equal(got, want) {
		return true
	}
	gl := k.Group
	W := gl.W
	for pi := range gl.Params {
		p := &gl.Params[pi]
		base := W * p.GatherOffset
		n := W * p.ShardNumel
		for e := int64(0); e < n; e++ {
			g, w := load(p.Gather, got[base:], e), load(p.Gather, want[base:], e)
			if math.Float64bits(g) == math.Float64bits(w) {
				continue
			}
			kind, what := Mismatch, fmt.Sprintf("holds %v where the reference gathers %v", g, w)
			if isPoison(p.Gather, got[base:], e) {
				kind, what = PoisonedRead, "holds the poison pattern: freed or never written memory"
			}
			st.fail(kind, it, "%s reads %s: %s (rank %d's shard, element %d, %s) %s", st.r.h.describe(int(it.op)), st.r.h.operandName(it, ArgSrc),
				p.Name, e/p.ShardNumel, e%p.ShardNumel, p.Gather, what)
			return false
		}
	}
	st.fail(Mismatch, it, "%s reads %s, which differs from the reference", st.r.h.describe(int(it.op)), st.r.h.operandName(it, ArgSrc))
	return false
}

func (st *hostStream) unsharded(it *item) ([]byte, bool) {
	gl := it.k.Group
	if blk(it, ArgSrc) == nil {
		if len(gl.Params) == 0 {
			return nil, true
		}
		st.fail(Protocol, it, "%s computes without the group's unsharded parameters", st.r.h.describe(int(it.op)))
		return nil, false
	}
	src, ok := st.need(it, ArgSrc, gl.W*gl.RowBytes)
	if !ok || !st.checkParams(it, src) {
		return nil, false
	}
	return src, true
}

// forward checks the parameters it computes with and writes its saved
// activations with a pattern of rank, micro-batch, step and segment.
func (st *hostStream) forward(it *item) {
	if _, ok := st.unsharded(it); !ok {
		return
	}
	if b := blk(it, ArgDst); b != nil {
		fillPattern(b.data, actSeed(st.r.rank, it.k.Micro, int(it.step), it.k.Module))
	}
}

func fillPattern(b []byte, seed uint64) {
	n := int64(len(b)) / 4
	if nativeLittleEndian && n > 0 {
		// The same words, stored in place (no per-word bounds check).
		words := unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
		for w := fillPatternSIMD(words, seed); w < len(words); w++ {
			words[w] = actPattern(seed, int64(w))
		}
	} else {
		for w := int64(0); w < n; w++ {
			binary.LittleEndian.PutUint32(b[4*w:], actPattern(seed, w))
		}
	}
	for i := 4 * n; i < int64(len(b)); i++ {
		b[i] = byte(actPattern(seed, i))
	}
}

func (st *hostStream) checkPattern(it *item, arg int, seed uint64) bool {
	b := blk(it, arg)
	if b == nil {
		return true
	}
	w := patternMismatch(b.data, seed)
	if w < 0 {
		return true
	}
	kind, what := Mismatch, "was not written by this segment's forward on this rank in this micro-batch"
	if binary.LittleEndian.Uint32(b.data[4*w:]) == 0xffffffff {
		kind, what = PoisonedRead, "holds the poison pattern: freed or never written"
	}
	st.fail(kind, it, "%s reads %s, whose word %d %s", st.r.h.describe(int(it.op)), st.r.h.operandName(it, arg), w, what)
	return false
}

// patternMismatch is the first whole word of b that differs from the
// activation pattern of seed, or -1.
func patternMismatch(b []byte, seed uint64) int64 {
	n := int64(len(b)) / 4
	w := int64(0)
	if nativeLittleEndian && n > 0 {
		// Skip the words that match in place (the assembly a group of 8
		// at a time, then one by one); the loop below returns the first
		// that differs.
		words := unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
		w = int64(checkPatternSIMD(words, seed))
		for w < n && words[w] == actPattern(seed, w) {
			w++
		}
	}
	for ; w < n; w++ {
		if binary.LittleEndian.Uint32(b[4*w:]) != actPattern(seed, w) {
			return w
		}
	}
	return -1
}

// backward checks its parameters and saved activations, fills its scratch
// and writes (or adds) every trainable parameter's gradient: round_c(u·a +
// b) with u the parameter value it read and a, b functions of the rank,
// micro-batch, step and the op's ordinal (docs/executor.md).
func (st *hostStream) backward(it *item) {
	k := it.k
	src, ok := st.unsharded(it)
	if !ok {
		return
	}
	for i, act := range k.Acts {
		if act {
			if !st.checkPattern(it, ArgUse0+i, actSeed(st.r.rank, k.Micro, int(it.step), k.Module)) {
				return
			}
		} else if b := blk(it, ArgUse0+i); b != nil {
			fillPattern(b.data, actSeed(st.r.rank, k.Micro, int(it.step), k.Module)^0xabcdef)
		}
	}
	if blk(it, ArgDst) == nil {
		return
	}
	gl := k.Group
	cd := k.DType
	dst, ok := st.need(it, ArgDst, gl.GradNumel*cd.Size())
	if !ok {
		return
	}
	if k.Accumulate {
		if e := poisoned(cd, dst, 0, gl.GradNumel); e >= 0 {
			st.fail(PoisonedRead, it, "%s accumulates into %s, whose element %d holds the poison pattern", st.r.h.describe(int(it.op)), st.r.h.operandName(it, ArgDst), e)
			return
		}
	}
	seed := gradSeed{rank: st.r.rank, micro: k.Micro, step: int(it.step), ordinal: k.Ordinal}
	W := gl.W
	for pi := range gl.Params {
		p := &gl.Params[pi]
		if !p.trainable() {
			continue
		}
		c := seed.coeffs(p.hash)
		region := src[W*p.GatherOffset:]
		for r := int64(0); r < W; r++ {
			p.forShard(r, func(so, lo, n int64) {
				for x := int64(0); x < n; x++ {
					i := lo + x
					g := roundTo(cd, c.grad(load(p.Gather, region, r*p.ShardNumel+so+x), i))
					if k.Accumulate {
						g = opRound(cd, load(cd, dst, p.GradFlat+i)+g)
					}
					store(cd, dst, p.GradFlat+i, g)
				}
			})
		}
	}
}

// reduceCopyIn is the chunk-cat: every trainable parameter's gradient,
// cast to the reduce dtype, into each rank's row of the reduce-scatter
// input, zero padded.
func (st *hostStream) reduceCopyIn(it *item) {
	k := it.k
	gl := k.Group
	sdt, rd := k.SrcDType, k.DType
	src, ok := st.need(it, ArgSrc, gl.GradNumel*sdt.Size())
	if !ok {
		return
	}
	Sg := gl.GradShardNumel
	dst, ok := st.need(it, ArgDst, gl.W*Sg*rd.Size())
	if !ok {
		return
	}
	if e := poisoned(sdt, src, 0, gl.GradNumel); e >= 0 {
		st.fail(PoisonedRead, it, "%s reads poisoned memory: element %d of %s", st.r.h.describe(int(it.op)), e, st.r.h.operandName(it, ArgSrc))
		return
	}
	clear(dst)
	for r := int64(0); r < gl.W; r++ {
		for pi := range gl.Params {
			p := &gl.Params[pi]
			if !p.trainable() {
				continue
			}
			p.forShard(r, func(so, lo, n int64) {
				castRange(sdt, src, p.GradFlat+lo, rd, dst, r*Sg+p.GradOffset+so, n)
			})
		}
	}
}

func (st *hostStream) divide(it *item) {
	dt := it.k.DType
	b := blk(it, ArgDst)
	if b == nil || b.Bytes()%dt.Size() != 0 {
		st.fail(Protocol, it, "%s has no target of %s", st.r.h.describe(int(it.op)), dt)
		return
	}
	n := b.Bytes() / dt.Size()
	if e := poisoned(dt, b.data, 0, n); e >= 0 {
		st.fail(PoisonedRead, it, "%s reads poisoned memory: element %d of %s", st.r.h.describe(int(it.op)), e, st.r.h.operandName(it, ArgDst))
		return
	}
	f := it.k.Factor
	for i := int64(0); i < n; i++ {
		store(dt, b.data, i, opRound(dt, load(dt, b.data, i)/f))
	}
}

// elementwise is cast-grad (dst = src in dst's dtype) and accumulate (dst
// += src, or dst = src for the first accumulation into a new buffer).
func (st *hostStream) elementwise(it *item) {
	k := it.k
	src, dst := blk(it, ArgSrc), blk(it, ArgDst)
	sdt, ddt := k.SrcDType, k.DType
	if src == nil || dst == nil || src.Bytes()%sdt.Size() != 0 || dst.Bytes()%ddt.Size() != 0 || src.Bytes()/sdt.Size() != dst.Bytes()/ddt.Size() {
		st.fail(Protocol, it, "%s: source and target do not hold the same elements", st.r.h.describe(int(it.op)))
		return
	}
	n := dst.Bytes() / ddt.Size()
	if e := poisoned(sdt, src.data, 0, n); e >= 0 {
		st.fail(PoisonedRead, it, "%s reads poisoned memory: element %d of %s", st.r.h.describe(int(it.op)), e, st.r.h.operandName(it, ArgSrc))
		return
	}
	acc := k.Kind == schedule.OpAccumulate && k.Accumulate
	if acc {
		if e := poisoned(ddt, dst.data, 0, n); e >= 0 {
			st.fail(PoisonedRead, it, "%s adds into poisoned memory: element %d of %s", st.r.h.describe(int(it.op)), e, st.r.h.operandName(it, ArgDst))
			return
		}
		for i := int64(0); i < n; i++ {
			store(ddt, dst.data, i, opRound(ddt, load(ddt, dst.data, i)+load(sdt, src.data, i)))
		}
		return
	}
	castRange(sdt, src.data, 0, ddt, dst.data, 0, n)
}

// optimize checks the gradient the step sees against the reference and
// updates the rank's shard and states in place.
func (st *hostStream) optimize(it *item) {
	k := it.k
	gl := k.Group
	od := gl.Orig
	params, ok := st.need(it, ArgDst, gl.ShardedBytes)
	if !ok {
		return
	}
	grad, ok := st.need(it, ArgGrad, gl.GradShardNumel*od.Size())
	if !ok {
		return
	}
	o := k.Optimizer
	var states []byte
	if o.states > 0 {
		b := blk(it, ArgSrc)
		if b == nil {
			st.fail(Protocol, it, "%s has no optimizer state; %s needs %d bytes per element", st.r.h.describe(int(it.op)), o.name, 4*o.states)
			return
		}
		states = b.data
		if int64(len(states)) < gl.GradShardNumel*int64(o.states)*4 {
			st.fail(Protocol, it, "%s: the optimizer state holds %d bytes, %s needs %d", st.r.h.describe(int(it.op)), len(states), o.name, gl.GradShardNumel*int64(o.states)*4)
			return
		}
	}
	if k.Expect != nil && int(it.step) < len(k.Expect.grads) {
		if want := k.Expect.grads[it.step][gl.Index][st.r.rank]; !bytes.Equal(grad, want) {
			st.gradMismatch(it, grad, want)
			return
		}
	}
	Sg := gl.GradShardNumel
	sv := make([]float64, o.states)
	step := int(it.step) + 1
	for pi := range gl.Params {
		p := &gl.Params[pi]
		if !p.trainable() {
			continue
		}
		region := params[p.ShardedOffset:]
		if e := poisoned(p.DType, region, 0, p.ShardNumel); e >= 0 {
			st.fail(PoisonedRead, it, "%s reads poisoned memory: element %d of %s in %s", st.r.h.describe(int(it.op)), e, p.Name, st.r.h.operandName(it, ArgDst))
			return
		}
		for e := int64(0); e < p.ShardNumel; e++ {
			gi := p.GradOffset + e
			for s := range sv {
				sv[s] = load(ir.FP32, states, int64(s)*Sg+gi)
			}
			v := o.apply(p.DType, load(p.DType, region, e), load(od, grad, gi), sv, step)
			store(p.DType, region, e, v)
			for s := range sv {
				store(ir.FP32, states, int64(s)*Sg+gi, sv[s])
			}
		}
	}
}

func (st *hostStream) gradMismatch(it *item, got, want []byte) {
	gl := it.k.Group
	od := gl.Orig
	for pi := range gl.Params {
		p := &gl.Params[pi]
		if !p.trainable() {
			continue
		}
		for e := int64(0); e < p.ShardNumel; e++ {
			g, w := load(od, got, p.GradOffset+e), load(od, want, p.GradOffset+e)
			if math.Float64bits(g) == math.Float64bits(w) {
				continue
			}
			kind, what := Mismatch, fmt.Sprintf("%v where the reference has %v", g, w)
			if isPoison(od, got, p.GradOffset+e) {
				kind, what = PoisonedRead, "the poison pattern: no reduction wrote it"
			} else if w != 0 {
				what += fmt.Sprintf(" (%.4g×)", g/w)
			}
			st.fail(kind, it, "%s: the gradient of %s in %s, shard element %d, is %s", st.r.h.describe(int(it.op)), p.Name, st.r.h.operandName(it, ArgGrad), e, what)
			return
		}
	}
	st.fail(Mismatch, it, "%s: the gradient differs from the reference", st.r.h.describe(int(it.op)))
}

// runCollective runs an all-gather, reduce-scatter or all-reduce for all
// members at once, reducing in rank order.
func (st *hostStream) runCollective(inst *collInst) {
	m0 := inst.members[0]
	k := m0.k
	for pos, m := range inst.members {
		if m.k.Kind != k.Kind || m.k.DType != k.DType || m.k.Reduce != k.Reduce || m.k.Factor != k.Factor ||
			blk(m, ArgDst) == nil || blk(m, ArgDst).Bytes() != blk(m0, ArgDst).Bytes() ||
			(k.Kind == schedule.OpReduceScatter && (blk(m, ArgSrc) == nil || blk(m, ArgSrc).Bytes() != blk(m0, ArgSrc).Bytes())) {
			inst.streams[pos].fail(Protocol, m, "collective #%d over %s(%d): rank %d calls %s, rank %d calls %s with other types or sizes",
				inst.key.seq, inst.key.PG, inst.key.Size, inst.key.Member(0, st.r.h.t.World()), st.r.h.describe(int(m0.op)), inst.key.Member(pos, st.r.h.t.World()), st.r.h.describe(int(m.op)))
			return
		}
	}
	n := int64(inst.n)
	switch k.Kind {
	case schedule.OpAllGather:
		size := blk(m0, ArgDst).Bytes()
		if size%n != 0 {
			m0fail(inst, "all-gather of %d bytes over %d ranks", size, n)
			return
		}
		c := size / n
		for j, src := range inst.members {
			chunk := blk(src, ArgDst).data[int64(j)*c : int64(j+1)*c]
			for i, dst := range inst.members {
				if i != j {
					copy(blk(dst, ArgDst).data[int64(j)*c:], chunk)
				}
			}
		}
	case schedule.OpReduceScatter, schedule.OpAllReduce:
		dt := k.DType
		in := ArgSrc
		if k.Kind == schedule.OpAllReduce {
			in = ArgDst
		}
		total := blk(m0, in).Bytes()
		if total%dt.Size() != 0 {
			m0fail(inst, "%s of %d bytes of %s", k.Kind, total, dt)
			return
		}
		elems := total / dt.Size()
		chunk := elems // all-reduce: every member gets everything
		if k.Kind == schedule.OpReduceScatter {
			if elems%n != 0 || blk(m0, ArgDst).Bytes() != total/n {
				m0fail(inst, "reduce-scatter of %d bytes over %d ranks into %d", total, n, blk(m0, ArgDst).Bytes())
				return
			}
			chunk = elems / n
		}
		red, err := newReducer(dt, k.Reduce, k.Factor, inst.n)
		if err != nil {
			m0fail(inst, "%v", err)
			return
		}
		// The fast reductions flag poison as they read it (one pass over
		// the inputs, not two); the scan below then names it. The others
		// are scanned first.
		if !fastReducible(dt) && st.poisonedInputs(inst, in, [][2]int64{{0, elems}}) {
			return
		}
		inputs := make([][]byte, inst.n)
		for j, m := range inst.members {
			inputs[j] = blk(m, in).data
		}
		if k.Kind == schedule.OpReduceScatter {
			poison := false
			for pos, m := range inst.members {
				if reduceInto(red, inputs, int64(pos)*chunk, int(chunk), blk(m, ArgDst).data) {
					poison = true
				}
			}
			if poison {
				st.poisonedInputs(inst, in, [][2]int64{{0, elems}})
			}
			return
		}
		// All-reduce: every member gets the same sums, and the inputs are
		// the outputs. The fast reductions fold and write a block at a
		// time; the others compute every sum once, then write them.
		if fastReducible(dt) {
			if unwritten := allReduceParallel(red, inputs, int(chunk), inputs); unwritten != nil {
				st.poisonedInputs(inst, in, unwritten)
			}
			return
		}
		out := make([]byte, total)
		reduceInto(red, inputs, 0, int(chunk), out)
		for _, m := range inst.members {
			copy(blk(m, ArgDst).data, out)
		}
	}
}

// poisonedInputs fails the collective at the first member whose input
// holds poison within the element ranges given (in order), naming the
// element, and says whether one did.
func (st *hostStream) poisonedInputs(inst *collInst, in int, ranges [][2]int64) bool {
	dt := inst.members[0].k.DType
	for pos, m := range inst.members {
		for _, rg := range ranges {
			if e := poisoned(dt, blk(m, in).data, rg[0], rg[1]-rg[0]); e >= 0 {
				inst.streams[pos].fail(PoisonedRead, m, "%s reads poisoned memory: element %d of %s", st.r.h.describe(int(m.op)), rg[0]+e, st.r.h.operandName(m, in))
				return true
			}
		}
	}
	return false
}

// reduceInto folds n elements at element offset off of the inputs into
// out, in rank order. The fast reductions say whether an input element
// they read was poison; the generic one does not look (its callers scan
// first) and says false.
func reduceInto(red reducer, inputs [][]byte, off int64, n int, out []byte) (poison bool) {
	if fastReducible(red.dt) {
		return reduceParallel(red, inputs, off, n, out)
	}
	dt := red.dt
	for e := 0; e < n; e++ {
		acc := red.first(load(dt, inputs[0], off+int64(e)))
		for j := 1; j < len(inputs); j++ {
			acc = red.next(acc, load(dt, inputs[j], off+int64(e)))
		}
		store(dt, out, int64(e), acc)
	}
	return false
}

func m0fail(inst *collInst, format string, args ...any) {
	inst.streams[0].fail(Protocol, inst.members[0], format, args...)
}
