package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Hand-computed FSDP2 cases: layouts, policies and schedule shapes that
// follow from FSDP2's rules, checked on tiny models.

func tinyModel(t *testing.T, world string, policy, modules string) *ir.Model {
	t.Helper()
	src := fmt.Sprintf(`
[train]
seq_len = 4
%s
[cluster]
gpu = "h100-sxm"
%s
[policy]
%s
%s`, "", world, policy, modules)
	m, err := ir.Load("tiny.toml", []byte(src))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return m
}

func mustPlan(t *testing.T, m *ir.Model) *schedule.Plan {
	t.Helper()
	p, err := Plan(m, Options{CheckEveryPass: true})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return p
}

func group(t *testing.T, p *schedule.Plan, name string) *schedule.Group {
	t.Helper()
	for i := range p.Groups {
		if p.Groups[i].Name == name {
			return &p.Groups[i]
		}
	}
	t.Fatalf("no group %q", name)
	return nil
}

const unevenModules = `
[[module]]
name = "blk"
repeat = 2
[[module.module]]
name = "a"
[[module.module.param]]
name = "w"
shape = [6, 5]
[[module.module.param]]
name = "v"
shape = [10]
[[module.module]]
name = "b"
requires_grad = false
[[module.module.param]]
name = "f"
shape = [7, 2]
`

func TestShardLayout(t *testing.T) {
	type row struct {
		name                    string
		chunk, shard, off, goff int64
	}
	tests := []struct {
		world      string
		params     []row
		S, gradS   int64
		emptyRanks string // substring of the padding warning, "" for none
	}{
		{
			// W=4: ceil(6/4)=2 rows ×5 → 10; ceil(10/4)=3; ceil(7/4)=2 rows ×2 → 4.
			world:  "world_size = 4",
			params: []row{{"blk.0.a.w", 2, 10, 0, 0}, {"blk.0.a.v", 3, 3, 10, 10}, {"blk.0.b.f", 2, 4, 13, -1}},
			S:      17, gradS: 13,
			// 6 rows in chunks of 2 fill 3 ranks: 1 of 4 holds nothing.
			emptyRanks: "1 of 4 ranks hold no rows",
		},
		{
			world:  "world_size = 1",
			params: []row{{"blk.0.a.w", 6, 30, 0, 0}, {"blk.0.a.v", 10, 10, 30, 30}, {"blk.0.b.f", 7, 14, 40, -1}},
			S:      54, gradS: 40,
		},
		{
			// W=3: 2 rows ×5; ceil(10/3)=4; ceil(7/3)=3 rows ×2.
			world:  "world_size = 3",
			params: []row{{"blk.0.a.w", 2, 10, 0, 0}, {"blk.0.a.v", 4, 4, 10, 10}, {"blk.0.b.f", 3, 6, 14, -1}},
			S:      20, gradS: 14,
		},
		{
			// W=8: ceil(6/8)=1 → ranks 6 and 7 empty; ceil(10/8)=2 → 5 ranks hold rows.
			world:  "world_size = 8",
			params: []row{{"blk.0.a.w", 1, 5, 0, 0}, {"blk.0.a.v", 2, 2, 5, 5}, {"blk.0.b.f", 1, 2, 7, -1}},
			S:      9, gradS: 7,
			emptyRanks: "2 of 8 ranks hold no rows",
		},
	}
	for _, tt := range tests {
		t.Run(tt.world, func(t *testing.T) {
			p := mustPlan(t, tinyModel(t, tt.world, "", unevenModules))
			g := group(t, p, "blk.0")
			if len(g.Params) != len(tt.params) {
				t.Fatalf("%d params, want %d", len(g.Params), len(tt.params))
			}
			for i, want := range tt.params {
				got := g.Params[i]
				if got.Name != want.name || got.ChunkRows != want.chunk || got.ShardNumel != want.shard || got.Offset != want.off || got.GradOffset != want.goff {
					t.Errorf("param %d = %s rows %d shard %d @%d grad@%d; want %+v", i, got.Name, got.ChunkRows, got.ShardNumel, got.Offset, got.GradOffset, want)
				}
			}
			if g.ShardNumel != tt.S || g.GradShardNumel != tt.gradS {
				t.Errorf("S = %d, S' = %d; want %d, %d", g.ShardNumel, g.GradShardNumel, tt.S, tt.gradS)
			}
			warned := strings.Join(p.Warnings, "\n")
			if tt.emptyRanks != "" && !strings.Contains(warned, tt.emptyRanks) {
				t.Errorf("no warning %q in:\n%s", tt.emptyRanks, warned)
			}
			// The frozen parameter is all-gathered but never reduced.
			for _, o := range p.Ops {
				if o.Kind == schedule.OpReduceScatter && o.Bytes != tt.gradS*int64(p.Cluster.Shard)*4 {
					t.Errorf("reduce-scatter of %d bytes, want W·S'·4 = %d", o.Bytes, tt.gradS*int64(p.Cluster.Shard)*4)
				}
			}
		})
	}
}

func TestParamOrderIsPostOrder(t *testing.T) {
	// FSDP2 collects managed modules children-first: the child's
	// parameters come before the parent's own.
	m := tinyModel(t, "world_size = 2", `units = ["outer"]`, `
[[module]]
name = "outer"
[[module.param]]
name = "own"
shape = [4]
[[module.module]]
name = "inner"
kind = "linear"
in = 4
out = 4
`)
	p := mustPlan(t, m)
	var names []string
	for _, gp := range group(t, p, "outer").Params {
		names = append(names, gp.Name)
	}
	if got := strings.Join(names, " "); got != "outer.inner.weight outer.own" {
		t.Errorf("order %q", got)
	}
}

const tiedModules = `
[[module]]
name = "emb"
kind = "embedding"
num = 16
dim = 4
[[module]]
name = "blk"
kind = "linear"
in = 4
out = 4
[[module]]
name = "head"
kind = "linear"
in = 4
out = 16
tied_to = "emb.weight"
`

func TestTiedAcrossGroups(t *testing.T) {
	_, err := Plan(tinyModel(t, "world_size = 2", `units = ["emb", "head"]`, tiedModules), Options{})
	if err == nil || !strings.Contains(err.Error(), "emb.weight") || !strings.Contains(err.Error(), "head.weight") ||
		!strings.Contains(err.Error(), `policy.tied = "merge"`) {
		t.Fatalf("want an error naming both parameters and the fix, got %v", err)
	}
	p := mustPlan(t, tinyModel(t, "world_size = 2", "units = [\"emb\", \"head\"]\ntied = \"merge\"", tiedModules))
	g := group(t, p, "emb")
	if len(g.Modules) != 2 || g.Modules[1] != "head" || len(g.Params) != 1 || g.Params[0].Aliases[0] != "head.weight" {
		t.Errorf("merged group: modules %v params %+v", g.Modules, g.Params)
	}
	// Tied within one group (the root) needs nothing.
	p = mustPlan(t, tinyModel(t, "world_size = 2", "", tiedModules))
	if len(p.Groups) != 1 || len(p.Groups[0].Params) != 2 {
		t.Errorf("root group: %+v", p.Groups)
	}
}

const blocks = `
[[module]]
name = "emb"
kind = "embedding"
num = 16
dim = 8
[[module]]
name = "layers"
repeat = 3
[[module.module]]
name = "ff"
kind = "linear"
in = 8
out = 8
`

func TestReshardAfterForward(t *testing.T) {
	tests := []struct {
		policy string
		want   schedule.ReshardKind
		to     int
		warn   string
	}{
		{"", schedule.ReshardTrue, 0, ""},
		{"reshard_after_forward = false", schedule.ReshardFalse, 0, ""},
		{"reshard_after_forward = 2", schedule.ReshardTo, 2, ""},
		{"reshard_after_forward = 1", schedule.ReshardFalse, 0, "same as false"},
		{"reshard_after_forward = 8", schedule.ReshardTrue, 0, "same as true"},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			p := mustPlan(t, tinyModel(t, "world_size = 8", tt.policy, blocks))
			root, g := p.Groups[0], group(t, p, "layers.1")
			if !root.Root || root.Policy.Reshard != schedule.ReshardFalse && tt.policy == "" {
				t.Errorf("the root defaults to reshard false, got %v", root.Policy.Reshard)
			}
			if g.Policy.Reshard != tt.want || g.Policy.ReshardTo != tt.to {
				t.Errorf("reshard = %v %d, want %v %d", g.Policy.Reshard, g.Policy.ReshardTo, tt.want, tt.to)
			}
			if tt.warn != "" && !strings.Contains(strings.Join(p.Warnings, "\n"), tt.warn) {
				t.Errorf("no warning %q", tt.warn)
			}
			// Count the backward all-gathers of layers.1 and their group size.
			var bwdGathers []schedule.Op
			for _, o := range p.Ops {
				if o.Kind == schedule.OpAllGather && o.Phase == schedule.PhaseBackward && p.Groups[o.Group].Name == "layers.1" {
					bwdGathers = append(bwdGathers, o)
				}
			}
			switch tt.want {
			case schedule.ReshardFalse:
				if len(bwdGathers) != 0 {
					t.Errorf("reshard false must not re-gather in backward: %d", len(bwdGathers))
				}
			case schedule.ReshardTo:
				if len(bwdGathers) != 1 || bwdGathers[0].PG != schedule.PGPostForward || bwdGathers[0].PGSize != 2 {
					t.Errorf("backward all-gather over 2 ranks expected: %+v", bwdGathers)
				}
			default:
				if len(bwdGathers) != 1 || bwdGathers[0].PG != schedule.PGShard || bwdGathers[0].PGSize != 8 {
					t.Errorf("backward all-gather over the shard group expected: %+v", bwdGathers)
				}
			}
		})
	}
}

func TestDivideFactors(t *testing.T) {
	tests := []struct {
		world, policy string
		rs, ar        schedule.ReduceOp
		pre, post     float64
		premul        float64
	}{
		{"world_size = 8", "", schedule.ReduceAvg, schedule.ReduceAvg, 1, 1, 0},
		{"world_size = 1", "", schedule.ReduceSum, schedule.ReduceSum, 1, 1, 0},
		// fp16: pre = 1; while f % pre == 0 and f/pre > pre: pre *= 2.
		{"world_size = 8", `reduce_dtype = "fp16"`, schedule.ReduceSum, schedule.ReduceSum, 4, 2, 0},
		{"world_size = 12\ngpus_per_node = 4", `reduce_dtype = "fp16"`, schedule.ReduceSum, schedule.ReduceSum, 4, 3, 0},
		{"world_size = 6\ngpus_per_node = 6", `reduce_dtype = "fp16"`, schedule.ReduceSum, schedule.ReduceSum, 4, 1.5, 0},
		{"world_size = 8", "force_sum_reduction = true", schedule.ReduceSum, schedule.ReduceSum, 1, 8, 0},
		{"world_size = 8", "gradient_divide_factor = 8", schedule.ReduceAvg, schedule.ReduceSum, 1, 1, 0},
		{"world_size = 8", `reduce_dtype = "fp64"`, schedule.ReduceSum, schedule.ReduceSum, 4, 2, 0},
		{"world_size = 8", "gradient_divide_factor = 16", schedule.ReducePremulSum, schedule.ReduceSum, 1, 1, 1.0 / 16},
		// HSDP: DP = 2 × 4; the reduce-scatter averages over the shard
		// group, the all-reduce over the replicas.
		{"world_size = 8\nmesh = { replicate = 2, shard = 4 }", "", schedule.ReduceAvg, schedule.ReduceAvg, 1, 1, 0},
		// A custom factor averages only when it is the shard group's size;
		// the data-parallel size 8 pre-multiplies (torch 2.14
		// _get_gradient_divide_factors compares with the reduce-scatter
		// group's size). The all-reduce sums either way.
		{"world_size = 8\nmesh = { replicate = 2, shard = 4 }", "gradient_divide_factor = 4", schedule.ReduceAvg, schedule.ReduceSum, 1, 1, 0},
		{"world_size = 8\nmesh = { replicate = 2, shard = 4 }", "gradient_divide_factor = 8", schedule.ReducePremulSum, schedule.ReduceSum, 1, 1, 1.0 / 8},
	}
	for _, tt := range tests {
		t.Run(tt.world+" "+tt.policy, func(t *testing.T) {
			p := mustPlan(t, tinyModel(t, tt.world, tt.policy, blocks))
			pol := group(t, p, "layers.0").Policy
			if pol.ReduceScatterOp != tt.rs || pol.AllReduceOp != tt.ar || pol.PreDivide != tt.pre || pol.PostDivide != tt.post || pol.PremulFactor != tt.premul {
				t.Errorf("got rs %v ar %v pre %v post %v premul %v", pol.ReduceScatterOp, pol.AllReduceOp, pol.PreDivide, pol.PostDivide, pol.PremulFactor)
			}
		})
	}
}

func TestHSDPCollectives(t *testing.T) {
	p := mustPlan(t, tinyModel(t, "world_size = 8\nmesh = { replicate = 2, shard = 4 }", `param_dtype = "bf16"`, blocks))
	counts := map[schedule.OpKind]int{}
	for _, o := range p.Ops {
		switch o.Kind {
		case schedule.OpAllGather, schedule.OpReduceScatter:
			if o.PG != schedule.PGShard || o.PGSize != 4 {
				t.Errorf("%s over %s(%d), want shard(4)", o.Kind, o.PG, o.PGSize)
			}
		case schedule.OpAllReduce:
			if o.PG != schedule.PGReplicate || o.PGSize != 2 || o.Stream != schedule.StreamAllReduce {
				t.Errorf("all-reduce over %s(%d) on %s", o.PG, o.PGSize, o.Stream)
			}
		}
		counts[o.Kind]++
	}
	// Every group reduces: one reduce-scatter and one all-reduce each.
	if counts[schedule.OpReduceScatter] != 4 || counts[schedule.OpAllReduce] != 4 {
		t.Errorf("reduce-scatters %d, all-reduces %d; want 4 each", counts[schedule.OpReduceScatter], counts[schedule.OpAllReduce])
	}
}

func TestMixedPrecisionClamping(t *testing.T) {
	tests := []struct {
		policy              string
		param, reduce, orig ir.DType
	}{
		{"", ir.FP32, ir.FP32, ir.FP32},
		{`param_dtype = "bf16"`, ir.BF16, ir.BF16, ir.FP32},
		{"param_dtype = \"bf16\"\nreduce_dtype = \"fp32\"", ir.BF16, ir.FP32, ir.FP32},
		{`param_dtype = "fp32"`, ir.FP32, ir.FP32, ir.FP32}, // equal to orig: no cast
	}
	for _, tt := range tests {
		p := mustPlan(t, tinyModel(t, "world_size = 2", tt.policy, blocks))
		pol := group(t, p, "layers.0").Policy
		if pol.Param != tt.param || pol.Reduce != tt.reduce || pol.Orig != tt.orig {
			t.Errorf("%q: param %s reduce %s orig %s", tt.policy, pol.Param, pol.Reduce, pol.Orig)
		}
		casts := 0
		for _, b := range p.Buffers {
			if b.Kind == schedule.BufCastTemp {
				casts++
			}
		}
		if (tt.param != tt.orig) != (casts > 0) {
			t.Errorf("%q: %d cast temporaries", tt.policy, casts)
		}
	}
}

// liveAt counts, in issue order, the most buffers of a kind live at once
// during a phase.
func maxLive(p *schedule.Plan, kind schedule.BufferKind, phase schedule.Phase) int {
	live, most := 0, 0
	for _, o := range p.Ops {
		if o.Phase != phase || o.Buffer < 0 || p.Buffers[o.Buffer].Kind != kind {
			continue
		}
		switch o.Kind {
		case schedule.OpAlloc:
			live++
			most = max(most, live)
		case schedule.OpFree:
			live--
		}
	}
	return most
}

func TestPrefetchBounds(t *testing.T) {
	deep := strings.Replace(blocks, "repeat = 3", "repeat = 6", 1)
	tests := []struct {
		policy       string
		fwd, bwd     int
		fwdAG, bwdAG int
	}{
		// Implicit: two all-gather outputs in forward (one held for its
		// copy-out, the next being filled); backward frees each right after
		// its copy-out, with one prefetch pending. Explicit k: k+1 forward,
		// k backward.
		{"", 0, 0, 2, 1},
		{"prefetch_forward = 2", 2, 0, 3, 1},
		{"prefetch_backward = 2", 0, 2, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			p := mustPlan(t, tinyModel(t, "world_size = 4", tt.policy, deep))
			if f := maxLive(p, schedule.BufAllGatherOut, schedule.PhaseForward); f != tt.fwdAG {
				t.Errorf("forward: %d all-gather outputs live at once, want %d", f, tt.fwdAG)
			}
			if b := maxLive(p, schedule.BufAllGatherOut, schedule.PhaseBackward); b != tt.bwdAG {
				t.Errorf("backward: %d all-gather outputs live at once, want %d", b, tt.bwdAG)
			}
		})
	}
}

func TestDeferredReduce(t *testing.T) {
	// The root reads token ids; a unit fed only by a frozen module needs
	// no input gradient either.
	m := tinyModel(t, "world_size = 2", `units = ["frozen", "late", "head"]`, `
[[module]]
name = "emb"
kind = "embedding"
num = 16
dim = 8
requires_grad = false
[[module]]
name = "frozen"
kind = "linear"
in = 8
out = 8
requires_grad = false
[[module]]
name = "late"
kind = "linear"
in = 8
out = 8
[[module]]
name = "head"
kind = "linear"
in = 8
out = 8
`)
	p := mustPlan(t, m)
	want := map[string]bool{"": true, "frozen": true, "late": true, "head": false}
	for _, g := range p.Groups {
		if g.DeferredReduce != want[g.Name] {
			t.Errorf("group %q deferred = %v, want %v", g.Name, g.DeferredReduce, want[g.Name])
		}
	}
	// "late" reduces in the final callback: after the last backward compute.
	lastBackward, lateRS := -1, -1
	for i, o := range p.Ops {
		if o.Kind == schedule.OpBackward {
			lastBackward = i
		}
		if o.Kind == schedule.OpReduceScatter && p.Groups[o.Group].Name == "late" {
			lateRS = i
		}
	}
	if lateRS < lastBackward {
		t.Errorf("deferred reduce-scatter at op %d, before the last backward at %d", lateRS, lastBackward)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "group late: its inputs need no gradient") {
		t.Errorf("no deferred warning for late: %v", p.Warnings)
	}
}

func TestOffloadAndAccumulation(t *testing.T) {
	m := tinyModel(t, "world_size = 2", "offload = true\nparam_dtype = \"bf16\"\nreduce_dtype = \"fp32\"", blocks)
	p := mustPlan(t, m)
	kinds := map[schedule.OpKind][]schedule.Stream{}
	for _, o := range p.Ops {
		kinds[o.Kind] = append(kinds[o.Kind], o.Stream)
	}
	for _, k := range []schedule.OpKind{schedule.OpH2D, schedule.OpD2H, schedule.OpSync, schedule.OpOptimizer} {
		if len(kinds[k]) == 0 {
			t.Errorf("offload plan has no %s", k)
		}
	}
	for _, st := range kinds[schedule.OpH2D] {
		if st != schedule.StreamCopyIn {
			t.Errorf("H2D on %s, want copy-in", st)
		}
	}
	for _, st := range kinds[schedule.OpOptimizer] {
		if st != schedule.StreamHost {
			t.Errorf("offloaded optimizer on %s, want host", st)
		}
	}

	src := strings.Replace(`
[train]
seq_len = 4
grad_accum = 3
accumulate = "unsharded"
[cluster]
gpu = "h100-sxm"
world_size = 2
[policy]
param_dtype = "bf16"
reduce_dtype = "fp32"
`+blocks, "", "", 1)
	m, err := ir.Load("accum.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p = mustPlan(t, m)
	rsByMicro := map[int]int{}
	for _, o := range p.Ops {
		if o.Kind == schedule.OpReduceScatter {
			rsByMicro[int(o.Micro)]++
		}
	}
	if rsByMicro[0] != 0 || rsByMicro[1] != 0 || rsByMicro[2] != len(p.Groups) {
		t.Errorf("reduce-scatters per micro-batch %v: only the last may reduce", rsByMicro)
	}
	accum := 0
	for _, b := range p.Buffers {
		if b.Kind == schedule.BufAccumGrads {
			accum++
		}
	}
	if accum != len(p.Groups) {
		t.Errorf("%d accumulators, want one per group in fp32", accum)
	}

	// FSDP2's default: every micro-batch reduce-scatters, and later ones
	// add into the sharded gradients.
	m, err = ir.Load("accum.toml", []byte(strings.Replace(src, "accumulate = \"unsharded\"\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p = mustPlan(t, m)
	rsByMicro = map[int]int{}
	adds := 0
	for _, o := range p.Ops {
		switch {
		case o.Kind == schedule.OpReduceScatter:
			rsByMicro[int(o.Micro)]++
		case o.Kind == schedule.OpAccumulate && o.Stream != schedule.StreamCompute:
			adds++
		}
	}
	g := len(p.Groups)
	if rsByMicro[0] != g || rsByMicro[1] != g || rsByMicro[2] != g || adds != 2*g {
		t.Errorf("sharded accumulation: reduce-scatters per micro-batch %v, %d sharded adds; want %d each and %d", rsByMicro, adds, g, 2*g)
	}
}
