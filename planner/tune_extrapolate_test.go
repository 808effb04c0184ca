package planner

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestExtrapolatedTuneMatchesFull: tuning with candidates estimated on
// short models first reports exactly what tuning with every candidate
// planned in full does, on every zoo model deep enough for short models
// (forced where Tune would not use them, as it gains nothing there) and
// on deeper and wider variants: the same tuned plan byte for byte, the
// same best candidate, baseline, alternatives in the same order, binding
// constraint and number of candidates.
func TestExtrapolatedTuneMatchesFull(t *testing.T) {
	if testing.Short() {
		t.Skip("tunes every zoo model twice")
	}
	type variant struct {
		name  string
		model func(testing.TB) (string, string)
	}
	var vs []variant
	for _, name := range plans.Names() {
		vs = append(vs, variant{name, zooText(name)})
	}
	vs = append(vs,
		variant{"llama3.1-405b@16384", zooText("llama3.1-405b", "world_size = 512", "world_size = 16384", "replicate = 2", "replicate = 64")},
		variant{"llama3-8b@64", zooText("llama3-8b", "world_size = 8", "world_size = 64")},
		variant{"llama3-8b×160", zooText("llama3-8b", "repeat = 32", "repeat = 160")},
		variant{"llama3-70b×240", zooText("llama3-70b", "repeat = 80", "repeat = 240", "nodes = 8", "nodes = 24")},
		variant{"stack256", stackText(256, 64, 0)},
		variant{"stack256-prefetch2", stackText(256, 64, 2)},
	)
	extrapolated, ran := 0, 0
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			ran++
			file, text := v.model(t)
			full, err := Tune(mustLoadText(t, file, text), TuneOptions{noExtrapolation: true})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Tune(mustLoadText(t, file, text), TuneOptions{forceExtrapolation: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s; %d candidates", got.Extrapolated, got.Evaluated)
			if strings.HasPrefix(got.Extrapolated, "candidates planned first") {
				extrapolated++
			}
			if want, have := summary(full), summary(got); want != have {
				t.Errorf("extrapolated tuning differs from the full one:\nfull:\n%s\nextrapolated:\n%s", want, have)
			}
			a, err := schedule.Encode(full.Plan)
			if err != nil {
				t.Fatal(err)
			}
			b, err := schedule.Encode(got.Plan)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Error("the tuned plans differ")
			}
		})
	}
	if ran == len(vs) && extrapolated < 8 {
		t.Errorf("only %d variants extrapolated: the test no longer covers the shortcut", extrapolated)
	}
}

// summary is what Tune reports, as text.
func summary(tu *Tuning) string {
	line := func(c Candidate) string {
		return fmt.Sprintf("%q step %v exposed %v reserves %d fits %t", c.Decisions, c.StepTime, c.ExposedComm, c.PeakReserved, c.Fits)
	}
	s := fmt.Sprintf("best %s\nbaseline %s\nbinding %s, %d candidates\n", line(tu.Best), line(tu.Baseline), tu.Binding, tu.Evaluated)
	for i, c := range tu.Alternatives {
		s += fmt.Sprintf("alternative %d: %s\n", i+1, line(c))
	}
	return s
}

// TestCanonicalKnobsPlanAlike: knobs the tuner plans once because they
// spell the file's own setting (tuner.canonical) predict the same step as
// the knobs they stand for, on every zoo model, for every value of every
// dimension from the file's own plan and from a plan with every block
// unsharded after forward.
func TestCanonicalKnobsPlanAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("plans every knob of every zoo model twice; .ci/run's go test runs it")
	}
	differ := 0
	for _, name := range plans.Names() {
		m := loadZoo(t, name)
		tu := &tuner{m: m, opts: TuneOptions{Margin: DefaultHeadroom}, cache: map[string]*Candidate{}}
		for _, from := range []knobs{{prefetchF: -1, prefetchB: -1}, {prefetchF: -1, prefetchB: -1, reshard: "false"}} {
			for _, d := range tu.dimensions() {
				for i, set := range d.values {
					k := from
					set(&k)
					c := tu.canonical(k)
					if c == k {
						continue
					}
					differ++
					p, errP := tu.plan(k, true)
					q, errQ := tu.plan(c, true)
					if p == nil || q == nil {
						// Neither plans, for the same reason.
						if p != q || fmt.Sprint(errP) != fmt.Sprint(errQ) {
							t.Errorf("%s %s = %s: %v, canonical %v", name, d.name, d.labels[i], errP, errQ)
						}
						continue
					}
					if !reflect.DeepEqual(p.Prediction, q.Prediction) {
						t.Errorf("%s %s = %s from %+v: predicts %+v, canonical %+v %+v", name, d.name, d.labels[i], from, p.Prediction, c, q.Prediction)
					}
				}
			}
		}
	}
	if differ < 10 {
		t.Errorf("only %d knobs have a canonical spelling of their own: the test no longer covers canonical", differ)
	}
}
