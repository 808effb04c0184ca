package schedule_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	. "github.com/fsdpc/fsdpc/schedule"
)

// TestOpHoldsNoPointer: Op has no field the garbage collector must scan
// (a slice, string, map or pointer), so a plan's millions of ops cost it
// nothing; lists belong in the plan's tables (oplists.go).
func TestOpHoldsNoPointer(t *testing.T) {
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		switch ty.Kind() {
		case reflect.Struct:
			for i := range ty.NumField() {
				walk(ty.Field(i).Type, path+"."+ty.Field(i).Name)
			}
		case reflect.Array:
			walk(ty.Elem(), path+"[]")
		case reflect.Slice, reflect.String, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			t.Errorf("%s is a %s: the garbage collector scans every op for it", path, ty.Kind())
		}
	}
	walk(reflect.TypeFor[Op](), "Op")
}

// TestCompactLists: compacting keeps every op's lists, gives equal lists
// one run in the order ops first use them, and drops runs no op locates.
func TestCompactLists(t *testing.T) {
	a := []ir.GEMM{{M: 1, N: 2, K: 3, Count: 1}}
	b := []ir.GEMM{{M: 4, N: 5, K: 6, Count: 2}, {M: 7, N: 8, K: 9, Count: 1}}
	p := &Plan{Ops: make([]Op, 5)}
	p.SetOpGEMMs(&Op{}, a) // a run no op locates
	p.SetOpGEMMs(&p.Ops[3], a)
	p.SetOpGEMMs(&p.Ops[1], b)
	p.SetOpGEMMs(&p.Ops[4], b)
	p.SetOpUses(&p.Ops[2], []int32{5, 6})
	p.SetOpUses(&p.Ops[0], []int32{5, 6})
	p.SetOpUses(&p.Ops[4], []int32{7})
	var before [][]ir.GEMM
	var beforeUses [][]int32
	for i := range p.Ops {
		before = append(before, slices.Clone(p.OpGEMMs(&p.Ops[i])))
		beforeUses = append(beforeUses, slices.Clone(p.OpUses(&p.Ops[i])))
	}
	p.CompactLists()
	for i := range p.Ops {
		if got := p.OpGEMMs(&p.Ops[i]); !slices.Equal(got, before[i]) {
			t.Errorf("op %d: GEMMs %v, want %v", i, got, before[i])
		}
		if got := p.OpUses(&p.Ops[i]); !slices.Equal(got, beforeUses[i]) {
			t.Errorf("op %d: uses %v, want %v", i, got, beforeUses[i])
		}
	}
	if want := slices.Concat(b, a); !slices.Equal(p.GEMMTable, want) {
		t.Errorf("GEMM table %v, want %v (b first used by op 1, a by op 3, each once)", p.GEMMTable, want)
	}
	if want := []int32{5, 6, 7}; !slices.Equal(p.UseTable, want) {
		t.Errorf("use table %v, want %v", p.UseTable, want)
	}
	if p.Ops[1].GEMMs != p.Ops[4].GEMMs || p.Ops[0].Uses != p.Ops[2].Uses {
		t.Error("equal lists were given two runs")
	}
}

// TestCheckRefusesSpansOutside: an op whose list leaves its table is an
// error Check names, not a panic in whatever reads the list.
func TestCheckRefusesSpansOutside(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(o *Op, p *Plan)
	}{
		{"GEMMs past the end", func(o *Op, p *Plan) { o.GEMMs = Span{Off: int32(len(p.GEMMTable)), Len: 1} }},
		{"uses past the end", func(o *Op, p *Plan) { o.Uses = Span{Off: 0, Len: int32(len(p.UseTable) + 1)} }},
		{"negative offset", func(o *Op, p *Plan) { o.Uses = Span{Off: -1, Len: 1} }},
		{"negative length", func(o *Op, p *Plan) { o.GEMMs = Span{Off: 0, Len: -1} }},
	} {
		p := tinyPlan()
		tc.set(&p.Ops[7], p)
		if p.OpListsInRange(&p.Ops[7]) {
			t.Errorf("%s: OpListsInRange says yes", tc.name)
		}
		if err := Check(p); err == nil {
			t.Errorf("%s: Check accepts it", tc.name)
		}
	}
}
