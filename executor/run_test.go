package executor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// elements is the parameter count of a plan.
func elements(p *schedule.Plan) int64 {
	var n int64
	for _, g := range p.Groups {
		for _, gp := range g.Params {
			e := int64(1)
			for _, d := range gp.Shape {
				e *= d
			}
			n += e
		}
	}
	return n
}

// scaleFor returns the smallest power-of-two scale that shrinks the plan
// to at most target parameters (per replica of the model).
func scaleFor(t testing.TB, p *schedule.Plan, target int64) int {
	for k := 1; k < 1<<20; k *= 2 {
		q, _, err := Scale(p, k)
		if err != nil {
			t.Fatal(err)
		}
		if elements(q) <= target {
			return k
		}
	}
	return 1 << 20
}

func mustRun(t *testing.T, p *schedule.Plan, opts Options) *Report {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	rep, err := Run(p, NewHost(), opts)
	if err != nil {
		var b strings.Builder
		if rep != nil {
			rep.Write(&b)
		}
		t.Fatalf("%v\n%s", err, b.String())
	}
	for _, pr := range rep.Pools {
		if pr.Measured != pr.Predicted || !pr.Agree {
			t.Errorf("pool %s: measured %d, predicted %d (ranks agree: %v)", pr.Pool, pr.Measured, pr.Predicted, pr.Agree)
		}
	}
	var updated int64
	for _, g := range rep.Groups {
		if g.Mismatched != 0 {
			t.Errorf("group %s: %d of %d elements differ", g.Group, g.Mismatched, g.Elements)
		}
		updated += g.Updated
	}
	// The comparison is of trained parameters, not of the initial values.
	if updated == 0 {
		t.Errorf("no parameter changed in %d step(s)", opts.Steps)
	}
	return rep
}

// TestZooWorldSizes runs every zoo model, scaled down and cut to two
// blocks per repeat, on 1, 2, 3, 4 and 8 ranks (the 405B model with an
// HSDP mesh where the world allows), two steps each, and requires every
// rank's shards to equal the reference bit for bit.
func TestZooWorldSizes(t *testing.T) {
	for _, name := range plans.Names() {
		for _, w := range []int{1, 2, 3, 4, 8} {
			t.Run(fmt.Sprintf("%s/w%d", name, w), func(t *testing.T) {
				t.Parallel()
				var edits []edit
				switch {
				case name == "llama3.1-405b" && w%2 == 0:
					edits = hsdp(2, w/2)
				default:
					edits = world(w)
				}
				p := zooPlan(t, name, append(edits, layers(2), train("grad_accum", "2"))...)
				k := scaleFor(t, p, 40_000)
				rep := mustRun(t, p, Options{Scale: k, Steps: 2})
				t.Logf("scale %d: %d parameters, %d ops, run %v (reference %v)", k, rep.Elements, rep.Ops, rep.Times.Run.Round(time.Millisecond), rep.Times.Reference.Round(time.Millisecond))
			})
		}
	}
}

// TestFeatures runs the policies the zoo does not use, each on a small
// model, and requires bit-exact agreement with the reference.
func TestFeatures(t *testing.T) {
	gpt := func(extra ...edit) func(w int) []edit {
		return func(w int) []edit { return append(append(world(w), layers(2)), extra...) }
	}
	mesh := func(r int, extra ...edit) func(w int) []edit {
		return func(w int) []edit { return append(append(hsdp(r, w/r), layers(2)), extra...) }
	}
	ga := func(n int) edit { return train("grad_accum", fmt.Sprint(n)) }
	tests := []struct {
		name  string
		model string
		w     int
		edits func(w int) []edit
		check func(t *testing.T, p *schedule.Plan)
	}{
		{"fp16 reduce, divide factors 4 and 2", "gpt2-124m", 8, gpt(policy("reduce_dtype", `"fp16"`)), divides(4, 2)},
		{"fp16 reduce over 3 ranks", "gpt2-124m", 3, gpt(policy("reduce_dtype", `"fp16"`)), nil},
		{"fp16 params and reduce over 6 ranks", "gpt2-124m", 6, gpt(policy("param_dtype", `"fp16"`), policy("reduce_dtype", `"fp16"`)), nil},
		{"force_sum_reduction", "gpt2-124m", 4, gpt(policy("force_sum_reduction", "true")), divides(1, 4)},
		{"gradient_divide_factor: premul-sum", "gpt2-124m", 4, gpt(policy("gradient_divide_factor", "16")), reduceOp(schedule.ReducePremulSum)},
		{"bf16 params, bf16 reduce", "gpt2-124m", 4, gpt(policy("reduce_dtype", `"bf16"`)), nil},
		{"fp32 params, no mixed precision", "gpt2-124m", 3, gpt(policy("param_dtype", `"fp32"`), policy("reduce_dtype", `"fp32"`)), nil},
		{"HSDP 2x2, fp16 reduce", "llama3-8b", 4, mesh(2, policy("reduce_dtype", `"fp16"`)), nil},
		{"HSDP 4x1: shard groups of one", "llama3-8b", 4, mesh(4), nil},
		{"offload", "gpt2-124m", 4, gpt(policy("offload", "true"), ga(1)), offloads},
		{"offload over 1 rank", "gpt2-124m", 1, gpt(policy("offload", "true"), ga(1)), offloads},
		{"offload with HSDP 2x2", "llama3-8b", 4, mesh(2, policy("offload", "true")), offloads},
		{"offload, sharded accumulation on the host", "gpt2-124m", 4, gpt(policy("offload", "true"), ga(2)), offloads},
		{"offload with HSDP 2x2, sharded accumulation", "llama3-8b", 4, mesh(2, policy("offload", "true"), ga(2)), offloads},
		{"offload, unsharded accumulation", "gpt2-124m", 3, gpt(policy("offload", "true"), ga(3), train("accumulate", `"unsharded"`)), offloads},
		{"int reshard to 2 of 4", "gpt2-124m", 4, gpt(policy("reshard_after_forward", "2")), reshardsTo},
		{"int reshard to 4 of 8", "llama3-8b", 8, gpt(policy("reshard_after_forward", "4")), reshardsTo},
		{"int reshard with HSDP 2x4", "llama3-8b", 8, mesh(2, policy("reshard_after_forward", "2")), reshardsTo},
		{"reshard_after_forward false", "gpt2-124m", 3, gpt(policy("reshard_after_forward", "false")), nil},
		{"explicit prefetch 2 and 2", "gpt2-124m", 4, gpt(layers(4), policy("prefetch_forward", "2"), policy("prefetch_backward", "2")), nil},
		{"explicit backward prefetch 3", "llama3-8b", 2, gpt(layers(4), policy("prefetch_backward", "3"), ga(2)), nil},
		{"sharded accumulation, 3 micro-batches", "gpt2-124m", 3, gpt(ga(3), train("accumulate", `"sharded"`)), nil},
		{"unsharded accumulation into an fp32 accumulator", "gpt2-124m", 3, gpt(ga(3), train("accumulate", `"unsharded"`)), accumulates(true)},
		{"unsharded accumulation in place (bf16 reduce)", "gpt2-124m", 4, gpt(ga(3), train("accumulate", `"unsharded"`), policy("reduce_dtype", `"bf16"`)), accumulates(false)},
		{"unsharded accumulation with HSDP 2x2", "llama3-8b", 4, mesh(2, ga(2), train("accumulate", `"unsharded"`)), nil},
		{"two reduce-scatters in flight", "gpt2-124m", 4, gpt(layers(4), policy("reduce_scatter_buffers", "2")), nil},
		{"sgd", "gpt2-124m", 3, gpt(train("optimizer", `"sgd"`)), nil},
		{"sgd with momentum", "gpt2-124m", 3, gpt(train("optimizer", `"sgd_momentum"`)), nil},
		{"adam", "vit-b16", 3, gpt(train("optimizer", `"adam"`)), nil},
		{"lion", "vit-b16", 8, gpt(train("optimizer", `"lion"`)), nil},
		{"shard_dim 1", "llama3-8b", 4, gpt(policy("shard_dim", "1")), shardsDim1},
		{"LoRA: frozen and trainable parameters, unsharded accumulation", "llama3-8b-lora", 3, gpt(ga(2), train("accumulate", `"unsharded"`)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := zooPlanErr(tt.model, tt.edits(tt.w)...)
			if err != nil && strings.Contains(err.Error(), "the planner emitted an unsafe schedule") {
				// Offload with sharded accumulation: the planner's own
				// verifier rejects the host-stream allocation of the d2h
				// temporary (it does not order the CPU's allocation before
				// the copy that follows it in issue order). Runs once the
				// planner plans it.
				t.Skipf("the planner refuses this setup: %.300s", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, p)
			}
			k := scaleFor(t, p, 40_000)
			rep := mustRun(t, p, Options{Scale: k, Steps: 2})
			t.Logf("scale %d: %d parameters, %d ops, run %v", k, rep.Elements, rep.Ops, rep.Times.Run.Round(time.Millisecond))
		})
	}
}

// Checks that a variant's plan has the feature it claims to test.

func divides(pre, post float64) func(t *testing.T, p *schedule.Plan) {
	return func(t *testing.T, p *schedule.Plan) {
		if g := p.Groups[1].Policy; g.PreDivide != pre || g.PostDivide != post {
			t.Fatalf("divide factors %v/%v, want %v/%v", g.PreDivide, g.PostDivide, pre, post)
		}
	}
}

func reduceOp(op schedule.ReduceOp) func(t *testing.T, p *schedule.Plan) {
	return func(t *testing.T, p *schedule.Plan) {
		if g := p.Groups[1].Policy; g.ReduceScatterOp != op {
			t.Fatalf("reduce-scatter %s, want %s", g.ReduceScatterOp, op)
		}
	}
}

func hasOp(p *schedule.Plan, k schedule.OpKind) bool {
	for _, o := range p.Ops {
		if o.Kind == k {
			return true
		}
	}
	return false
}

func offloads(t *testing.T, p *schedule.Plan) {
	if !hasOp(p, schedule.OpD2H) || !hasOp(p, schedule.OpH2D) {
		t.Fatal("no offload copies in the plan")
	}
}

func reshardsTo(t *testing.T, p *schedule.Plan) {
	for _, o := range p.Ops {
		if o.Kind == schedule.OpAllGather && o.PG == schedule.PGPostForward {
			return
		}
	}
	t.Fatal("no all-gather over the post-forward group")
}

func accumulates(accumulator bool) func(t *testing.T, p *schedule.Plan) {
	return func(t *testing.T, p *schedule.Plan) {
		found := false
		for _, b := range p.Buffers {
			found = found || b.Kind == schedule.BufAccumGrads
		}
		if found != accumulator || !p.Train.AccumulateUnsharded {
			t.Fatalf("accumulator buffers: %v, want %v", found, accumulator)
		}
	}
}

func shardsDim1(t *testing.T, p *schedule.Plan) {
	for _, g := range p.Groups {
		for _, gp := range g.Params {
			if gp.ShardDim == 1 {
				return
			}
		}
	}
	t.Fatal("no parameter sharded on dimension 1")
}
