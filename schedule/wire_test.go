package schedule_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	. "github.com/fsdpc/fsdpc/schedule"
)

var update = flag.Bool("update", false, "rewrite testdata/tiny.plan.hex and the fuzz seed corpus")

const fixturePath = "testdata/tiny.plan.hex"

type zooPlan struct {
	name string
	plan *Plan
	bin  []byte
}

var zooOnce struct {
	sync.Once
	plans []zooPlan
	err   error
}

// zoo plans every zoo model once per test binary.
func zoo(t testing.TB) []zooPlan {
	t.Helper()
	zooOnce.Do(func() {
		for _, name := range plans.Names() {
			src, file, _ := plans.Source(name)
			m, err := ir.Load(file, src)
			if err != nil {
				zooOnce.err = err
				return
			}
			p, err := planner.Plan(m, planner.Options{})
			if err != nil {
				zooOnce.err = fmt.Errorf("%s: %w", name, err)
				return
			}
			b, err := Encode(p)
			if err != nil {
				zooOnce.err = fmt.Errorf("%s: %w", name, err)
				return
			}
			zooOnce.plans = append(zooOnce.plans, zooPlan{name, p, b})
		}
	})
	if zooOnce.err != nil {
		t.Fatal(zooOnce.err)
	}
	return zooOnce.plans
}

func TestRoundTripZoo(t *testing.T) {
	for _, z := range zoo(t) {
		t.Run(z.name, func(t *testing.T) {
			got, err := Decode(z.bin)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, z.plan) {
				t.Fatal("the decoded plan differs from the encoded one")
			}
			again, err := Encode(z.plan)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, z.bin) {
				t.Fatal("encoding the same plan twice gave different bytes")
			}
			re, err := Encode(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(re, z.bin) {
				t.Fatal("re-encoding the decoded plan gave different bytes")
			}
			t.Logf("%s: plan.bin %d bytes (%d ops, %d buffers, %d groups)", z.name, len(z.bin), len(z.plan.Ops), len(z.plan.Buffers), len(z.plan.Groups))
		})
	}
}

// TestCompleteness fills every field of a Plan, recursively, with a
// distinct non-zero value and checks the round trip keeps them all: a field
// added to plan.go without a line in wire.go fails here.
func TestCompleteness(t *testing.T) {
	p := new(Plan)
	f := filler{t: t, next: 2}
	f.fill(reflect.ValueOf(p).Elem(), "Plan")
	if f.leaves < 80 {
		t.Fatalf("only %d fields filled", f.leaves)
	}
	b, err := EncodeUnchecked(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeUnchecked(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := firstDiff(reflect.ValueOf(got).Elem(), reflect.ValueOf(p).Elem(), "Plan"); diff != "" {
		t.Fatalf("the round trip loses %s: is it missing from wire.go?", diff)
	}
	// And every field changes the bytes: flipping one leaf at a time.
	zeroed := 0
	f.eachLeaf(reflect.ValueOf(p).Elem(), func(v reflect.Value, path string) {
		old := reflect.New(v.Type()).Elem()
		old.Set(v)
		v.Set(reflect.Zero(v.Type()))
		if bb, err := EncodeUnchecked(p); err == nil && bytes.Equal(bb, b) {
			t.Errorf("%s does not reach the encoding", path)
		}
		v.Set(old)
		zeroed++
	})
	if zeroed != f.leaves {
		t.Fatalf("visited %d leaves, filled %d", zeroed, f.leaves)
	}
}

// filler gives every leaf field a distinct non-zero value, keeping the
// few that index tables (every list gets two elements) in range.
type filler struct {
	t      *testing.T
	next   int
	leaves int
}

// indexFields must stay within their tables: each is set to 1.
var indexFields = map[string]bool{
	"Buffer.Group": true, "Op.Group": true, "Op.Module": true, "Op.Buffer": true,
	"Op.Source": true, "Op.Event": true, "Prediction.PeakOp": true,
}

// indexLists are lists of table indices: each element is set to 1.
var indexLists = map[string]bool{"Plan.UseTable": true}

// spanFields locate an op's list in one of the plan's tables (Plan.GEMMTable,
// UseTable), which the wire writes under each op instead: each is set to
// the whole table (two elements) and counts as one leaf. The tables
// themselves are filled as lists.
// The value is the table's element type.
var spanFields = map[string]reflect.Type{"Op.GEMMs": reflect.TypeFor[ir.GEMM](), "Op.Uses": reflect.TypeFor[int]()}

// tableFields are the plan's tables, on the wire only through spanFields.
var tableFields = map[string]bool{"Plan.GEMMTable": true, "Plan.UseTable": true}

func (f *filler) value() int {
	f.next++
	return f.next
}

func (f *filler) fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			fv := v.Field(i)
			switch name := v.Type().Name() + "." + sf.Name; {
			case indexFields[name]:
				fv.SetInt(1)
				f.leaves++
			case indexLists[name]:
				fv.Set(reflect.MakeSlice(fv.Type(), 2, 2))
				fv.Index(0).SetInt(1)
				fv.Index(1).SetInt(1)
				f.leaves += 2
			case spanFields[name] != nil:
				fv.Set(reflect.ValueOf(Span{Off: 0, Len: 2}))
				f.leaves++
			case name == "Plan.Events":
				fv.SetInt(2) // at most one per op; the ops list has two
				f.leaves++
			default:
				f.fill(fv, path+"."+sf.Name)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fallthrough
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d·", f.value()))
		f.leaves++
	case reflect.Int, reflect.Int32, reflect.Int64:
		n := int64(f.value())
		if n%2 == 1 {
			n = -n * 1000003 // negative and multi-byte too
		}
		v.SetInt(n)
		f.leaves++
	case reflect.Uint8:
		k := enumCount(f.t, v.Type())
		v.SetUint(uint64(1 + f.value()%(k-1)))
		f.leaves++
	case reflect.Float64:
		v.SetFloat(float64(f.value()) + 0.1)
		f.leaves++
	case reflect.Bool:
		v.SetBool(true)
		f.leaves++
	default:
		f.t.Fatalf("%s: the completeness test cannot fill a %s; teach it (and wire.go) the new kind", path, v.Type())
	}
}

func (f *filler) eachLeaf(v reflect.Value, fn func(reflect.Value, string)) {
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				if spanFields[v.Type().Name()+"."+v.Type().Field(i).Name] != nil {
					fn(v.Field(i), path+"."+v.Type().Field(i).Name)
					continue
				}
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		default:
			fn(v, path)
		}
	}
	walk(v, "Plan")
}

// enumCount is the number of values of a uint8 enum: those whose String
// is a name rather than "kind(N)".
func enumCount(t *testing.T, typ reflect.Type) int {
	for i := range 256 {
		v := reflect.New(typ).Elem()
		v.SetUint(uint64(i))
		s, ok := v.Interface().(fmt.Stringer)
		if !ok {
			t.Fatalf("enum %s has no String method", typ)
		}
		if strings.HasSuffix(s.String(), fmt.Sprintf("(%d)", i)) {
			if i < 2 {
				t.Fatalf("enum %s has %d values", typ, i)
			}
			return i
		}
	}
	return 256
}

func firstDiff(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if d := firstDiff(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s (length %d, want %d)", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := firstDiff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return fmt.Sprintf("%s (%v, want %v)", path, a.Interface(), b.Interface())
	}
	return ""
}

// The record block of wire.go's header comment and of docs/plan-format.md
// are the same, and list every record's fields in the order of plan.go's
// structs and of the encoder's output.
func TestLayoutDocumented(t *testing.T) {
	src, err := os.ReadFile("wire.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/plan-format.md")
	if err != nil {
		t.Fatal(err)
	}
	code, docs := recordBlock(t, string(src), "//\t"), recordBlock(t, string(doc), "")
	if code != docs {
		t.Fatalf("the record blocks of wire.go and docs/plan-format.md differ:\n%s\n---\n%s", code, docs)
	}
	records := parseRecords(code)

	// The encoder's order: the first appearance of each field below each
	// path in the trace of a plan with every list non-empty.
	p := new(Plan)
	(&filler{t: t, next: 2}).fill(reflect.ValueOf(p).Elem(), "Plan")
	tr, err := TraceUnchecked(p)
	if err != nil {
		t.Fatal(err)
	}
	encoded := map[string][]string{}
	index := regexp.MustCompile(`\[\d+\]`)
	for _, e := range tr {
		if !strings.Contains(e.Field, ".") && !strings.HasSuffix(e.Field, " count") && e.Field != "Events" {
			continue // magic, version, size, checksum
		}
		if strings.HasPrefix(e.Field, "Strings") {
			continue
		}
		parts := strings.Split(strings.TrimSuffix(index.ReplaceAllString(e.Field, "[]"), " count"), ".")
		for k := range parts {
			parent, child := strings.Join(parts[:k], "."), strings.TrimSuffix(parts[k], "[]")
			if !slices.Contains(encoded[parent], child) {
				encoded[parent] = append(encoded[parent], child)
			}
		}
	}

	// Every struct reachable from Plan is a record, found with the path the
	// trace gives its fields.
	seen := map[string]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		name := typ.Name()
		seen[name] = true
		var fields []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			if tableFields[name+"."+f.Name] {
				continue
			}
			fields = append(fields, f.Name)
			sub := path + "." + f.Name
			if path == "" {
				sub = f.Name
			}
			switch {
			case spanFields[name+"."+f.Name] != nil:
				// On the wire, the list of its table's elements.
				if elem := spanFields[name+"."+f.Name]; elem.Kind() == reflect.Struct {
					walk(elem, sub+"[]")
				}
			case f.Type.Kind() == reflect.Struct:
				walk(f.Type, sub)
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				walk(f.Type.Elem(), sub+"[]")
			}
		}
		if !slices.Equal(records[name], fields) {
			t.Errorf("record %s: documented fields %v, plan.go has %v", name, records[name], fields)
		}
		if !slices.Equal(encoded[path], fields) {
			t.Errorf("record %s: encoded fields %v, plan.go has %v", name, encoded[path], fields)
		}
	}
	walk(reflect.TypeFor[Plan](), "")
	for name := range records {
		if !seen[name] {
			t.Errorf("the layout documents a record %s that plan.go does not have", name)
		}
	}
}

// recordBlock returns the block of lines that starts with "Plan ", each
// without its prefix.
func recordBlock(t *testing.T, text, prefix string) string {
	lines := strings.Split(text, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix+"Plan ") })
	if start < 0 {
		t.Fatalf("no record block (a line %q)", prefix+"Plan ")
	}
	var block []string
	for _, l := range lines[start:] {
		l, ok := strings.CutPrefix(l, prefix)
		if !ok || strings.TrimSpace(l) == "" || strings.HasPrefix(l, "```") {
			break
		}
		block = append(block, l)
	}
	return strings.Join(block, "\n")
}

// parseRecords reads "Name  type Field, type Field (note), …" records,
// continued on indented lines, into each record's field names.
func parseRecords(block string) map[string][]string {
	records := map[string][]string{}
	var name string
	note := regexp.MustCompile(`\([^)]*\)`)
	for _, l := range strings.Split(block, "\n") {
		if l[0] != ' ' {
			name, l, _ = strings.Cut(l, " ")
		}
		for _, item := range strings.Split(note.ReplaceAllString(l, ""), ",") {
			if words := strings.Fields(item); len(words) > 0 {
				records[name] = append(records[name], words[len(words)-1])
			}
		}
	}
	return records
}

// The wire codes of plan.bin's enums are their positions in wire.go's
// own tables, whatever the Go constants' values: renumbering a code is a
// format change. This pins each table by name, code i the i-th word.
func TestWireCodesPinned(t *testing.T) {
	for what, want := range map[string]string{
		"op kind":       "alloc free record wait copy-in h2d all-gather copy-out reshard forward backward reduce-copy-in divide reduce-scatter all-reduce cast-grad accumulate d2h sync optimizer",
		"stream":        "compute copy-in all-gather reduce-scatter all-reduce host",
		"pool":          "compute copy-in reduce-scatter all-reduce host",
		"buffer kind":   "sharded-params sharded-grads optimizer-state cast-temp h2d-temp all-gather-out unsharded post-forward-slice unsharded-grads accum-grads reduce-scatter-in reduce-scatter-out activations recompute",
		"process group": "none shard replicate post-forward",
		"phase":         "forward backward optimizer",
		"reshard":       "true false to",
		"reduce op":     "none avg sum premul-sum",
		"dtype":         wireDTypeNames,
	} {
		tab, ok := WireTables[what]
		if !ok {
			t.Errorf("no wire table of %s", what)
			continue
		}
		if g := strings.Join(tab.Names, " "); g != want {
			t.Errorf("%s codes:\n got %s\nwant %s\nrenumbering an enum's wire codes changes plan.bin: bump FormatVersion and update this test", what, g, want)
		}
	}
	if len(WireTables) != 9 {
		t.Errorf("%d wire tables, 9 pinned: pin the new one here", len(WireTables))
	}
}

// TestWireTablesCoverEnums: every value of each enum plan.bin holds has a
// wire code, once; a value added to a Go enum (schedule's or ir.DType)
// without one fails here rather than at the first plan that uses it.
func TestWireTablesCoverEnums(t *testing.T) {
	for _, tab := range WireTables {
		n := enumCount(t, tab.Type)
		if n > 32 {
			t.Errorf("%s has %d values?", tab.Type, n)
		}
		seen := map[int]int{}
		for code, v := range tab.Values {
			if v >= n {
				t.Errorf("%s: wire code %d is %s, not one of its values", tab.Type, code, tab.Names[code])
			}
			if c, dup := seen[v]; dup {
				t.Errorf("%s: %s has wire codes %d and %d", tab.Type, tab.Names[code], c, code)
			}
			seen[v] = code
		}
		if len(seen) != n {
			t.Errorf("%d %ss, %d with a wire code: add the new ones at the end of its table in wire.go and bump FormatVersion", n, tab.Type, len(seen))
		}
	}
}

// wireDTypeNames are the element types' plan.bin codes, frozen: code i is
// the i-th name.
const wireDTypeNames = "invalid fp64 fp32 bf16 fp16 fp8_e4m3 fp8_e5m2 int64 int32 int8 uint8 bool"

// TestWireDTypesByName: what plan.bin holds for an element type is its
// code in the frozen table, found by its name, whatever ir.DType's value
// for it, in a dtype field and in the order of PeakFLOPS; so reordering
// ir's constants cannot change a plan.bin (ir's values would move, the
// names and the bytes would not).
func TestWireDTypesByName(t *testing.T) {
	names := strings.Fields(wireDTypeNames)
	byName := func(name string) ir.DType {
		if name == "invalid" {
			return ir.DTypeInvalid
		}
		dt, ok := ir.ParseDType(name)
		if !ok {
			t.Fatalf("ir has no dtype %q", name)
		}
		return dt
	}
	offset := func(tr []TraceEntry, field string) int {
		for _, e := range tr {
			if e.Field == field {
				return e.Offset
			}
		}
		t.Fatalf("no field %s in the trace", field)
		return 0
	}
	p := tinyPlan()
	p.Cluster.PeakFLOPS = make([]float64, len(names))
	for code, name := range names {
		p.Cluster.PeakFLOPS[byName(name)] = float64(code+1) * 1e12
	}
	for code, name := range names {
		p.Ops[0].DType = byName(name)
		b, err := EncodeUnchecked(p)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := TraceUnchecked(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := b[offset(tr, "Ops[0].DType")]; int(got) != code {
			t.Errorf("%s is written as %d, want its wire code %d", name, got, code)
		}
		q, err := DecodeUnchecked(b)
		if err != nil {
			t.Fatal(err)
		}
		if q.Ops[0].DType != p.Ops[0].DType || !slices.Equal(q.Cluster.PeakFLOPS, p.Cluster.PeakFLOPS) {
			t.Errorf("%s: decoded as %s, peaks %v; want %v", name, q.Ops[0].DType, q.Cluster.PeakFLOPS, p.Cluster.PeakFLOPS)
		}
		if code > 0 {
			continue
		}
		for i := range names {
			u, n := binary.Uvarint(b[offset(tr, fmt.Sprintf("Cluster.PeakFLOPS[%d]", i)):])
			if got := math.Float64frombits(bits.ReverseBytes64(u)); n <= 0 || got != float64(i+1)*1e12 {
				t.Errorf("PeakFLOPS[%d] on the wire is %g, want %s's %g", i, got, names[i], float64(i+1)*1e12)
			}
		}
	}
}

// tinyPlan is the hand-built plan of the pinned fixture: one group of two
// parameters (one tied, one frozen) on two ranks, gathered, used and freed.
func tinyPlan() *Plan {
	p := &Plan{
		Header: Header{
			FsdpcVersion: "0.1.0-test",
			InputSHA256:  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			Model:        "tiny",
			Semantics:    "torch-fsdp2/2.8",
		},
		Cluster: Cluster{GPU: "h100-sxm", Preset: "h100-sxm", WorldSize: 2, GPUsPerNode: 2, Replicate: 1, Shard: 2,
			IntraNodeBandwidth: 450e9, InterNodeBandwidth: 50e9, HBMBytes: 80 << 30, MemoryBudget: 72 << 30,
			PeakFLOPS: []float64{0, 67e12, 67e12, 989e12}, HBMBandwidth: 3.35e12, HostBandwidth: 64e9},
		Train: Train{MicroBatch: 1, SeqLen: 128, GradAccum: 1, Checkpointing: "none", Optimizer: "adamw", OptimizerImplementation: "fused", OptimizerStateBytes: 8, MaxGradNorm: 1, ExpandableSegments: true, ModelFLOPsPerToken: 1.5e9},
		Groups: []Group{{
			Name:    "embed",
			Modules: []string{"embed", "lm_head"},
			Params: []GroupParam{
				{Name: "embed.weight", Shape: []int64{3, 4}, DType: ir.FP32, RequiresGrad: true, Aliases: []string{"lm_head.weight"},
					ChunkRows: 2, ShardNumel: 8, Offset: 0, GradOffset: 0, GatherDType: ir.BF16, StateOrder: 1},
				{Name: "embed.scale", Shape: []int64{3}, DType: ir.FP32, ChunkRows: 2, ShardNumel: 2, Offset: 8, GradOffset: -1, GatherDType: ir.BF16},
			},
			ShardNumel: 10, GradShardNumel: 8, ShardBytes: 20,
			Policy: GroupPolicy{Reshard: ReshardFalse, PrefetchForward: 1, PrefetchBackward: 2,
				Orig: ir.FP32, Param: ir.BF16, Reduce: ir.FP32, Output: ir.BF16, CastForwardInputs: true,
				ReduceScatterOp: ReducePremulSum, AllReduceOp: ReduceAvg, PremulFactor: 0.5, PreDivide: 1, PostDivide: 2},
			DeferredReduce: true,
		}},
		Modules:       []string{"embed", "lm_head"},
		ElemRecompute: []int64{12, 0},
		Buffers: []Buffer{
			{Name: "embed.params", Kind: BufShardedParams, Pool: PoolCompute, Group: 0, Bytes: 40, Persistent: true},
			{Name: "embed.all-gather", Kind: BufAllGatherOut, Pool: PoolCopyIn, Group: 0, Bytes: 40},
			{Name: "embed.grads", Kind: BufShardedGrads, Pool: PoolCompute, Group: 0, Bytes: 32, Persistent: true},
		},
		Events:     2,
		EventNames: []string{"embed.copy-in", "embed.all-gather"},
		Ops: []Op{
			{Kind: OpAlloc, Stream: StreamCopyIn, Group: 0, Module: -1, Buffer: 1, Source: -1, Event: -1, Bytes: 40},
			{Kind: OpCopyIn, Stream: StreamCopyIn, Group: 0, Module: -1, Buffer: 1, Source: 0, Event: -1, DType: ir.BF16, Bytes: 20},
			{Kind: OpRecord, Stream: StreamCopyIn, Group: 0, Module: -1, Buffer: -1, Source: -1, Event: 0},
			{Kind: OpWait, Stream: StreamAllGather, Group: 0, Module: -1, Buffer: -1, Source: -1, Event: 0},
			{Kind: OpAllGather, Stream: StreamAllGather, Group: 0, Module: -1, Buffer: 1, Source: 1, Event: -1,
				PG: PGShard, PGSize: 2, DType: ir.BF16, Bytes: 40},
			{Kind: OpRecord, Stream: StreamAllGather, Group: 0, Module: -1, Buffer: -1, Source: -1, Event: 1},
			{Kind: OpWait, Stream: StreamCompute, Group: 0, Module: -1, Buffer: -1, Source: -1, Event: 1},
			{Kind: OpForward, Stream: StreamCompute, Group: 0, Module: 0, Buffer: -1, Source: 1, Event: -1, DType: ir.BF16, FLOPs: 1.5e6},
			{Kind: OpFree, Stream: StreamCompute, Group: 0, Module: -1, Buffer: 1, Source: -1, Event: -1},
			{Kind: OpDivide, Stream: StreamCompute, Phase: PhaseBackward, Group: 0, Module: -1, Buffer: 2, Source: -1, Event: -1,
				DType: ir.FP32, Reduce: ReduceSum, Factor: 2},
			{Kind: OpOptimizer, Stream: StreamHost, Phase: PhaseOptimizer, Micro: 0, Group: 0, Module: -1, Buffer: 0, Source: 2, Event: -1, Bytes: 40},
		},
		Warnings: []string{"embed: a warning … in UTF-8"},
	}
	p.SetOpGEMMs(&p.Ops[7], []ir.GEMM{{M: 250, N: 60, K: 50, Count: 1}})
	return p
}

// hexFixture prints a plan.bin one field per line: offset, bytes, field.
func hexFixture(b []byte, tr []TraceEntry) string {
	var s strings.Builder
	s.WriteString("# The plan.bin of tinyPlan (wire_test.go), one field per line: offset, bytes | field.\n")
	s.WriteString("# It pins the layout of docs/plan-format.md. Regenerate: go test ./schedule -run TestFixture -update\n")
	for i, e := range tr {
		end := len(b)
		if i+1 < len(tr) {
			end = tr[i+1].Offset
		}
		for off := e.Offset; off < end; off += 16 {
			chunk := b[off:min(end, off+16)]
			label := ""
			if off == e.Offset {
				label = e.Field
			}
			line := fmt.Sprintf("%04x  %-47s | %s", off, fmt.Sprintf("% x", chunk), label)
			s.WriteString(strings.TrimRight(line, " |") + "\n")
		}
	}
	return s.String()
}

func parseHexFixture(t testing.TB, text string) []byte {
	var b []byte
	for n, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		data, _, _ := strings.Cut(line, "|")
		fields := strings.Fields(data)
		off, err := strconv.ParseUint(fields[0], 16, 32)
		if err != nil || int(off) != len(b) {
			t.Fatalf("%s:%d: offset %q, want %04x", fixturePath, n+1, fields[0], len(b))
		}
		for _, h := range fields[1:] {
			x, err := strconv.ParseUint(h, 16, 8)
			if err != nil {
				t.Fatalf("%s:%d: %q is not a hex byte", fixturePath, n+1, h)
			}
			b = append(b, byte(x))
		}
	}
	return b
}

func TestFixture(t *testing.T) {
	p := tinyPlan()
	if err := Check(p); err != nil {
		t.Fatal(err)
	}
	b, tr, err := EncodeTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	if plain, _ := Encode(p); !bytes.Equal(plain, b) {
		t.Fatal("EncodeTrace and Encode differ")
	}
	text := hexFixture(b, tr)
	if *update {
		if err := os.WriteFile(fixturePath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		writeSeedCorpus(t, b, tr)
	}
	want, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatalf("%v (run go test ./schedule -run TestFixture -update)", err)
	}
	if string(want) != text {
		w, g := strings.Split(string(want), "\n"), strings.Split(text, "\n")
		i := 0
		for i < min(len(w), len(g)) && w[i] == g[i] {
			i++
		}
		at := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end)"
		}
		t.Errorf("the encoding of tinyPlan differs from %s at line %d:\n got %s\nwant %s\nIf the format changed on purpose, follow docs/plan-format.md (bump FormatVersion, update the doc) and run with -update.",
			fixturePath, i+1, at(g), at(w))
	}
	fixture := parseHexFixture(t, string(want))
	got, err := Decode(fixture)
	if err != nil {
		t.Fatalf("decoding %s: %v", fixturePath, err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("%s decodes to a different plan", fixturePath)
	}
}

// writeSeedCorpus writes the committed fuzz seeds: the fixture and a few
// near misses that reach the deeper checks.
func writeSeedCorpus(t *testing.T, b []byte, tr []TraceEntry) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{
		"tiny":            b,
		"tiny-truncated":  b[:len(b)/2],
		"tiny-version-2":  binary.LittleEndian.AppendUint32(bytes.Clone(b[:4]), 2),
		"tiny-bad-op":     replace(t, b, tr, "Ops[4].Buffer", binary.AppendUvarint(nil, 9)),
		"tiny-many-ops":   replace(t, b, tr, "Ops count", binary.AppendUvarint(nil, 1<<40)),
		"tiny-bad-string": replace(t, b, tr, "Header.Model", binary.AppendUvarint(nil, 300)),
	}
	for name, data := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// reseal fixes a modified file's size field and checksum, so a test reaches
// the checks behind them.
func reseal(b []byte) []byte {
	b = bytes.Clone(b)
	if len(b) < 20 {
		return b
	}
	binary.LittleEndian.PutUint64(b[8:], uint64(len(b)))
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func fieldAt(t *testing.T, tr []TraceEntry, field string) (start, end int) {
	t.Helper()
	for i, e := range tr {
		if e.Field == field {
			return e.Offset, tr[i+1].Offset
		}
	}
	t.Fatalf("no field %q in the trace", field)
	return 0, 0
}

// replace swaps one field's bytes for others and reseals the file.
func replace(t *testing.T, b []byte, tr []TraceEntry, field string, with []byte) []byte {
	t.Helper()
	start, end := fieldAt(t, tr, field)
	return reseal(append(append(bytes.Clone(b[:start]), with...), b[end:]...))
}

func TestRefusals(t *testing.T) {
	p := tinyPlan()
	b, tr, err := EncodeTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	uv := func(x uint64) []byte { return binary.AppendUvarint(nil, x) }
	sv := func(x int64) []byte { return binary.AppendVarint(nil, x) }
	off := func(field string) int { s, _ := fieldAt(t, tr, field); return s }
	toml, _, _ := plans.Source("gpt2-124m")
	var text bytes.Buffer
	WriteText(&text, p)
	flipped := bytes.Clone(b)
	flipped[off("Ops[7].FLOPs")] ^= 0x10
	smaller := bytes.Clone(b)
	binary.LittleEndian.PutUint64(smaller[8:], uint64(len(b)-1))
	strCount, _ := fieldAt(t, tr, "Strings count")
	firstBody := off("Header.FsdpcVersion")
	s0start, s0end := fieldAt(t, tr, `Strings[0] "0.1.0-test"`)
	s1start, s1end := fieldAt(t, tr, `Strings[1] "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`)
	tooSmall := bytes.Clone(b[:20])
	binary.LittleEndian.PutUint64(tooSmall[8:], 16)
	nstr := int(b[strCount])
	// An event index below a forged Events count but beyond an int32:
	// Events is checked against the ops only after them.
	evStart, evEnd := fieldAt(t, tr, "Events")
	hugeEvent := replace(t, replace(t, b, tr, "Ops[2].Event", uv(1<<31+1)), tr, "Events", uv(1<<32))
	hugeEventAt := off("Ops[2].Event") + len(uv(1<<32)) - (evEnd - evStart)

	cases := []struct {
		name   string
		in     []byte
		class  error
		offset int    // -1: not a *FormatError
		says   string // in the message, with the field
	}{
		{"empty", nil, ErrBadMagic, 0, "the file is empty"},
		{"white space", []byte("  \n"), ErrBadMagic, 0, "only white space"},
		{"TOML model", toml, ErrBadMagic, 0, "TOML model file"},
		{"text form", text.Bytes(), ErrBadMagic, 0, "text form of a plan"},
		{"JSON", []byte(`{"plan": 1}`), ErrBadMagic, 0, "JSON"},
		{"gzip", []byte("\x1f\x8b\x08\x00rest"), ErrBadMagic, 0, "gzip"},
		{"binary", []byte{0, 1, 2, 3, 4, 5}, ErrBadMagic, 0, "starts with 00 01 02 03"},
		{"half a magic", b[:2], ErrTruncated, 2, "only 2 bytes"},
		{"no version", b[:6], ErrTruncated, 6, "(version)"},
		{"version 0", append(bytes.Clone(b[:4]), 0, 0, 0, 0), ErrMalformed, 4, "version 0 does not exist"},
		{"no size", b[:12], ErrTruncated, 12, "(size)"},
		{"size too small", tooSmall, ErrMalformed, 8, "less than a header and checksum"},
		{"cut short", b[:len(b)-1], ErrTruncated, len(b) - 1, "cut short"},
		{"cut in half", b[:len(b)/2], ErrTruncated, len(b) / 2, "cut short"},
		{"trailing bytes", append(bytes.Clone(b), 0, 0), ErrTrailingBytes, len(b), "2 bytes follow the end"},
		{"bit flip", flipped, ErrChecksum, len(b) - 4, "the file is corrupt"},
		{"wrong size", smaller, ErrChecksum, len(b) - 4, "neither checksum matches"},
		{"huge string table", replace(t, b, tr, "Strings count", uv(1<<50)), ErrLength, 16, "(Strings count)"},
		{"huge string", reseal(append(append(bytes.Clone(b[:s0start]), append(uv(1<<20), b[s0start+1:s0end]...)...), b[s0end:]...)),
			ErrLength, s0start, "(Strings[0].length)"},
		{"huge ops count", replace(t, b, tr, "Ops count", uv(1<<40)), ErrLength, off("Ops count"), "(Ops count)"},
		{"huge shape", replace(t, b, tr, "Groups[0].Params[1].Shape count", uv(5000)), ErrLength,
			off("Groups[0].Params[1].Shape count"), "(Groups[0].Params[1].Shape count)"},
		{"too many events", replace(t, b, tr, "Events", uv(12)), ErrLength, off("Events"), "every event needs an op"},
		{"op kind", replace(t, b, tr, "Ops[3].Kind", []byte{200}), ErrEnum, off("Ops[3].Kind"), "(Ops[3].Kind): 200 is not one of its 20 values"},
		{"dtype", replace(t, b, tr, "Groups[0].Params[0].DType", []byte{99}), ErrEnum, off("Groups[0].Params[0].DType"), "(Groups[0].Params[0].DType)"},
		{"reshard", replace(t, b, tr, "Groups[0].Policy.Reshard", []byte{3}), ErrEnum, off("Groups[0].Policy.Reshard"), "(Groups[0].Policy.Reshard)"},
		{"buffer index", replace(t, b, tr, "Ops[4].Buffer", uv(4)), ErrIndex, off("Ops[4].Buffer"), "(Ops[4].Buffer): 3 is outside the 3 buffers"},
		{"event index", replace(t, b, tr, "Ops[2].Event", uv(3)), ErrIndex, off("Ops[2].Event"), "(Ops[2].Event)"},
		{"event index beyond int32", hugeEvent, ErrIndex, hugeEventAt, "(Ops[2].Event): 2147483648 does not fit in 32 bits"},
		{"micro beyond int32", replace(t, b, tr, "Ops[3].Micro", sv(1<<31)), ErrMalformed, off("Ops[3].Micro"),
			"(Ops[3].Micro): 2147483648 does not fit in 32 bits"},
		{"negative micro beyond int32", replace(t, b, tr, "Ops[3].Micro", sv(-1<<31-1)), ErrMalformed, off("Ops[3].Micro"),
			"(Ops[3].Micro): -2147483649 does not fit in 32 bits"},
		{"group size beyond int32", replace(t, b, tr, "Ops[5].PGSize", sv(1<<40)), ErrMalformed, off("Ops[5].PGSize"),
			"(Ops[5].PGSize): 1099511627776 does not fit in 32 bits"},
		{"group index", replace(t, b, tr, "Buffers[1].Group", uv(2)), ErrIndex, off("Buffers[1].Group"), "(Buffers[1].Group): 1 is outside the 1 groups"},
		{"string index", replace(t, b, tr, "Header.Model", uv(300)), ErrIndex, off("Header.Model"), "(Header.Model): string 300 is outside"},
		{"string order", replace(t, b, tr, "Header.InputSHA256", uv(3)), ErrMalformed, off("Header.InputSHA256"), "first-use order"},
		{"non-minimal number", replace(t, b, tr, "Ops count", []byte{0x80 | 11, 0}), ErrMalformed, off("Ops count"), "not minimally encoded"},
		{"65-bit number", replace(t, b, tr, "Cluster.HBMBytes", append(bytes.Repeat([]byte{0xff}, 9), 2)), ErrMalformed,
			off("Cluster.HBMBytes"), "does not fit in 64 bits"},
		{"boolean", replace(t, b, tr, "Groups[0].Root", []byte{2}), ErrMalformed, off("Groups[0].Root"), "(Groups[0].Root): a boolean is 0 or 1"},
		{"duplicate string", reseal(append(append(bytes.Clone(b[:s1start]), b[s0start:s0end]...), b[s1end:]...)),
			ErrMalformed, s1start, `(Strings[1]): "0.1.0-test" is in the string table twice`},
		{"unused string", reseal(append(append(append(append(bytes.Clone(b[:strCount]), byte(nstr+1)), b[strCount+1:firstBody]...), 1, 'x'), b[firstBody:]...)),
			ErrMalformed, 16, "never used"},
		{"bytes after the sections", reseal(append(append(bytes.Clone(b[:len(b)-4]), 0), b[len(b)-4:]...)), ErrTrailingBytes,
			len(b) - 4, "the sections end 1 byte before the checksum"},
		{"sections end early", reseal(append(bytes.Clone(b[:off("Ops[10].Uses count")]), b[len(b)-4:]...)), ErrTruncated,
			off("Ops[10].Uses count"), "(Ops[10].Uses count): the sections end"},
		{"fails Check", replace(t, b, tr, "Cluster.WorldSize", sv(3)), ErrInvalidPlan, -1, "cluster 3 = 1 × 2 is inconsistent"},
		{"frees twice", replace(t, b, tr, "Ops[10].Kind", []byte{byte(OpFree)}), ErrInvalidPlan, -1, "op 10"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Decode(c.in)
			if err == nil {
				t.Fatalf("decoded: %+v", p.Header)
			}
			if !errors.Is(err, c.class) {
				t.Fatalf("error %q is not %q", err, c.class)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
			var fe *FormatError
			if c.offset >= 0 {
				if !errors.As(err, &fe) {
					t.Fatalf("error %q is not a *FormatError", err)
				}
				if fe.Offset != c.offset {
					t.Errorf("error at offset %d, want %d: %v", fe.Offset, c.offset, err)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("byte %d (", c.offset)) {
					t.Errorf("error %q does not name byte %d", err, c.offset)
				}
			}
		})
	}

	t.Run("newer version", func(t *testing.T) {
		in := binary.LittleEndian.AppendUint32(bytes.Clone(b[:4]), FormatVersion+6)
		_, err := Decode(append(in, b[8:]...))
		var ve *VersionError
		if !errors.Is(err, ErrNewerVersion) || !errors.As(err, &ve) {
			t.Fatalf("error %v is not a newer-version error", err)
		}
		for _, want := range []string{fmt.Sprintf("version %d", FormatVersion+6), fmt.Sprintf("version %d and older", FormatVersion), "upgrade fsdpc"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
}

// Encode refuses what Decode would refuse, naming the field.
func TestEncodeRefusals(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(p *Plan)
		class error
		says  string
	}{
		{"op kind", func(p *Plan) { p.Ops[3].Kind = 200 }, ErrEnum, "Ops[3].Kind: 200 is not one of its 20 values"},
		{"dtype", func(p *Plan) { p.Groups[0].Policy.Output = 77 }, ErrEnum, "Groups[0].Policy.Output"},
		{"source index", func(p *Plan) { p.Ops[1].Source = 7 }, ErrIndex, "Ops[1].Source: 7 is outside the 3 buffers"},
		{"module index", func(p *Plan) { p.Ops[7].Module = -2 }, ErrIndex, "Ops[7].Module"},
		{"negative events", func(p *Plan) { p.Events = -1 }, ErrMalformed, "Events: negative count"},
		{"more events than ops", func(p *Plan) { p.Events = 40 }, ErrLength, "every event needs an op"},
		{"fails Check", func(p *Plan) { p.Groups[0].Params[1].Offset = 9 }, ErrInvalidPlan, "embed.scale at offset 9, want 8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := tinyPlan()
			c.edit(p)
			_, err := Encode(p)
			if !errors.Is(err, c.class) || !strings.Contains(fmt.Sprint(err), c.says) {
				t.Fatalf("error %v, want %v saying %q", err, c.class, c.says)
			}
			if err := WriteFile(filepath.Join(t.TempDir(), "plan.bin"), p); !errors.Is(err, c.class) {
				t.Fatalf("WriteFile: %v", err)
			}
		})
	}
}

// Whatever the counts claim, decoding allocates a small multiple of the
// input at most: each count is set to the largest value the decoder accepts
// (found by bisection), alone and nested three deep.
func TestAllocationBound(t *testing.T) {
	// Room to lie about counts: 64 KiB of ops after them.
	p := tinyPlan()
	for range 4000 {
		p.Ops = append(p.Ops, Op{Kind: OpWait, Stream: StreamHost, Phase: PhaseOptimizer, Group: -1, Module: -1, Buffer: -1, Source: -1, Event: 1})
	}
	b, tr, err := EncodeTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	// lie sets the named counts, back to front so earlier offsets stay put.
	lie := func(fields []string, counts []uint64) []byte {
		in := b
		for i := len(fields) - 1; i >= 0; i-- {
			start, end := fieldAt(t, tr, fields[i])
			in = append(append(bytes.Clone(in[:start]), binary.AppendUvarint(nil, counts[i])...), in[end:]...)
		}
		return reseal(in)
	}
	// largest finds the largest count for the last field that the decoder
	// does not refuse as too long for the bytes left.
	largest := func(fields []string, counts []uint64) uint64 {
		lo, hi := uint64(0), uint64(len(b)) // lo accepted, hi refused
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			counts[len(counts)-1] = mid
			var fe *FormatError
			if _, err := Decode(lie(fields, counts)); errors.As(err, &fe) && fe.Err == ErrLength && strings.HasPrefix(fe.Field, fields[len(fields)-1]) {
				hi = mid
			} else {
				lo = mid
			}
		}
		return lo
	}
	const limit = 20
	worst, worstAt := 0.0, ""
	var ms runtime.MemStats
	measure := func(fields []string, counts []uint64) {
		in := lie(fields, counts)
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		_, err := Decode(in)
		runtime.ReadMemStats(&ms)
		if err == nil {
			return // the true counts
		}
		ratio := float64(ms.TotalAlloc-before) / float64(len(in))
		if ratio > worst {
			worst, worstAt = ratio, fmt.Sprint(fields, counts)
		}
		if ratio > limit {
			t.Errorf("%v = %v: decoding %d bytes allocated %d (%.1f×)", fields, counts, len(in), ms.TotalAlloc-before, ratio)
		}
	}
	// One count of each kind: the 4000 ops' own lists (Uses) are alike,
	// and testing each would take the test from milliseconds to seconds.
	seenKind := map[string]bool{}
	indices := regexp.MustCompile(`\[\d+\]`)
	for _, e := range tr {
		if strings.HasSuffix(e.Field, " count") {
			kind := indices.ReplaceAllString(e.Field, "[]")
			if seenKind[kind] && strings.HasPrefix(e.Field, "Ops[") {
				continue
			}
			seenKind[kind] = true
			fields := []string{e.Field}
			counts := []uint64{0}
			counts[0] = largest(fields, counts)
			measure(fields, counts)
		}
	}
	nested := []string{"Groups count", "Groups[0].Params count", "Groups[0].Params[0].Shape count"}
	var counts []uint64
	for i := range nested {
		counts = append(counts, 0)
		counts[i] = largest(nested[:i+1], counts)
	}
	measure(nested, counts)
	// A string table of empty strings: all lengths read, then duplicates.
	table := binary.AppendUvarint(bytes.Clone(b[:16]), 1<<16)
	measureBytes := func(what string, in []byte) {
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		if _, err := Decode(in); err == nil {
			t.Fatalf("%s decoded", what)
		}
		runtime.ReadMemStats(&ms)
		if ratio := float64(ms.TotalAlloc-before) / float64(len(in)); ratio > limit {
			t.Errorf("%s: decoding %d bytes allocated %d (%.1f×)", what, len(in), ms.TotalAlloc-before, ratio)
		}
	}
	measureBytes("65536 empty strings", reseal(append(table, make([]byte, 1<<16+4)...)))
	t.Logf("worst allocation: %.1f× the input, at %s", worst, worstAt)
}

func TestWriteFileReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plan.bin")
	p := tinyPlan()
	if err := WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatal("ReadFile gives a different plan")
	}
	before, _ := os.ReadFile(path)

	// A plan that cannot be written leaves the old file as it was.
	bad := tinyPlan()
	bad.Ops[0].Buffer = 99
	if err := WriteFile(path, bad); !errors.Is(err, ErrIndex) {
		t.Fatalf("WriteFile of a bad plan: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("a failed WriteFile changed the file")
	}
	// Overwriting works and leaves no temporary files.
	p.Warnings = []string{"second"}
	if err := WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the directory holds %d files", len(entries))
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
	if err := WriteFile(dir, p); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("WriteFile to a directory: %v", err)
	}
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("ReadFile of a directory: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
	toml := filepath.Join(dir, "model.toml")
	src, _, _ := plans.Source("vit-b16")
	os.WriteFile(toml, src, 0o644)
	if _, err := ReadFile(toml); !errors.Is(err, ErrBadMagic) || !strings.HasPrefix(err.Error(), toml+": ") {
		t.Errorf("ReadFile of a model: %v", err)
	}
}

// The error classes every refusal wraps.
var errorClasses = []error{ErrBadMagic, ErrNewerVersion, ErrChecksum, ErrTruncated, ErrTrailingBytes,
	ErrLength, ErrEnum, ErrIndex, ErrMalformed, ErrInvalidPlan}

// FuzzDecode: Decode never panics, refuses with an error of a known class,
// and whatever it accepts re-encodes to the same bytes.
//
// Go's minimizer tries about n²/2 candidates on an n-byte input, so at its
// default of a minute per new interesting input, fuzzing kilobyte plans
// spends nearly all its time minimizing (0 execs/s between). Unless
// -fuzzminimizetime is given, FuzzDecode caps it at 20000 candidates. The
// seeds are the zoo plans cut to under 2 KB (their first ops and what
// those use) and the fixture: whole zoo plans (30 KB to 1 MB) make each
// execution slow. TestRoundTripZoo checks the same property on them.
func FuzzDecode(f *testing.F) {
	explicit := false
	flag.Visit(func(fl *flag.Flag) { explicit = explicit || fl.Name == "test.fuzzminimizetime" })
	if !explicit {
		if err := flag.Set("test.fuzzminimizetime", "20000x"); err != nil {
			f.Fatal(err)
		}
	}
	for _, z := range zoo(f) {
		b, err := Encode(cut(z.plan, 20))
		if err != nil {
			f.Fatalf("%s cut to 20 ops: %v", z.name, err)
		}
		if testing.Verbose() {
			f.Logf("seed %s: %d bytes", z.name, len(b))
		}
		f.Add(b)
	}
	text, err := os.ReadFile(fixturePath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(parseHexFixture(f, string(text)))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeOrRefuse(t, b)
		// Most mutations break the checksum; fixing it up lets them reach
		// the sections.
		if len(b) >= 20 {
			decodeOrRefuse(t, reseal(b))
		}
	})
}

// cut keeps a plan's first n ops, frees what they leave allocated, and
// keeps only the groups (with their first two parameters), modules,
// buffers and events they use, renumbered.
func cut(p *Plan, n int) *Plan {
	q := *p
	q.Ops = append([]Op(nil), p.Ops[:min(n, len(p.Ops))]...)
	live := map[int32]bool{}
	for _, o := range q.Ops {
		switch o.Kind {
		case OpAlloc:
			live[o.Buffer] = true
		case OpFree:
			delete(live, o.Buffer)
		}
	}
	for i := range int32(len(p.Buffers)) { // in order: deterministic
		if live[i] {
			q.Ops = append(q.Ops, Op{Kind: OpFree, Stream: StreamCompute, Phase: q.Ops[len(q.Ops)-1].Phase,
				Group: -1, Module: -1, Buffer: i, Source: -1, Event: -1})
		}
	}
	// renumber maps the used entries of a table to 0, 1, … in order.
	renumber := func(size int, used func(yield func(int))) []int {
		keep := make([]bool, size)
		used(func(i int) {
			if i >= 0 {
				keep[i] = true
			}
		})
		to, next := make([]int, size), 0
		for i := range to {
			to[i] = -1
			if keep[i] {
				to[i], next = next, next+1
			}
		}
		return to
	}
	bufs := renumber(len(p.Buffers), func(use func(int)) {
		for _, o := range q.Ops {
			use(int(o.Buffer))
			use(int(o.Source))
			for _, u := range q.OpUses(&o) {
				use(int(u))
			}
		}
	})
	groups := renumber(len(p.Groups), func(use func(int)) {
		for _, o := range q.Ops {
			use(int(o.Group))
		}
		for i, b := range p.Buffers {
			if bufs[i] >= 0 {
				use(b.Group)
			}
		}
	})
	mods := renumber(len(p.Modules), func(use func(int)) {
		for _, o := range q.Ops {
			use(int(o.Module))
		}
	})
	events := renumber(p.Events, func(use func(int)) {
		for _, o := range q.Ops {
			use(int(o.Event))
		}
	})
	at := func(to []int, i int) int {
		if i < 0 {
			return i
		}
		return to[i]
	}
	at32 := func(to []int, i int32) int32 { return int32(at(to, int(i))) }
	q.Groups, q.Modules, q.ElemRecompute, q.Buffers, q.EventNames, q.Events = nil, nil, nil, nil, nil, 0
	for i, g := range p.Groups {
		if groups[i] >= 0 {
			g.Params = g.Params[:min(2, len(g.Params))] // a prefix keeps the layout valid
			g.ShardNumel, g.GradShardNumel, g.ShardBytes = 0, 0, 0
			for _, gp := range g.Params {
				g.ShardNumel += gp.ShardNumel
				g.ShardBytes += gp.ShardNumel * gp.GatherDType.Size()
				if gp.RequiresGrad {
					g.GradShardNumel += gp.ShardNumel
				}
			}
			q.Groups = append(q.Groups, g)
		}
	}
	for i, m := range p.Modules {
		if mods[i] >= 0 {
			q.Modules = append(q.Modules, m)
			if len(p.ElemRecompute) > 0 {
				q.ElemRecompute = append(q.ElemRecompute, p.ElemRecompute[i])
			}
		}
	}
	for i, b := range p.Buffers {
		if bufs[i] >= 0 {
			b.Group = at(groups, b.Group)
			q.Buffers = append(q.Buffers, b)
		}
	}
	for i, e := range events {
		if e >= 0 {
			q.Events++
			if i < len(p.EventNames) {
				q.EventNames = append(q.EventNames, p.EventNames[i])
			}
		}
	}
	for i := range q.Ops {
		o := &q.Ops[i]
		o.Group, o.Module, o.Buffer, o.Source, o.Event = at32(groups, o.Group), at32(mods, o.Module), at32(bufs, o.Buffer), at32(bufs, o.Source), at32(events, o.Event)
		uses := slices.Clone(q.OpUses(o))
		for j, u := range uses {
			uses[j] = at32(bufs, u)
		}
		q.SetOpUses(o, uses)
	}
	q.CompactLists()
	// Per-group and per-op predictions do not survive the cut.
	q.Prediction = Prediction{}
	return &q
}

func decodeOrRefuse(t *testing.T, b []byte) {
	p, err := Decode(b)
	if err != nil {
		if errors.Is(err, ErrInternal) {
			t.Fatal(err)
		}
		for _, class := range errorClasses {
			if errors.Is(err, class) {
				return
			}
		}
		t.Fatalf("error of no class: %v", err)
	}
	again, err := Encode(p)
	if err != nil {
		t.Fatalf("decoded, but does not encode: %v", err)
	}
	// An older version re-encodes as the current one; only the current
	// version's encoding is canonical byte for byte.
	if binary.LittleEndian.Uint32(b[4:]) == FormatVersion && !bytes.Equal(again, b) {
		t.Fatalf("decoded %d bytes, re-encoded to %d different ones", len(b), len(again))
	}
}

func BenchmarkEncodeDecode405B(b *testing.B) {
	var z zooPlan
	for _, zp := range zoo(b) {
		if zp.name == "llama3.1-405b" {
			z = zp
		}
	}
	if z.plan == nil {
		b.Fatal("no llama3.1-405b in the zoo")
	}
	var enc, dec time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		bin, err := Encode(z.plan)
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(bin); err != nil {
			b.Fatal(err)
		}
		enc += t1.Sub(t0)
		dec += time.Since(t1)
		n++
	}
	b.ReportMetric(float64(enc.Microseconds())/float64(n), "encode-µs/op")
	b.ReportMetric(float64(dec.Microseconds())/float64(n), "decode-µs/op")
	b.ReportMetric(float64(len(z.bin)), "plan.bin-bytes")
	b.SetBytes(int64(len(z.bin)))
}

// TestFixtureOlder: a version-1 plan (before ops carried AttnFLOPs and
// ElemBytes), a version-2 one (before the cluster carried a profile), a
// version-3 one (before ops carried GEMM shapes), a version-4 one (before
// the training setup carried expandable_segments), a version-5 one
// (before parameters carried their state-dict order), a version-6 one
// (before the cluster carried its GPU preset) and a version-7 one (before
// the training setup carried the model's FLOPs per token), a version-8 one
// (before the plan carried recomputed element-wise bytes) and a version-9
// one (before the training setup carried the optimizer's implementation)
// and a version-10 one (before it carried the clipping threshold) still
// decode, to the same plan with those fields zero (StateOrder -1).
func TestFixtureOlder(t *testing.T) {
	for _, v := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10} {
		text, err := os.ReadFile(fmt.Sprintf("testdata/tiny-v%d.plan.hex", v))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(parseHexFixture(t, string(text)))
		if err != nil {
			t.Fatalf("decoding the version-%d fixture: %v", v, err)
		}
		want := tinyPlan()
		if v < 3 {
			want.Cluster.Profile = nil
		}
		if v < 5 {
			want.Train.ExpandableSegments = false
		}
		if v < 7 {
			want.Cluster.Preset = ""
		}
		if v < 8 {
			want.Train.ModelFLOPsPerToken = 0
		}
		if v < 9 {
			want.ElemRecompute = nil
		}
		if v < 10 {
			want.Train.OptimizerImplementation = ""
		}
		if v < 11 {
			want.Train.MaxGradNorm = 0
		}
		for g := range want.Groups {
			for i := range want.Groups[g].Params {
				if v < 6 {
					want.Groups[g].Params[i].StateOrder = -1
				}
			}
		}
		for i := range want.Ops {
			if v < 4 {
				want.Ops[i].GEMMs = Span{}
			}
		}
		want.CompactLists()
		if v < 2 {
			for i := range want.Ops {
				want.Ops[i].AttnFLOPs, want.Ops[i].ElemBytes = 0, 0
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the version-%d fixture decodes to a different plan", v)
		}
	}
}
