package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

func zooPlan(t testing.TB, name string) *schedule.Plan {
	t.Helper()
	src, file, ok := plans.Source(name)
	if !ok {
		t.Fatalf("no zoo model %s", name)
	}
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
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

// external matches anything a browser would fetch from elsewhere.
var external = regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?[a-z]+:|url\(|@import|<link|<iframe|<img`)

func TestPage(t *testing.T) {
	a, b := zooPlan(t, "llama3-8b"), zooPlan(t, "gpt2-124m")
	var one, two bytes.Buffer
	if err := Write(&one, Input{"llama3-8b", a}); err != nil {
		t.Fatal(err)
	}
	if err := Write(&two, Input{"llama3-8b", a}, Input{"gpt2-124m", b}); err != nil {
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
	if got, want := strings.Count(one.String(), `<rect class="op"`), drawnOps(t, a); got != want {
		t.Errorf("the timeline draws %d operations, want %d", got, want)
	}
	if got := strings.Count(one.String(), `<tr class="group"`); got != 2*len(a.Groups) {
		t.Errorf("%d group rows, want %d (bars and decisions)", got, 2*len(a.Groups))
	}
	for range 3 {
		var again bytes.Buffer
		if err := Write(&again, Input{"llama3-8b", a}); err != nil || !bytes.Equal(again.Bytes(), one.Bytes()) {
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
	if err := Write(&buf, Input{`"><svg onload=alert(3)>`, p}); err != nil {
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
