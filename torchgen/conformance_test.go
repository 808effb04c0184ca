package torchgen

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// The conformance suite: small models planned by fsdpc and run under real
// FSDP2 (the torch that .ci/install-torch installs), every rank's
// collectives and shard layouts compared with the plan. It starts dozens
// of Python processes, so it runs only when FSDPC_TORCH_CONFORMANCE=1 (as
// .ci/run does, after go test ./..., so it competes with no timed test);
// without a torch installed it fails rather than skip.

func needTorch(t *testing.T) Python {
	t.Helper()
	if os.Getenv("FSDPC_TORCH_CONFORMANCE") != "1" {
		t.Skip("set FSDPC_TORCH_CONFORMANCE=1 to run real FSDP2 (.ci/run does)")
	}
	py, err := FindPython(os.Getenv("FSDPC_PYTHON"))
	if err != nil {
		t.Fatal(err)
	}
	return py
}

const decoderModel = `
[model]
dtype = "fp32"
[train]
seq_len = 4
%s
[cluster]
gpu = "h100-sxm"
%s
[policy]
units = "blocks"
%s
[[module]]
name = "emb"
kind = "embedding"
num = 33
dim = 8
%s
[[module]]
name = "layers"
repeat = 2
block = "decoder"
[[module]]
name = "norm"
kind = "norm"
dim = 8
[[module]]
name = "output"
kind = "linear"
in = 8
out = 33
%s
[block.decoder]
register = ["attention", "feed_forward", "attention_norm", "ffn_norm"]
[[block.decoder.module]]
name = "attention_norm"
kind = "norm"
dim = 8
[[block.decoder.module]]
name = "attention"
kind = "attention"
dim = 8
heads = 2
[[block.decoder.module]]
name = "ffn_norm"
kind = "norm"
dim = 8
[[block.decoder.module]]
name = "feed_forward"
kind = "mlp"
dim = 8
hidden = 12
`

type confCase struct {
	name                              string
	train, cluster, policy, emb, head string
	// block adds keys to [block.decoder] (output = "own").
	block string
	// mismatch, when set, is a deliberate difference listed in
	// docs/semantics.md: the run must report it.
	mismatch string
}

var confCases = []confCase{
	{name: "ws1", cluster: "world_size = 1"},
	{name: "ws2", cluster: "world_size = 2"},
	{name: "ws3-uneven", cluster: "world_size = 3"},
	{name: "ws4-empty-ranks", cluster: "world_size = 4"},
	{name: "reshard-false", cluster: "world_size = 2", policy: "reshard_after_forward = false"},
	{name: "reshard-int", cluster: "world_size = 4", policy: "reshard_after_forward = 2"},
	{name: "bf16-fp32-reduce", cluster: "world_size = 2", policy: `param_dtype = "bf16"` + "\n" + `reduce_dtype = "fp32"`},
	{name: "bf16-reduce", cluster: "world_size = 2", policy: `param_dtype = "bf16"` + "\n" + `reduce_dtype = "bf16"`},
	{name: "frozen-embedding", cluster: "world_size = 2", emb: "requires_grad = false"},
	{name: "hsdp-2x2", cluster: "world_size = 4\nmesh = { replicate = 2, shard = 2 }"},
	{name: "accum-sharded", train: "grad_accum = 2", cluster: "world_size = 2"},
	{name: "accum-no-sync", train: "grad_accum = 2\naccumulate = \"unsharded\"", cluster: "world_size = 2"},
	{name: "tied-merge", cluster: "world_size = 2", policy: `tied = "merge"` + "\n" + `units = ["layers.*", "output"]`, head: `tied_to = "emb.weight"`},
	// Divide factors (set_gradient_divide_factor,
	// set_force_sum_reduction_for_comms) and fp16's sum with division
	// before and after.
	{name: "divide-factor-premul", cluster: "world_size = 2", policy: "gradient_divide_factor = 3"},
	{name: "force-sum", cluster: "world_size = 3", policy: "force_sum_reduction = true"},
	{name: "fp16-reduce", cluster: "world_size = 4", policy: `reduce_dtype = "fp16"`},
	{name: "hsdp-divide-factor-shard", cluster: "world_size = 4\nmesh = { replicate = 2, shard = 2 }", policy: "gradient_divide_factor = 2"},
	{name: "hsdp-divide-factor-dp", cluster: "world_size = 4\nmesh = { replicate = 2, shard = 2 }", policy: "gradient_divide_factor = 4"},
	// Explicit prefetch (set_modules_to_forward_prefetch,
	// set_modules_to_backward_prefetch), with the plan's targets.
	{name: "prefetch-2", cluster: "world_size = 3", policy: "prefetch_forward = 2\nprefetch_backward = 2"},
	{name: "prefetch-1-accum", train: "grad_accum = 2", cluster: "world_size = 2", policy: "prefetch_forward = 1\nprefetch_backward = 1"},
	{name: "offload", cluster: "world_size = 2", policy: "offload = true"},
	// Two reduce-scatter inputs in flight (torch 2.14's
	// set_reduce_scatter_max_input_buffers); the collectives are the same.
	{name: "rs-buffers-2", cluster: "world_size = 2", policy: "reduce_scatter_buffers = 2"},
	// Every parameter in a nested unit: FSDP2's root has no parameter
	// group, fsdpc's root group is empty (docs/semantics.md D13).
	{name: "empty-root", cluster: "world_size = 2", policy: `units = ["layers.*", "emb", "norm", "output"]`},
	// fully_shard([emb, output]) as its own unit: its post-backward hangs on
	// emb's inputs only (token ids), so it reduces in the final callback
	// after the root; at the tie with the root its pre-backward fires first
	// (once open discrepancy O18).
	{name: "tied-merge-own-unit", cluster: "world_size = 2", policy: `tied = "merge"` + "\n" + `units = ["layers.*", "emb", "output"]`, head: `tied_to = "emb.weight"`},
}

// confRun is one planned case ready to run.
type confRun struct {
	name     string
	plan     *schedule.Plan
	spec     *Spec
	mismatch string
}

func decoderRun(c confCase) (confRun, error) {
	src := fmt.Sprintf(decoderModel, c.train, c.cluster, c.policy, c.emb, c.head)
	if c.block != "" {
		src = strings.Replace(src, "[block.decoder]\n", "[block.decoder]\n"+c.block+"\n", 1)
	}
	if strings.Contains(c.policy, "units = [") {
		src = strings.Replace(src, "units = \"blocks\"\n", "", 1)
	}
	m, err := ir.Load(c.name+".toml", []byte(src))
	if err != nil {
		return confRun{}, err
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		return confRun{}, err
	}
	s, err := Build(m, p)
	return confRun{name: "decoder/" + c.name, plan: p, spec: s, mismatch: c.mismatch}, err
}

// TestConformance runs the decoder cases and the scaled zoo (zoo_conformance_test.go),
// batched by world size: one set of rank processes runs every case of a
// world size, so each rank imports torch once.
func TestConformance(t *testing.T) {
	py := needTorch(t)
	var runs []confRun
	for _, c := range confCases {
		r, err := decoderRun(c)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		runs = append(runs, r)
	}
	for _, c := range zooCases {
		_, p, s, err := zooPlan(c)
		if err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
		runs = append(runs, confRun{name: "zoo/" + c.model, plan: p, spec: s, mismatch: c.mismatch})
	}
	runConformance(t, py, runs)
}

// runConformance runs the cases under real FSDP2, batched by world size,
// and compares each with its plan.
func runConformance(t *testing.T, py Python, runs []confRun) {
	byWorld := map[int][]int{}
	var worlds []int
	for i, r := range runs {
		if byWorld[r.spec.World] == nil {
			worlds = append(worlds, r.spec.World)
		}
		byWorld[r.spec.World] = append(byWorld[r.spec.World], i)
	}
	sort.Ints(worlds)
	recs := make([][]Record, len(runs))
	launchErr := make([]error, len(runs))
	for _, w := range worlds {
		var specs []*Spec
		for _, i := range byWorld[w] {
			specs = append(specs, runs[i].spec)
		}
		start := time.Now()
		got, err := LaunchAll(py, specs, 3*time.Minute+time.Duration(len(specs))*30*time.Second)
		t.Logf("world size %d: %d cases in %.1fs", w, len(specs), time.Since(start).Seconds())
		for k, i := range byWorld[w] {
			switch {
			case err == nil:
				recs[i] = got[k]
			case len(specs) == 1:
				launchErr[i] = err
			default:
				// One failing case stops its whole batch: run each alone,
				// so the failure is reported against its own case.
				recs[i], launchErr[i] = Launch(py, runs[i].spec, 3*time.Minute)
			}
		}
	}
	matched := 0
	for i, c := range runs {
		t.Run(c.name, func(t *testing.T) {
			if launchErr[i] != nil {
				t.Fatal(launchErr[i])
			}
			bad := Compare(c.plan, recs[i])
			t.Logf("%d ranks, %d collectives on rank 0, %d groups", len(recs[i]), len(recs[i][0].Collectives), len(c.plan.Groups))
			switch {
			case c.mismatch == "" && len(bad) > 0:
				t.Errorf("FSDP2 (torch %s) differs from the plan:\n%s", recs[i][0].Torch, strings.Join(bad, "\n"))
			case c.mismatch != "" && !strings.Contains(strings.Join(bad, "\n"), c.mismatch):
				t.Errorf("the deliberate difference %q was not reported; got:\n%s", c.mismatch, strings.Join(bad, "\n"))
			default:
				matched++
			}
		})
	}
	t.Logf("conformance: %d of %d cases as expected", matched, len(runs))
}

// A rank that hangs is killed after the timeout, with every rank's last
// collective named; Launch reaps every rank before it returns.
func TestLaunchTimeoutNamesRank(t *testing.T) {
	py := needTorch(t)
	s, _ := planSpec(t, "hang.toml", fmt.Sprintf(decoderModel, "", "world_size = 2", "", "", ""))
	testHang = "1:3"
	defer func() { testHang = "" }()
	_, err := Launch(py, s, 60*time.Second)
	if err == nil || !strings.Contains(err.Error(), "did not finish within") || !strings.Contains(err.Error(), "rank 1 ") {
		t.Fatalf("want a timeout naming rank 1, got %v", err)
	}
	t.Log(err)
}
