package planner

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// identityHashes is the golden table of TestPlansByteIdentical: one line
// per variant, its name and the SHA-256 of its plan.bin (prediction
// included). Rewrite it with `go test ./planner -run PlansByteIdentical
// -update`; a changed line is a reviewed change, like any golden file.
const identityHashes = "testdata/plan-hashes.txt"

// identityVariant is one planning problem whose plan must not change when
// only the planner's speed does.
type identityVariant struct {
	name  string
	model func(t testing.TB) (file, text string)
	tune  bool
}

func zooText(name string, replace ...string) func(t testing.TB) (string, string) {
	return func(t testing.TB) (string, string) {
		src, file, ok := plans.Source(name)
		if !ok {
			t.Fatalf("%s is not in the zoo", name)
		}
		text := string(src)
		for i := 0; i+1 < len(replace); i += 2 {
			if !strings.Contains(text, replace[i]) {
				t.Fatalf("%s: %q not found: the zoo file changed shape", name, replace[i])
			}
			text = strings.Replace(text, replace[i], replace[i+1], 1)
		}
		return file, text
	}
}

// stackText is the depth-scaling model of the benchmarks, optionally with
// explicit prefetch.
func stackText(layers, world, prefetch int) func(t testing.TB) (string, string) {
	return func(testing.TB) (string, string) {
		pf := ""
		if prefetch > 0 {
			pf = fmt.Sprintf("prefetch_forward = %d\nprefetch_backward = %d\n", prefetch, prefetch)
		}
		return "stack.toml", fmt.Sprintf(`
[train]
micro_batch = 1
seq_len = 2048
[cluster]
gpu = "h100-sxm"
world_size = %d
[policy]
param_dtype = "bf16"
reduce_dtype = "fp32"
%s[[module]]
name = "layers"
repeat = %d
[[module.module]]
name = "ff"
kind = "linear"
in = 1024
out = 1024
`, world, pf, layers)
	}
}

func identityVariants() []identityVariant {
	var vs []identityVariant
	for _, name := range plans.Names() {
		vs = append(vs, identityVariant{name: name, model: zooText(name)})
	}
	vs = append(vs,
		identityVariant{name: "llama3.1-405b@4096", model: zooText("llama3.1-405b", "world_size = 512", "world_size = 4096", "replicate = 2", "replicate = 16")},
		identityVariant{name: "llama3.1-405b@16384", model: zooText("llama3.1-405b", "world_size = 512", "world_size = 16384", "replicate = 2", "replicate = 64")},
		identityVariant{name: "llama3-8b@64", model: zooText("llama3-8b", "world_size = 8", "world_size = 64")},
		identityVariant{name: "llama3-8b@1024", model: zooText("llama3-8b", "world_size = 8", "world_size = 1024")},
	)
	for _, layers := range []int{32, 256} {
		for _, pf := range []int{0, 1, 3} {
			vs = append(vs, identityVariant{name: fmt.Sprintf("stack%d-prefetch%d", layers, pf), model: stackText(layers, 64, pf)})
		}
	}
	for _, name := range []string{"gpt2-124m", "llama3-8b", "llama3-70b", "mixtral-8x7b", "t5-base"} {
		vs = append(vs, identityVariant{name: name + "+tune", model: zooText(name), tune: true})
	}
	return vs
}

// TestPlansByteIdentical plans every zoo model, the scaling variants and a
// few tuned plans and compares each plan.bin's hash with the golden table:
// speed work on the planner, tuner and simulator must leave every plan
// byte for byte as it was.
func TestPlansByteIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("plans and tunes every zoo model")
	}
	var got strings.Builder
	for _, v := range identityVariants() {
		file, text := v.model(t)
		m := mustLoadText(t, file, text)
		var p *schedule.Plan
		var err error
		chose := ""
		if v.tune {
			var tu *Tuning
			tu, err = Tune(m, TuneOptions{})
			if tu != nil {
				p = tu.Plan
				chose = " " + strings.Join(tu.Best.Decisions, "; ")
			}
		} else {
			p, err = Plan(m, Options{})
		}
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		b, err := schedule.Encode(p)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		fmt.Fprintf(&got, "%-24s %x%s\n", v.name, sha256.Sum256(b), chose)
	}
	if *update {
		if err := os.WriteFile(identityHashes, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(identityHashes)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("plans changed; if the change is intended (a planner or cost-model change, not a speed-up), review it and regenerate %s with\n\tgo test ./planner -run TestPlansByteIdentical -update\n%s", identityHashes, lineDiff(string(want), got.String()))
	}
}

func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "- %s\n+ %s\n", wl, gl)
		}
	}
	return b.String()
}
