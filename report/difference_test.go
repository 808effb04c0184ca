package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule/diff"
)

// TestDifferenceTable: a two-plan page opens with the difference, before
// either plan: every prediction `fsdpc diff` summarises as a row of
// before, after and delta, every likely cause, the whole text of the diff
// folded away, and links that land on both plans' sections.
func TestDifferenceTable(t *testing.T) {
	old := zooInput(t, "llama3-8b")
	new := variantInput(t, "llama3-8b", "world_size = 8", "world_size = 16", `reduce_dtype = "fp32"`, `reduce_dtype = "bf16"`)
	var buf bytes.Buffer
	if err := Write(&buf, old, new); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	d, p := strings.Index(page, `<section id="diff">`), strings.Index(page, `<section class="plan"`)
	if d < 0 || p < d {
		t.Fatalf("the difference is not the page's first section (diff at %d, first plan at %d)", d, p)
	}
	table := page[d:p]
	r := diff.Compare(old.Name, old.Plan, new.Name, new.Plan)
	if len(r.Prediction) < 3 || len(r.Causes) == 0 {
		t.Fatalf("the variant changes too little to test: %d predictions, %d causes", len(r.Prediction), len(r.Causes))
	}
	for _, c := range r.Prediction {
		row := regexp.MustCompile(`<td class="section" rowspan="1">` + regexp.QuoteMeta(c.What) + `</td><td></td>` +
			`<td class="num"><a href="#plan0-(timeline|memory)">` + regexp.QuoteMeta(c.Old) + `</a></td>` +
			`<td class="num"><a href="#plan1-(timeline|memory)">` + regexp.QuoteMeta(c.New) + `</a></td>` +
			`<td class="num (worse|better)">` + regexp.QuoteMeta(escaped(c.Delta)) + `</td>`)
		if !row.MatchString(table) {
			t.Errorf("no row %s: %s → %s (%s)", c.What, c.Old, c.New, c.Delta)
		}
	}
	// Counts are grouped by thousands.
	if !strings.Contains(table, `>16</a>`) || !strings.Contains(table, "world size") {
		t.Error("no world size row 8 → 16")
	}
	for _, c := range r.Causes {
		if !strings.Contains(table, "<li>"+escaped(c)+"</li>") {
			t.Errorf("cause %q is not listed", c)
		}
	}
	var text bytes.Buffer
	diff.Text(&text, r, false)
	if !strings.Contains(table, "<pre>"+escaped(text.String())+"</pre>") {
		t.Error("the whole text of fsdpc diff is not on the page")
	}
	// Every link lands on an element of the page, in both plans.
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		ids[m[1]] = true
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(page, -1) {
		targets[m[1]] = true
		if !ids[m[1]] {
			t.Errorf("a link to #%s, which is nowhere on the page", m[1])
		}
	}
	for _, want := range []string{"plan0-timeline", "plan1-timeline", "plan0-memory", "plan1-memory"} {
		if !targets[want] {
			t.Errorf("the difference does not link to #%s", want)
		}
	}

	var same bytes.Buffer
	if err := Write(&same, old, old); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(same.String(), "The two plans are the same.") || strings.Contains(same.String(), `id="diff-table"`) {
		t.Error("two identical plans: the page does not say they are the same")
	}
}

// TestDifferenceEscaped: names from plans and file names reach the
// difference's title, rows and causes only escaped.
func TestDifferenceEscaped(t *testing.T) {
	a, b := zooPlan(t, "gpt2-124m"), zooPlan(t, "gpt2-124m")
	a.Header.Model = `</title><script>alert(1)</script>`
	b.Warnings = append(b.Warnings, `<img src=x onerror=alert(2)>`)
	b.Cluster.GPU = `<svg onload=alert(4)>`
	var buf bytes.Buffer
	if err := Write(&buf, Input{Name: `"><svg onload=alert(3)>`, Plan: a}, Input{Name: `<b>new</b>`, Plan: b}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script>alert", "<img src=x", "<svg onload", "<b>new"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	if !strings.Contains(page, `id="diff-table"`) || !strings.Contains(page, escaped(`<svg onload=alert(4)>`)) {
		t.Error("the hostile GPU name is not in the difference table, escaped")
	}
}
