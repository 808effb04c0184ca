package planner

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

func TestTuneZoo(t *testing.T) {
	for _, name := range plans.Names() {
		t.Run(name, func(t *testing.T) {
			m := loadZoo(t, name)
			tu, err := Tune(m, TuneOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := schedule.Verify(tu.Plan); err != nil {
				t.Fatalf("the tuned plan is unsafe: %v", err)
			}
			if tu.Best.StepTime > tu.Baseline.StepTime*(1+1e-9) && tu.Baseline.Fits {
				t.Errorf("tuned %.4f s is slower than the FSDP2-default plan %.4f s", tu.Best.StepTime, tu.Baseline.StepTime)
			}
			for _, f := range tu.Failed {
				if f.Internal() {
					t.Errorf("%d candidates hit an internal error (first: %s): %s", f.Count, strings.Join(f.Decisions, "; "), f.Reason)
				}
			}
			if tu.Plan.Prediction.PeakReserved > tu.Usable {
				t.Errorf("the tuned plan reserves %d bytes, over the usable %d", tu.Plan.Prediction.PeakReserved, tu.Usable)
			}
			t.Logf("%-16s baseline %8.3f s (exposed %6.3f) → tuned %8.3f s (exposed %6.3f), %+.1f%%, %d candidates in %v, binding %s: %s",
				name, tu.Baseline.StepTime, tu.Baseline.ExposedComm, tu.Best.StepTime, tu.Best.ExposedComm,
				100*(tu.Best.StepTime-tu.Baseline.StepTime)/tu.Baseline.StepTime, tu.Evaluated, tu.Elapsed.Round(1e6), tu.Binding, strings.Join(tu.Best.Decisions, "; "))
		})
	}
}

// TestTuneMatchesExhaustive: on small models the descent finds a plan
// within 1% of the best of every combination.
func TestTuneMatchesExhaustive(t *testing.T) {
	for _, name := range []string{"gpt2-124m", "vit-b16", "t5-base"} {
		m := loadZoo(t, name)
		greedy, err := Tune(m, TuneOptions{})
		if err != nil {
			t.Fatal(err)
		}
		all, err := Tune(m, TuneOptions{Exhaustive: true})
		if err != nil {
			t.Fatal(err)
		}
		if greedy.Best.StepTime > all.Best.StepTime*1.01 {
			t.Errorf("%s: descent %.5f s, exhaustive %.5f s (%d combinations)", name, greedy.Best.StepTime, all.Best.StepTime, all.Evaluated)
		}
		t.Logf("%s: descent %.5f s in %d candidates, exhaustive %.5f s in %d", name, greedy.Best.StepTime, greedy.Evaluated, all.Best.StepTime, all.Evaluated)
	}
}

func TestTuneRespectsFixedChoices(t *testing.T) {
	src, file, _ := plans.Source("llama3-8b")
	text := strings.Replace(string(src), "reduce_dtype = \"fp32\"", "reduce_dtype = \"fp32\"\nreshard_after_forward = true\nprefetch_forward = 1", 1)
	m := mustLoadText(t, file, text)
	tu, err := Tune(m, TuneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range tu.Plan.Groups {
		if !g.Root && (g.Policy.Reshard != schedule.ReshardTrue || g.Policy.PrefetchForward != 1) {
			t.Errorf("group %s: the tuner changed a fixed choice: %+v", g.Name, g.Policy)
		}
		if g.Policy.Param.String() != "bf16" || g.Policy.Reduce.String() != "fp32" || tu.Plan.Train.Checkpointing != "full" {
			t.Errorf("group %s: dtypes or checkpointing changed", g.Name)
		}
	}
	for _, d := range tu.Best.Decisions {
		if strings.Contains(d, "reshard_after_forward") || strings.Contains(d, "prefetch_forward") {
			t.Errorf("decision %q touches a fixed choice", d)
		}
	}
}

// BenchmarkTune405B: the search for llama3.1-405b on 16,384 GPUs.
func BenchmarkTune405B(b *testing.B) {
	src, file, _ := plans.Source("llama3.1-405b")
	text := strings.Replace(string(src), "world_size = 512", "world_size = 16384", 1)
	text = strings.Replace(text, "replicate = 2", "replicate = 64", 1)
	m := mustLoadText(b, file, text)
	for b.Loop() {
		tu, err := Tune(m, TuneOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(tu.Evaluated), "candidates")
	}
}

var _ = fmt.Sprint

// BenchmarkTuneZoo: the search for every zoo model as the file sets it.
func BenchmarkTuneZoo(b *testing.B) {
	for _, name := range plans.Names() {
		m := loadZoo(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Tune(m, TuneOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTuneBaselineReservesAsPlan: the tuner's baseline is the file's own
// plan, reserved memory included: the caching allocator frees its cache
// at the file's budget in both (the tuner once planned under an
// unbounded budget, so llama3.1-405b's baseline reserved 80.30 GiB against
// the plan's 75.97 GiB and the tuner called the file's plan over budget).
func TestTuneBaselineReservesAsPlan(t *testing.T) {
	m := loadZoo(t, "llama3.1-405b")
	p, err := Plan(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tu, err := Tune(loadZoo(t, "llama3.1-405b"), TuneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tu.Baseline.PeakReserved != p.Prediction.PeakReserved || !tu.Baseline.Fits {
		t.Errorf("baseline reserves %d B (fits %t), the plan %d B", tu.Baseline.PeakReserved, tu.Baseline.Fits, p.Prediction.PeakReserved)
	}
}

// TestTuneOwnUnits: the tuner tries torchtitan's units, the token
// embedding and the output projection each a unit of its own beside the
// blocks, and says so in lines that plan the same groups when pasted into
// [policy].
func TestTuneOwnUnits(t *testing.T) {
	m := loadZoo(t, "llama3-8b")
	tu := &tuner{m: m, opts: TuneOptions{Margin: DefaultHeadroom}, cache: map[string]*Candidate{}}
	found := false
	for _, d := range tu.dimensions() {
		found = found || d.name == "embedding and output units"
	}
	if !found {
		t.Fatal("no embedding and output units dimension for llama3-8b")
	}
	k := knobs{prefetchF: -1, prefetchB: -1, ownUnits: true}
	p, err := tu.plan(k, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range p.Groups {
		names = append(names, g.Label())
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"tok_embeddings", "output", "layers.0", "layers.31", "(root)"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("groups %q lack %s", got, want)
		}
	}
	desc := strings.Join(k.describe(tu.unitGlobs()), "\n")
	if want := `units = ["layers.*", "tok_embeddings", "output"]`; !strings.Contains(desc, want) {
		t.Errorf("decisions %q, want %s", desc, want)
	}
	// The printed line, pasted into the file, plans the same groups.
	src, err := os.ReadFile("../plans/llama3-8b.toml")
	if err != nil {
		t.Fatal(err)
	}
	pasted := strings.Replace(string(src), `units = "blocks"`, `units = ["layers.*", "tok_embeddings", "output"]`, 1)
	m2, err := ir.Load("llama3-8b.toml", []byte(pasted))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Plan(m2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Groups) != len(p.Groups) {
		t.Errorf("pasted units plan %d groups, the tuner's %d", len(p2.Groups), len(p.Groups))
	}
}

// TestAllocatorRetryWarning: a plan that fits only because the caching
// allocator frees its cache at the budget says so; one with room does not.
func TestAllocatorRetryWarning(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  bool
	}{{"llama3.1-405b", true}, {"llama3-8b", false}} {
		p, err := Plan(loadZoo(t, tc.model), Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(strings.Join(p.Warnings, "\n"), "frees its cache")
		if got != tc.want {
			t.Errorf("%s: warns of allocator retries %t, want %t: %q", tc.model, got, tc.want, p.Warnings)
		}
	}
}

// BenchmarkTuneDepth: the search on the depth-scaling stack (one linear
// layer per block, 64 GPUs), where the tuner plans candidates on short
// copies of the model first; BenchmarkTuneDepthFull is the same search
// planning every candidate in full, for comparison.
func BenchmarkTuneDepth(b *testing.B)     { benchmarkTuneDepth(b, TuneOptions{}) }
func BenchmarkTuneDepthFull(b *testing.B) { benchmarkTuneDepth(b, TuneOptions{noExtrapolation: true}) }

func benchmarkTuneDepth(b *testing.B, opts TuneOptions) {
	for _, layers := range []int{256, 1024, 2048} {
		file, text := stackText(layers, 64, 0)(b)
		m := mustLoadText(b, file, text)
		b.Run(fmt.Sprintf("layers=%d", layers), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Tune(m, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTuneShortModels: the zoo's deepest models tuned with every
// candidate planned in full and with short models first (forced: Tune
// does not use them below 512 blocks).
func BenchmarkTuneShortModels(b *testing.B) {
	for _, name := range []string{"llama3-70b", "llama3.1-405b"} {
		m := loadZoo(b, name)
		for _, mode := range []struct {
			name string
			opts TuneOptions
		}{{"full", TuneOptions{noExtrapolation: true}}, {"short", TuneOptions{forceExtrapolation: true}}} {
			b.Run(name+"/"+mode.name, func(b *testing.B) {
				for b.Loop() {
					if _, err := Tune(m, mode.opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestBetterEquallyFast: two fitting candidates whose predicted steps are
// one floating-point rounding step apart are equally fast, so the one that
// reserves less memory is better whichever is nominally faster; a real
// difference in time still decides before memory.
func TestBetterEquallyFast(t *testing.T) {
	const step = 3.2901234567
	next := math.Nextafter(step, math.Inf(1))
	cases := []struct {
		name    string
		a, b    Candidate
		aBetter bool
		bBetter bool
	}{
		{"one rounding step slower, less memory",
			Candidate{StepTime: next, PeakReserved: 60 << 30, Fits: true},
			Candidate{StepTime: step, PeakReserved: 61 << 30, Fits: true}, true, false},
		{"one rounding step faster, more memory",
			Candidate{StepTime: step, PeakReserved: 61 << 30, Fits: true},
			Candidate{StepTime: next, PeakReserved: 60 << 30, Fits: true}, false, true},
		{"equal in both: neither",
			Candidate{StepTime: step, PeakReserved: 60 << 30, Fits: true},
			Candidate{StepTime: next, PeakReserved: 60 << 30, Fits: true}, false, false},
		{"faster by more than the tolerance wins on time",
			Candidate{StepTime: step * (1 - 1e-8), PeakReserved: 61 << 30, Fits: true},
			Candidate{StepTime: step, PeakReserved: 60 << 30, Fits: true}, true, false},
		{"fitting beats faster",
			Candidate{StepTime: 2 * step, PeakReserved: 70 << 30, Fits: true},
			Candidate{StepTime: step, PeakReserved: 60 << 30}, true, false},
		{"neither fits: less memory",
			Candidate{StepTime: 2 * step, PeakReserved: 80 << 30},
			Candidate{StepTime: step, PeakReserved: 90 << 30}, true, false},
	}
	for _, c := range cases {
		if got := better(&c.a, &c.b); got != c.aBetter {
			t.Errorf("%s: better(a, b) = %v, want %v", c.name, got, c.aBetter)
		}
		if got := better(&c.b, &c.a); got != c.bBetter {
			t.Errorf("%s: better(b, a) = %v, want %v", c.name, got, c.bBetter)
		}
	}
	// The descent keeps the equally fast candidate that reserves less.
	tu := &tuner{cache: map[string]*Candidate{}}
	slow := &Candidate{StepTime: step, PeakReserved: 61 << 30, Fits: true, knobs: knobs{prefetchF: 2}}
	lean := &Candidate{StepTime: next, PeakReserved: 60 << 30, Fits: true, knobs: knobs{prefetchF: 1}}
	tu.cache[slow.knobs.key()], tu.cache[lean.knobs.key()] = slow, lean
	if got := tu.sorted(); got[0] != lean {
		t.Errorf("sorted puts the candidate reserving %d bytes first, want the one reserving %d", got[0].PeakReserved, lean.PeakReserved)
	}
}

// TestTuneCountsFailures: candidates that fail to plan for a reason other
// than the budget are counted by reason (the error's first line), sorted,
// with the first one's decisions; an internal error is flagged.
func TestTuneCountsFailures(t *testing.T) {
	var tu tuner
	tu.fail(fmt.Errorf("internal error: the planner emitted an unsafe schedule (please report):\nbuffer x is never freed"), &Candidate{Decisions: []string{"a"}})
	tu.fail(fmt.Errorf("internal error: the planner emitted an unsafe schedule (please report):\nbuffer y is never freed"), &Candidate{Decisions: []string{"b"}})
	tu.fail(fmt.Errorf("blocks_per_unit 3 does not divide 32 blocks"), &Candidate{Decisions: []string{"c"}})
	got := tu.failures()
	if len(got) != 2 || got[0].Reason != "blocks_per_unit 3 does not divide 32 blocks" || got[1].Count != 2 ||
		got[1].Decisions[0] != "a" || got[0].Internal() || !got[1].Internal() {
		t.Errorf("failures: %+v", got)
	}
}
