package diff

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// The whole program, op by op. Counting operations per kind (schedule())
// says what a reviewer sees first, but two programs with the same counts
// can still differ in what matters for safety: a wait on another event, a
// free moved before the last use, a backward labelled with the wrong
// micro-batch. Here every op is written by name (its stream, kind, phase,
// micro-batch, group, module, buffers and event by their names, never by
// table index, so inserting one buffer or event renumbers nothing), the
// two sequences are aligned, and every difference is reported, folded over
// groups: "backward: 12 waits changed (event) in layers.{3–14}".

// OpEdit is one kind of difference in the program, folded over the groups
// it touches.
type OpEdit struct {
	// Change is "added", "removed", "moved" (the same op elsewhere in the
	// program) or "changed" (an op in the same place whose Fields differ).
	Change string   `json:"change"`
	Phase  string   `json:"phase"`
	Kind   string   `json:"kind"`
	Fields []string `json:"fields"`
	Count  int      `json:"count"`
	Groups []string `json:"groups"`
	Folded string   `json:"folded"`
	// Example is the first such edit: the op as it was and as it is
	// ("" where there is none), with its index in each program (-1 where
	// there is none).
	Example OpExample `json:"example"`
}

// OpExample shows one edit of a fold.
type OpExample struct {
	OldOp  int    `json:"old_op"`
	NewOp  int    `json:"new_op"`
	OldOpT string `json:"old"`
	NewOpT string `json:"new"`
}

// opFieldNames name an op's fields as the text of an OpEdit says them.
var opFieldNames = [...]string{"stream", "kind", "phase", "micro-batch", "group", "module", "buffer", "source",
	"event", "uses", "process group", "dtype", "reduce", "factor", "bytes", "flops", "attention flops",
	"element bytes", "gemms", "recomputed element bytes"}

const (
	fStream = iota
	fKind
	fPhase
	fMicro
	fGroup
	fModule
	fBuffer
	fSource
	fEvent
)

// opKey is an op by name: comparable, so the two programs are aligned on
// it directly, and cheap to build (names are the plans' own strings).
type opKey struct {
	stream, kind, phase, pg, dtype, reduce uint8
	micro, pgSize                          int
	group, module, buffer, source, event   string
	uses, gemms                            string
	factor, flops, attn                    uint64 // IEEE bits: exact, NaNs included
	bytes, elem                            int64
	// elemRecompute is the part of elem a backward spends rerunning its
	// module's forward kernels (Plan.ElemRecompute), which the cost model
	// prices apart: a plan that moves only that split still differs.
	elemRecompute int64
}

type opRec struct {
	key       opKey
	op        *schedule.Op
	foldGroup string // foldName of opGroups' group
}

// values writes the op's fields in opFieldNames' order.
func (r *opRec) values() [len(opFieldNames)]string {
	k, o := &r.key, r.op
	pg := ""
	if o.PG != schedule.PGNone || o.PGSize != 0 {
		pg = fmt.Sprintf("%s(%d)", o.PG, o.PGSize)
	}
	dt := ""
	if o.DType != ir.DTypeInvalid {
		dt = o.DType.String()
	}
	return [...]string{o.Stream.String(), o.Kind.String(), o.Phase.String(), "mb" + strconv.Itoa(int(o.Micro)),
		k.group, k.module, k.buffer, k.source, k.event, k.uses, pg, dt, o.Reduce.String(), num(o.Factor),
		strconv.FormatInt(o.Bytes, 10), num(o.FLOPs), num(o.AttnFLOPs), strconv.FormatInt(o.ElemBytes, 10), k.gemms,
		strconv.FormatInt(k.elemRecompute, 10)}
}

// brief writes an op by what identifies it and the fields named, for an
// example: "compute free backward mb0 layers.31 buffer=…".
func (r *opRec) brief(fields []string) string {
	var b strings.Builder
	for j, v := range r.values() {
		named := j <= fGroup || j == fModule || j == fBuffer || j == fSource || j == fEvent || slices.Contains(fields, opFieldNames[j])
		if !named || v == "" || j > fKind && (v == "0" || v == "none") {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if j > fGroup {
			b.WriteString(opFieldNames[j])
			b.WriteByte('=')
		}
		b.WriteString(v)
	}
	return b.String()
}

func bufName(p *schedule.Plan, b int32) string {
	if b < 0 || int(b) >= len(p.Buffers) {
		return ""
	}
	return p.Buffers[b].Name
}

func eventName(p *schedule.Plan, e int32) string {
	switch {
	case e < 0:
		return ""
	case int(e) < len(p.EventNames):
		return p.EventNames[e]
	}
	return "event " + strconv.Itoa(int(e))
}

func groupName(p *schedule.Plan, g int) string {
	if g < 0 || g >= len(p.Groups) {
		return ""
	}
	return p.Groups[g].Label()
}

// foldName is the group an edit folds under: its label, or "(no group)".
func foldName(p *schedule.Plan, g int) string {
	if g < 0 || g >= len(p.Groups) {
		return "(no group)"
	}
	return p.Groups[g].Label()
}

// opGroups gives every op a group to be folded under: its own, or for a
// record the group of the work before it on its stream, and for a wait or
// sync that of the record it waits for (the planner gives events no
// group).
func opGroups(p *schedule.Plan) []int {
	out := make([]int, len(p.Ops))
	var last [8]int
	for i := range last {
		last[i] = -1
	}
	recordGroup := map[int32]int{}
	for i := range p.Ops {
		o := &p.Ops[i]
		g := int(o.Group)
		s := int(o.Stream) % len(last)
		switch {
		case g >= 0:
		case o.Kind == schedule.OpRecord:
			g = last[s]
			recordGroup[o.Event] = g
		case o.Kind == schedule.OpWait || o.Kind == schedule.OpSync:
			if rg, ok := recordGroup[o.Event]; ok {
				g = rg
			}
		}
		if o.Group >= 0 {
			last[s] = int(o.Group)
		}
		out[i] = g
	}
	return out
}

// program is one plan's operations as the alignment reads them: a hash
// of each op's key, and each op's fold group. Records are made one at a
// time when needed: held for every op of a plan of millions they took
// gigabytes.
type program struct {
	p      *schedule.Plan
	groups []int
	hashes []uint64
}

func newProgram(p *schedule.Plan) *program {
	pr := &program{p: p, groups: opGroups(p), hashes: make([]uint64, len(p.Ops))}
	for i := range p.Ops {
		k := pr.rec(i).key
		pr.hashes[i] = hashKey(&k)
	}
	return pr
}

// hashKey is a deterministic 64-bit hash of an op's key: equal keys hash
// equal; a pair aligned on equal hashes is checked on its keys.
func hashKey(k *opKey) uint64 {
	h := fnv.New64a()
	var b [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	str := func(s string) {
		num(uint64(len(s)))
		h.Write([]byte(s))
	}
	num(uint64(k.stream) | uint64(k.kind)<<8 | uint64(k.phase)<<16 | uint64(k.pg)<<24 | uint64(k.dtype)<<32 | uint64(k.reduce)<<40)
	num(uint64(k.micro))
	num(uint64(k.pgSize))
	for _, s := range []string{k.group, k.module, k.buffer, k.source, k.event, k.uses, k.gemms} {
		str(s)
	}
	num(k.factor)
	num(k.flops)
	num(k.attn)
	num(uint64(k.bytes))
	num(uint64(k.elem))
	num(uint64(k.elemRecompute))
	return h.Sum64()
}

// rec is op i's record.
func (pr *program) rec(i int) opRec {
	p := pr.p
	o := &p.Ops[i]
	r := opRec{op: o, foldGroup: foldName(p, pr.groups[i])}
	mod := ""
	if o.Module >= 0 && int(o.Module) < len(p.Modules) {
		mod = p.Modules[o.Module]
	}
	uses := ""
	for j, u := range p.OpUses(o) {
		if j > 0 {
			uses += ","
		}
		uses += bufName(p, u)
	}
	gemms := ""
	for j, g := range p.OpGEMMs(o) {
		if j > 0 {
			gemms += ","
		}
		gemms += fmt.Sprintf("%d×%d×%d×%d", g.M, g.N, g.K, g.Count)
	}
	r.key = opKey{stream: uint8(o.Stream), kind: uint8(o.Kind), phase: uint8(o.Phase), pg: uint8(o.PG),
		dtype: uint8(o.DType), reduce: uint8(o.Reduce), micro: int(o.Micro), pgSize: int(o.PGSize),
		group: groupName(p, int(o.Group)), module: mod, buffer: bufName(p, o.Buffer), source: bufName(p, o.Source),
		event: eventName(p, o.Event), uses: uses, gemms: gemms,
		factor: math.Float64bits(o.Factor), flops: math.Float64bits(o.FLOPs), attn: math.Float64bits(o.AttnFLOPs),
		bytes: o.Bytes, elem: o.ElemBytes, elemRecompute: p.OpElemRecompute(o)}
	return r
}

// num writes a float exactly; NaNs with their bits, so two NaNs that
// differ do not read the same.
func num(f float64) string {
	if math.IsNaN(f) {
		return fmt.Sprintf("NaN(%#x)", math.Float64bits(f))
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// exactBytes shows two sizes in binary units, or in bytes where the units
// would round them to the same text.
func exactBytes(a, b int64) (string, string) {
	sa, sb := ir.FormatBytes(a), ir.FormatBytes(b)
	if sa == sb && a != b {
		return strconv.FormatInt(a, 10) + " B", strconv.FormatInt(b, 10) + " B"
	}
	return sa, sb
}

// align matches lines of a and b in order: the common prefix and suffix,
// then lines that occur once in each (a patience diff), recursively
// between those anchors. It returns the matched index pairs in order.
func align[T comparable](a, b []T) [][2]int {
	var out [][2]int
	var rec func(alo, ahi, blo, bhi int)
	rec = func(alo, ahi, blo, bhi int) {
		for alo < ahi && blo < bhi && a[alo] == b[blo] {
			out = append(out, [2]int{alo, blo})
			alo++
			blo++
		}
		var tail [][2]int
		for alo < ahi && blo < bhi && a[ahi-1] == b[bhi-1] {
			ahi--
			bhi--
			tail = append(tail, [2]int{ahi, bhi})
		}
		defer func() {
			for i := len(tail) - 1; i >= 0; i-- {
				out = append(out, tail[i])
			}
		}()
		if alo == ahi || blo == bhi {
			return
		}
		type seen struct{ na, nb, ia, ib int }
		count := map[T]*seen{}
		for i := alo; i < ahi; i++ {
			s := count[a[i]]
			if s == nil {
				s = &seen{}
				count[a[i]] = s
			}
			s.na++
			s.ia = i
		}
		for j := blo; j < bhi; j++ {
			if s := count[b[j]]; s != nil {
				s.nb++
				s.ib = j
			}
		}
		var anchors [][2]int // unique in both, in a's order
		for i := alo; i < ahi; i++ {
			if s := count[a[i]]; s.na == 1 && s.nb == 1 {
				anchors = append(anchors, [2]int{i, s.ib})
			}
		}
		anchors = longestIncreasing(anchors)
		if len(anchors) == 0 {
			return // a gap: pairGap reports what is in it
		}
		pa, pb := alo, blo
		for _, m := range anchors {
			rec(pa, m[0], pb, m[1])
			out = append(out, m)
			pa, pb = m[0]+1, m[1]+1
		}
		rec(pa, ahi, pb, bhi)
	}
	rec(0, len(a), 0, len(b))
	return out
}

// longestIncreasing keeps the longest run of pairs whose second index
// increases (the first already does).
func longestIncreasing(ps [][2]int) [][2]int {
	if len(ps) == 0 {
		return nil
	}
	tails := []int{} // index into ps of the smallest tail of each length
	prev := make([]int, len(ps))
	for i, p := range ps {
		k := sort.Search(len(tails), func(k int) bool { return ps[tails[k]][1] >= p[1] })
		if k > 0 {
			prev[i] = tails[k-1]
		} else {
			prev[i] = -1
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	out := make([][2]int, len(tails))
	for i, k := len(tails)-1, tails[len(tails)-1]; i >= 0; i, k = i-1, prev[k] {
		out[i] = ps[k]
	}
	return out
}

// program aligns the two programs and folds their differences.
func (r *Result) program() {
	pa, pb := newProgram(r.Old.Plan), newProgram(r.New.Plan)
	a, b := pa.hashes, pb.hashes
	matched := align(a, b)
	// An edit's record is the new op's for a change or an addition, else
	// the old op's. A plan of millions of operations against a small one
	// is millions of additions, so an edit is 16 bytes: op indices fit in
	// 32 bits (a plan.bin is at most 1 GiB), and the changed fields are an
	// index into fieldSets (-1 for none).
	type edit struct {
		oi, ni int32
		fields int32
		change editChange
		old    bool
	}
	var fieldSets [][]string
	fieldsOf := func(e edit) []string {
		if e.fields < 0 {
			return nil
		}
		return fieldSets[e.fields]
	}
	recOf := func(e edit) opRec {
		if e.old {
			return pa.rec(int(e.oi))
		}
		return pb.rec(int(e.ni))
	}
	var edits []edit
	var removed, added []int32
	// The gaps between matched pairs: pair an old op with a new op of the
	// same kind on the same stream in order ("changed"); the rest were
	// removed or added.
	gap := func(alo, ahi, blo, bhi int) {
		next := blo
		used := map[int]bool{}
		for i := alo; i < ahi; i++ {
			paired := false
			oa := &pa.p.Ops[i]
			for j := next; j < bhi; j++ {
				if ob := &pb.p.Ops[j]; !used[j] && ob.Kind == oa.Kind && ob.Stream == oa.Stream {
					var fields []string
					ra, rb := pa.rec(i), pb.rec(j)
					va, vb := ra.values(), rb.values()
					for k := range va {
						if va[k] != vb[k] {
							fields = append(fields, opFieldNames[k])
						}
					}
					f := int32(-1)
					if fields != nil {
						f = int32(len(fieldSets))
						fieldSets = append(fieldSets, fields)
					}
					edits = append(edits, edit{oi: int32(i), ni: int32(j), fields: f, change: editChanged})
					used[j], next, paired = true, j+1, true
					break
				}
			}
			if !paired {
				removed = append(removed, int32(i))
			}
		}
		for j := blo; j < bhi; j++ {
			if !used[j] {
				added = append(added, int32(j))
			}
		}
	}
	ia, ib := 0, 0
	for _, m := range matched {
		if pa.rec(m[0]).key != pb.rec(m[1]).key {
			continue // equal hashes of unequal keys: left to the gap
		}
		gap(ia, m[0], ib, m[1])
		ia, ib = m[0]+1, m[1]+1
	}
	gap(ia, len(a), ib, len(b))
	// An op removed in one place and added, the same, in another moved.
	// Only the lines of removed ops are looked up, so only added ops with
	// such a line are indexed.
	byLine := map[uint64][]int32{}
	for _, i := range removed {
		byLine[a[i]] = nil
	}
	for _, j := range added {
		if js, ok := byLine[b[j]]; ok {
			byLine[b[j]] = append(js, j)
		}
	}
	movedTo := map[int32]bool{}
	for _, i := range removed {
		js := byLine[a[i]]
		at := -1
		if len(js) > 0 {
			key := pa.rec(int(i)).key
			for x, j := range js {
				if pb.rec(int(j)).key == key {
					at = x
					break
				}
			}
		}
		if at >= 0 {
			edits = append(edits, edit{oi: i, ni: js[at], fields: -1, change: editMoved, old: true})
			movedTo[js[at]] = true
			byLine[a[i]] = slices.Delete(js, at, at+1)
			continue
		}
		edits = append(edits, edit{oi: i, ni: -1, fields: -1, change: editRemoved, old: true})
	}
	edits = slices.Grow(edits, len(added)-len(movedTo))
	for _, j := range added {
		if !movedTo[j] {
			edits = append(edits, edit{oi: -1, ni: j, fields: -1, change: editAdded})
		}
	}
	// Fold in program order (of the new plan where there is one).
	at := func(e edit) int32 {
		if e.ni >= 0 {
			return e.ni
		}
		return e.oi
	}
	sort.SliceStable(edits, func(i, j int) bool { return at(edits[i]) < at(edits[j]) })
	type key struct{ change, phase, kind, fields string }
	idx := map[key]int{}
	for _, e := range edits {
		rec := recOf(e)
		fields := fieldsOf(e)
		k := key{e.change.String(), rec.op.Phase.String(), rec.op.Kind.String(), strings.Join(fields, ", ")}
		g := rec.foldGroup
		n, ok := idx[k]
		if !ok {
			n = len(r.Program)
			idx[k] = n
			ex := OpExample{OldOp: int(e.oi), NewOp: int(e.ni)}
			if e.oi >= 0 {
				ra := pa.rec(int(e.oi))
				ex.OldOpT = ra.brief(fields)
			}
			if e.ni >= 0 {
				rb := pb.rec(int(e.ni))
				ex.NewOpT = rb.brief(fields)
			}
			r.Program = append(r.Program, OpEdit{Change: k.change, Phase: k.phase, Kind: k.kind, Fields: fields, Example: ex})
		}
		pe := &r.Program[n]
		pe.Count++
		if len(pe.Groups) == 0 || pe.Groups[len(pe.Groups)-1] != g {
			if !slices.Contains(pe.Groups, g) {
				pe.Groups = append(pe.Groups, g)
			}
		}
	}
	for i := range r.Program {
		pe := &r.Program[i]
		if pe.Fields == nil {
			pe.Fields = []string{}
		}
		pe.Folded = Fold(pe.Groups)
	}
}

// editChange is what happened to an op, as OpEdit.Change names it.
type editChange uint8

const (
	editChanged editChange = iota
	editMoved
	editRemoved
	editAdded
)

func (c editChange) String() string {
	return [...]string{"changed", "moved", "removed", "added"}[c]
}

// Text of one fold: "backward: 12 waits changed (event) in layers.{3–14}".
func (e OpEdit) String() string {
	what := e.Kind
	if e.Count != 1 {
		what = plural(e.Kind)
	}
	s := fmt.Sprintf("%s: %d %s %s", e.Phase, e.Count, what, e.Change)
	if len(e.Fields) > 0 {
		s += " (" + strings.Join(e.Fields, ", ") + ")"
	}
	return s + " in " + e.Folded
}

func plural(kind string) string {
	switch {
	case strings.HasSuffix(kind, "y") && kind != "copy":
		return kind[:len(kind)-1] + "ies"
	case kind == "copy":
		return "copies"
	}
	return kind + "s"
}

// params compares each matched group's parameters in order: names (a
// rename is a different model, or a forged one), shapes, dtypes, whether
// they train, their aliases and shard dimension.
func (r *Result) params() {
	op, np := r.Old.Plan, r.New.Plan
	newByName := map[string]int{}
	for i := range np.Groups {
		newByName[np.Groups[i].Label()] = i
	}
	desc := func(gp *schedule.GroupParam) [6]string {
		dims := make([]string, len(gp.Shape))
		for i, d := range gp.Shape {
			dims[i] = strconv.FormatInt(d, 10)
		}
		return [6]string{gp.Name, "[" + strings.Join(dims, ",") + "]", gp.DType.String(),
			strconv.FormatBool(gp.RequiresGrad), strings.Join(gp.Aliases, ","), strconv.Itoa(gp.ShardDim)}
	}
	what := [6]string{"name", "shape", "dtype", "requires_grad", "aliases", "shard dim"}
	for oi := range op.Groups {
		og := &op.Groups[oi]
		ni, ok := newByName[og.Label()]
		if !ok {
			continue
		}
		ng := &np.Groups[ni]
		for k := range max(len(og.Params), len(ng.Params)) {
			var o, n [6]string
			label := ""
			if k < len(og.Params) {
				o = desc(&og.Params[k])
				label = og.Params[k].Name
			}
			if k < len(ng.Params) {
				n = desc(&ng.Params[k])
				if label == "" {
					label = ng.Params[k].Name
				}
			}
			if k >= len(og.Params) || k >= len(ng.Params) {
				add(&r.Params, fmt.Sprintf("%s parameter %d", og.Label(), k), o[0], n[0])
				continue
			}
			for f := range what {
				add(&r.Params, fmt.Sprintf("%s %s", label, what[f]), o[f], n[f])
			}
		}
	}
}

// buffers compares buffers by name: added, removed, and what changed of
// the same name (size, kind, pool, group, persistence), folded over groups.
func (r *Result) buffers() {
	op, np := r.Old.Plan, r.New.Plan
	newByName := map[string]int{}
	for i := range np.Buffers {
		newByName[np.Buffers[i].Name] = i
	}
	f := newFolder()
	oldNames := map[string]bool{}
	for i := range op.Buffers {
		ob := &op.Buffers[i]
		oldNames[ob.Name] = true
		g := foldName(op, ob.Group)
		ni, ok := newByName[ob.Name]
		if !ok {
			f.add(g, "buffer "+ob.Kind.String(), "present", "removed")
			continue
		}
		nb := &np.Buffers[ni]
		so, sn := exactBytes(ob.Bytes, nb.Bytes)
		f.addValued(g, ob.Kind.String()+" bytes", so, sn, ob.Bytes, nb.Bytes, UnitBytes)
		f.add(g, ob.Kind.String()+" kind", ob.Kind.String(), nb.Kind.String())
		f.add(g, ob.Kind.String()+" pool", ob.Pool.String(), nb.Pool.String())
		f.add(g, ob.Kind.String()+" group", groupName(op, ob.Group), groupName(np, nb.Group))
		f.add(g, ob.Kind.String()+" persistent", strconv.FormatBool(ob.Persistent), strconv.FormatBool(nb.Persistent))
	}
	for i := range np.Buffers {
		nb := &np.Buffers[i]
		if !oldNames[nb.Name] {
			g := foldName(np, nb.Group)
			f.add(g, "buffer "+nb.Kind.String(), "absent", "added")
		}
	}
	r.Buffers = f.edits()
}

// warnings lists the planner's warnings that appear on one side only.
func (r *Result) warnings() {
	in := func(ws []string) map[string]bool {
		m := map[string]bool{}
		for _, w := range ws {
			m[w] = true
		}
		return m
	}
	o, n := in(r.Old.Plan.Warnings), in(r.New.Plan.Warnings)
	for _, w := range r.Old.Plan.Warnings {
		if !n[w] {
			add(&r.Warnings, "warning", w, "")
		}
	}
	for _, w := range r.New.Plan.Warnings {
		if !o[w] {
			add(&r.Warnings, "warning", "", w)
		}
	}
}
