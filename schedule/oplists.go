package schedule

import (
	"encoding/binary"
	"fmt"

	"github.com/fsdpc/fsdpc/ir"
)

// Span is a run of one of a plan's shared tables: an op's GEMM shapes in
// Plan.GEMMTable or its further reads in Plan.UseTable. The zero Span is
// the empty list.
type Span struct {
	Off, Len int32
}

// OpGEMMs returns the shapes of o's matrix multiplies (o an op of p).
// The slice is p's own: callers do not change it.
func (p *Plan) OpGEMMs(o *Op) []ir.GEMM {
	if o.GEMMs.Len == 0 {
		return nil
	}
	return p.GEMMTable[o.GEMMs.Off : o.GEMMs.Off+o.GEMMs.Len : o.GEMMs.Off+o.GEMMs.Len]
}

// OpUses returns the further buffers o reads (o an op of p). The slice
// is p's own: callers do not change it.
func (p *Plan) OpUses(o *Op) []int32 {
	if o.Uses.Len == 0 {
		return nil
	}
	return p.UseTable[o.Uses.Off : o.Uses.Off+o.Uses.Len : o.Uses.Off+o.Uses.Len]
}

// SetOpGEMMs makes gs the GEMM shapes of o (an op of p, or one about to
// be appended to p.Ops), appending them to p.GEMMTable.
func (p *Plan) SetOpGEMMs(o *Op, gs []ir.GEMM) {
	o.GEMMs = appendSpan(&p.GEMMTable, gs)
}

// SetOpUses makes us the further buffers o reads (o an op of p, or one
// about to be appended to p.Ops), appending them to p.UseTable.
func (p *Plan) SetOpUses(o *Op, us []int32) {
	o.Uses = appendSpan(&p.UseTable, us)
}

func appendSpan[T any](table *[]T, xs []T) Span {
	if len(xs) == 0 {
		return Span{}
	}
	s := Span{Off: int32(len(*table)), Len: int32(len(xs))}
	*table = append(*table, xs...)
	return s
}

// CompactLists rebuilds p's tables in the order of p.Ops, each distinct
// list once: the form plan.bin's decoder gives, so a plan built in memory
// and the same plan read back are alike field for field, and tables left
// with runs no op locates any more (after ops are removed or their lists
// replaced) shrink to what the ops use.
func (p *Plan) CompactLists() {
	var in listInterner
	gemms, uses := p.GEMMTable, p.UseTable
	p.GEMMTable, p.UseTable = nil, nil
	for i := range p.Ops {
		o := &p.Ops[i]
		o.GEMMs = in.gemms(p, spanOf(gemms, o.GEMMs))
		o.Uses = in.uses(p, spanOf(uses, o.Uses))
	}
}

func spanOf[T any](table []T, s Span) []T {
	if s.Len == 0 {
		return nil
	}
	return table[s.Off : s.Off+s.Len]
}

// OpListsInRange reports whether o's lists lie within p's tables, as
// Check requires before OpGEMMs and OpUses may be called (a plan built or
// changed in memory; the decoder makes only runs that are there).
func (p *Plan) OpListsInRange(o *Op) bool { return checkSpans(p, o) == "" }

// checkSpans says how o's lists leave p's tables, or "".
func checkSpans(p *Plan, o *Op) string {
	for _, c := range []struct {
		name  string
		s     Span
		table int
	}{{"GEMMs", o.GEMMs, len(p.GEMMTable)}, {"Uses", o.Uses, len(p.UseTable)}} {
		if c.s.Off < 0 || c.s.Len < 0 || int64(c.s.Off)+int64(c.s.Len) > int64(c.table) {
			return fmt.Sprintf("its %s run [%d, +%d) leaves the table of %d", c.name, c.s.Off, c.s.Len, c.table)
		}
	}
	return ""
}

// listInterner gives equal lists one run of their table, in the order
// they are first seen.
type listInterner struct {
	gemmRuns, useRuns map[string]Span
	key               []byte
}

func (in *listInterner) gemms(p *Plan, gs []ir.GEMM) Span {
	in.key = in.key[:0]
	for _, g := range gs {
		in.key = binary.AppendVarint(in.key, g.M)
		in.key = binary.AppendVarint(in.key, g.N)
		in.key = binary.AppendVarint(in.key, g.K)
		in.key = binary.AppendVarint(in.key, g.Count)
	}
	return intern(&in.gemmRuns, in.key, &p.GEMMTable, gs)
}

func (in *listInterner) uses(p *Plan, us []int32) Span {
	in.key = in.key[:0]
	for _, u := range us {
		in.key = binary.AppendVarint(in.key, int64(u))
	}
	return intern(&in.useRuns, in.key, &p.UseTable, us)
}

// intern returns the run of table that holds xs, whose encoding is key:
// the one runs gives for key, else a new one appended.
func intern[T any](runs *map[string]Span, key []byte, table *[]T, xs []T) Span {
	if len(xs) == 0 {
		return Span{}
	}
	if s, ok := (*runs)[string(key)]; ok {
		return s
	}
	if *runs == nil {
		*runs = map[string]Span{}
	}
	s := appendSpan(table, xs)
	(*runs)[string(key)] = s
	return s
}
