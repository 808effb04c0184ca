package report

import (
	"bytes"

	"github.com/fsdpc/fsdpc/schedule/diff"
)

// The difference is what a two-plan page opens with: the summary `fsdpc
// diff` prints (diff.Summary, the same folding), laid out as a table of
// before, after and delta, each value linking to where its plan's page
// shows it, then the likely causes (diff.Result.Causes); the whole text of
// `fsdpc diff` follows, folded away.

// diffRow is one row of the difference table: a changed value, or a line
// the summary gives as text (Text set, no values).
type diffRow struct {
	// Label starts a section of Span rows (0 on the rows below its first).
	Label string
	Span  int
	What  string
	Old   string
	New   string
	Delta string
	// Worse and Better colour the delta of a prediction: more time or
	// memory is worse.
	Worse, Better bool
	Text          string
	// Anchor is the part of each plan's page that shows the value:
	// "timeline", "memory" or "decisions".
	Anchor string
}

type difference struct {
	Identical bool
	Old, New  string
	Rows      []diffRow
	Causes    []string
	Text      string
}

// summaryEntries is how many entries each summary line names, as the text
// and Markdown views do.
const summaryEntries = 4

func newDifference(a, b Input) difference {
	r := diff.Compare(a.Name, a.Plan, b.Name, b.Plan)
	var buf bytes.Buffer
	diff.Text(&buf, r, false)
	d := difference{Identical: r.Identical, Old: a.Name, New: b.Name, Causes: r.Causes, Text: buf.String()}
	for _, l := range diff.Summary(r, summaryEntries) {
		if len(l.Changes) == 0 {
			d.Rows = append(d.Rows, diffRow{Label: l.Label, Span: 1, Text: l.Text, Anchor: anchorOf(l.Label, "")})
			continue
		}
		first := len(d.Rows)
		for _, c := range l.Changes {
			row := diffRow{What: c.What, Old: grouped(c.Old, c.OldValue, c.Unit), New: grouped(c.New, c.NewValue, c.Unit), Delta: c.Delta,
				Anchor: anchorOf(l.Label, c.Unit)}
			if row.What == l.Label {
				row.What = ""
			}
			if c.Relative != nil && (c.Unit == diff.UnitSeconds || c.Unit == diff.UnitBytes) {
				row.Worse, row.Better = *c.Relative > 0, *c.Relative < 0
			}
			d.Rows = append(d.Rows, row)
		}
		if l.More > 0 {
			d.Rows = append(d.Rows, diffRow{Text: "… " + commas(l.More) + " more (the whole diff below)", Anchor: anchorOf(l.Label, "")})
		}
		d.Rows[first].Label, d.Rows[first].Span = l.Label, len(d.Rows)-first
	}
	return d
}

// anchorOf says which part of a plan's page shows a summary line: memory
// figures the memory drawing, policy the decisions table, everything else
// (time, the schedule, the cluster) the timeline.
func anchorOf(label, unit string) string {
	switch {
	case unit == diff.UnitBytes:
		return "memory"
	case label == "policy" || label == "groups" || label == "layout" || label == "parameters":
		return "decisions"
	}
	return "timeline"
}

// grouped prints a count with its thousands grouped ("16,384"); any other
// value (bytes, seconds, names) as the diff shows it.
func grouped(shown string, v any, unit string) string {
	if unit != "" {
		return shown
	}
	switch n := v.(type) {
	case int:
		return commas(n)
	case int64:
		return commas(n)
	}
	return shown
}
