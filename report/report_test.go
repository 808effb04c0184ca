package report

import (
	"bytes"
	"github.com/fsdpc/fsdpc/internal/zootest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

func zooPlan(t testing.TB, name string) *schedule.Plan {
	t.Helper()
	p, err := planner.Plan(zootest.Model(t, name), planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// zooInput is a zoo model's plan with its FLOPs per token, so the page
// gives MFU.
func zooInput(t testing.TB, name string) Input {
	t.Helper()
	src, file, _ := plans.Source(name)
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Name: name, Plan: zooPlan(t, name), FLOPsPerToken: m.FLOPsPerToken()}
}

// variantInput is a zoo model with its file's text edited (pairs of old,
// new strings), planned, with its FLOPs per token.
func variantInput(t testing.TB, name string, edits ...string) Input {
	t.Helper()
	src, file, _ := plans.Source(name)
	s := string(src)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("%s has no %q", file, edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	m, err := ir.Load(file, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return Input{Name: name + "-variant", Plan: p, FLOPsPerToken: m.FLOPsPerToken()}
}

// drawnOps counts the operations the timeline must draw: those that take
// time and are not allocator or event bookkeeping.
func drawnOps(t *testing.T, p *schedule.Plan) int {
	sim, err := schedule.Simulate(p, schedule.NewModel(p))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, o := range p.Ops {
		switch o.Kind {
		case schedule.OpAlloc, schedule.OpFree, schedule.OpRecord:
			continue
		}
		if sim.Ops[i].End > sim.Ops[i].Start {
			n++
		}
	}
	return n
}

// opsDrawn counts the operations a page draws: a rectangle each, or the
// data-ops of a fold.
func opsDrawn(page string) int {
	n := strings.Count(page, `<rect class="op"`)
	for _, m := range regexp.MustCompile(`<rect class="op"[^>]* data-ops="(\d+)"`).FindAllStringSubmatch(page, -1) {
		k, _ := strconv.Atoi(m[1])
		n += k - 1
	}
	return n
}

// external matches anything a browser would fetch from elsewhere.
var external = regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?[a-z]+:|url\(|@import|<link|<iframe|<img`)

func TestPage(t *testing.T) {
	a, b := zooPlan(t, "llama3-8b"), zooPlan(t, "gpt2-124m")
	var one, two bytes.Buffer
	if err := Write(&one, Input{Name: "llama3-8b", Plan: a}); err != nil {
		t.Fatal(err)
	}
	if err := Write(&two, Input{Name: "llama3-8b", Plan: a}, Input{Name: "gpt2-124m", Plan: b}); err != nil {
		t.Fatal(err)
	}
	for name, page := range map[string]string{"one plan": one.String(), "two plans": two.String()} {
		if m := external.FindString(page); m != "" {
			t.Errorf("%s: the page fetches from elsewhere: %q", name, m)
		}
		for _, want := range []string{`<svg class="timeline"`, `<svg class="memory"`, `class="peak-text"`, `<table class="groups">`, `<table class="decisions">`, `class="warnings"`} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: no %s", name, want)
			}
		}
	}
	if got, want := opsDrawn(one.String()), drawnOps(t, a); got != want {
		t.Errorf("the timeline draws %d operations, want %d", got, want)
	}
	if got := strings.Count(one.String(), `<tr class="group"`); got != 2*len(a.Groups) {
		t.Errorf("%d group rows, want %d (bars and decisions)", got, 2*len(a.Groups))
	}
	for range 3 {
		var again bytes.Buffer
		if err := Write(&again, Input{Name: "llama3-8b", Plan: a}); err != nil || !bytes.Equal(again.Bytes(), one.Bytes()) {
			t.Fatalf("two reports of one plan differ (%v)", err)
		}
	}
	if strings.Contains(one.String(), `id="diff"`) || !strings.Contains(two.String(), `id="diff"`) {
		t.Error("the diff section must appear with two plans only")
	}
	for _, w := range a.Warnings {
		if !strings.Contains(one.String(), escaped(w)) {
			t.Errorf("warning %q is not on the page", w)
		}
	}
}

// escaped escapes text as html/template does for element content.
func escaped(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;")
	return r.Replace(s)
}

func TestHostileNames(t *testing.T) {
	p := zooPlan(t, "gpt2-124m")
	p.Header.Model = `</title><script>alert(1)</script>`
	p.Warnings = append(p.Warnings, `<img src=x onerror=alert(2)>`)
	var buf bytes.Buffer
	if err := Write(&buf, Input{Name: `"><svg onload=alert(3)>`, Plan: p}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script>alert", "<img src=x", "<svg onload"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	if err := Write(&buf); err == nil {
		t.Error("no plans: no error")
	}
}

// TestPageUnits: the summary gives the step's parts, tokens/s and HFU,
// and MFU when the model's FLOPs per token are known: given, or carried
// by the plan (format 8 on). An older plan's page says what MFU needs.
func TestPageUnits(t *testing.T) {
	in := zooInput(t, "llama3-8b")
	var with, without bytes.Buffer
	if err := Write(&with, in); err != nil {
		t.Fatal(err)
	}
	in.FLOPsPerToken = 0
	var carried bytes.Buffer
	if err := Write(&carried, in); err != nil {
		t.Fatal(err)
	}
	older := *in.Plan
	older.Train.ModelFLOPsPerToken = 0 // as a plan before format 8 decodes
	in.Plan = &older
	if err := Write(&without, in); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"forward and backward kernels", "FSDP copies, casts and divides", "tokens/s per GPU", "HFU"} {
		if !strings.Contains(with.String(), want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	mfu := regexp.MustCompile(`MFU</td>\s*<td>\d+\.\d% \([^<]*`)
	if !mfu.MatchString(with.String()) {
		t.Error("no MFU figure with the model's FLOPs per token")
	}
	if got, want := mfu.FindString(carried.String()), mfu.FindString(with.String()); got != want {
		t.Errorf("MFU from the plan's FLOPs per token %q, from the model's %q", got, want)
	}
	if !strings.Contains(without.String(), "which plans before format 8 do not carry") {
		t.Error("an older plan without the model: MFU does not say what it needs")
	}
}

// A plan of hundreds of thousands of operations makes a page of a few
// hundred kilobytes: operations narrower than a pixel fold, the memory
// outline keeps four points a pixel, and every operation is still counted.
func TestPageFoldsLargePlans(t *testing.T) {
	src, file, _ := plans.Source("gpt2-124m")
	s := strings.Replace(string(src), "grad_accum = 2", "grad_accum = 100", 1)
	m, err := ir.Load(file, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := Write(&page, Input{Name: "gpt2-124m", Plan: p}); err != nil {
		t.Fatal(err)
	}
	if page.Len() > 2<<20 {
		t.Errorf("a plan of %d operations makes a page of %d bytes", len(p.Ops), page.Len())
	}
	if got, want := opsDrawn(page.String()), drawnOps(t, p); got != want {
		t.Errorf("the timeline draws %d operations, want %d", got, want)
	}
	if n := strings.Count(page.String(), `<rect class="op"`); n > 4*len(streamNames)*chartWidth {
		t.Errorf("%d rectangles for %d operations", n, len(p.Ops))
	}
}
