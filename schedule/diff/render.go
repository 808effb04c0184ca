package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
)

// Text renders the difference for a terminal: a summary that fits one
// screen, then the details. color adds ANSI colours (old values red, new
// green).
func Text(w io.Writer, r *Result, color bool) {
	t := &textOut{w: w, color: color}
	t.line("fsdpc diff %s → %s", r.Old.Name, r.New.Name)
	if r.Identical {
		t.line("no differences")
		return
	}
	t.line("")
	t.line("summary")
	for _, s := range Summary(r, 4) {
		t.line("  %-22s %s", s.Label, t.paint(s.Text))
	}
	if len(r.Causes) > 0 {
		t.line("  %-22s %s", "likely causes", strings.Join(firstN(r.Causes, 3), "; "))
	}
	t.line("")
	t.line("details")
	details(r, func(section string, lines []string) {
		t.line("  %s", section)
		for _, l := range lines {
			t.line("    %s", t.paint(l))
		}
	})
}

type textOut struct {
	w     io.Writer
	color bool
}

// line prints a line. String arguments come from plans and file names:
// they are Escape'd, so none adds a line or an escape sequence; painted
// ones were escaped before paint coloured them.
func (t *textOut) line(format string, args ...any) {
	for i, a := range args {
		switch a := a.(type) {
		case string:
			args[i] = safetext.Escape(a)
		case painted:
			args[i] = string(a)
		}
	}
	fmt.Fprintf(t.w, format+"\n", args...)
}

// painted is text paint escaped and coloured.
type painted string

// paint colours "old → new" pairs when colour is on.
func (t *textOut) paint(s string) painted {
	s = safetext.Escape(s)
	if !t.color {
		return painted(s)
	}
	if i := strings.Index(s, " → "); i >= 0 {
		// Colour the word before and after the arrow.
		start := strings.LastIndexByte(s[:i], ' ') + 1
		end := strings.IndexAny(s[i+len(" → "):], " ;(")
		if end < 0 {
			end = len(s) - i - len(" → ")
		}
		end += i + len(" → ")
		return painted(s[:start] + "\x1b[31m" + s[start:i] + "\x1b[0m → \x1b[32m" + s[i+len(" → "):end] + "\x1b[0m" + s[end:])
	}
	return painted(s)
}

// SummaryLine is one line of the summary every view of a difference opens
// with: a label and its text, folded to a few entries. Changes holds the
// values behind the text where the line lists changed values (cluster,
// training, policy, parameters, other fields, provenance, each prediction),
// at most as many as the text names, so a view can lay them out as before,
// after and delta; More counts those the text folds into "… N more".
type SummaryLine struct {
	Label, Text string
	Changes     []Change
	More        int
}

// Summary gives the one-screen view of r that the text, Markdown and HTML
// views share: each section folded to at most n entries.
func Summary(r *Result, n int) []SummaryLine {
	var out []SummaryLine
	pairs := func(label string, cs []Change) SummaryLine {
		var parts []string
		for _, c := range cs {
			parts = append(parts, fmt.Sprintf("%s %s → %s", c.What, c.Old, c.New))
		}
		l := SummaryLine{Label: label, Text: strings.Join(firstN(parts, n), "; "), Changes: cs}
		if len(cs) > n {
			l.Changes, l.More = cs[:n], len(cs)-n
		}
		return l
	}
	if len(r.Cluster) > 0 {
		out = append(out, pairs("cluster", r.Cluster))
	}
	if len(r.Train) > 0 {
		out = append(out, pairs("training", r.Train))
	}
	g := r.Groups
	if g.OldCount != g.NewCount || len(g.Added)+len(g.Removed)+len(g.Split)+len(g.Merged) > 0 {
		out = append(out, SummaryLine{Label: "groups", Text: fmt.Sprintf("%d → %d: %d added, %d removed, %d split, %d merged",
			g.OldCount, g.NewCount, len(g.Added), len(g.Removed), len(g.Split), len(g.Merged))})
	}
	var pol []string
	var polChanges []Change
	for _, e := range g.Policy {
		pol = append(pol, fmt.Sprintf("%s %s → %s on %s", e.What, e.Old, e.New, e.Folded))
		c := e.Change
		c.What += " on " + e.Folded
		polChanges = append(polChanges, c)
	}
	if len(pol) > 0 {
		l := SummaryLine{Label: "policy", Text: strings.Join(firstN(pol, n), "; "), Changes: polChanges}
		if len(polChanges) > n {
			l.Changes, l.More = polChanges[:n], len(polChanges)-n
		}
		out = append(out, l)
	}
	if len(g.Layout) > 0 {
		out = append(out, SummaryLine{Label: "layout", Text: fmt.Sprintf("%d changes to shard sizes or padding (details below)", len(g.Layout))})
	}
	sch := scheduleSummary(r)
	if len(sch) > 0 {
		out = append(out, SummaryLine{Label: "schedule", Text: strings.Join(firstN(sch, n), "; ")})
	}
	if len(r.Program) > 0 && len(sch) == 0 {
		// Counts per kind agree: say what changed op by op instead.
		var ps []string
		for _, e := range r.Program {
			ps = append(ps, e.String())
		}
		out = append(out, SummaryLine{Label: "program", Text: strings.Join(firstN(ps, n), "; ")})
	}
	if len(r.Params) > 0 {
		out = append(out, pairs("parameters", r.Params))
	}
	if len(r.Buffers) > 0 && len(g.Layout) == 0 {
		var bs []string
		for _, e := range r.Buffers {
			bs = append(bs, fmt.Sprintf("%s %s → %s on %s", e.What, e.Old, e.New, e.Folded))
		}
		out = append(out, SummaryLine{Label: "buffers", Text: strings.Join(firstN(bs, n), "; ")})
	}
	if len(r.Other) > 0 {
		out = append(out, pairs("other fields", r.Other))
	}
	for _, c := range r.Prediction {
		text := fmt.Sprintf("%s → %s", c.Old, c.New)
		if c.Delta != "" {
			text += " (" + c.Delta + ")"
		}
		out = append(out, SummaryLine{Label: c.What, Text: text, Changes: []Change{c}})
	}
	if r.Checkpoint != nil {
		out = append(out, SummaryLine{Label: "checkpoint", Text: r.Checkpoint.summaryText()})
	}
	if len(r.Provenance) > 0 {
		out = append(out, pairs("provenance", r.Provenance))
	}
	return out
}

// scheduleSummary folds schedule changes for the summary: operations of
// groups added or removed wholesale are left to the groups line, and
// changes to the same groups in one phase are named together
// ("backward: all-gather, copy-in, copy-out of layers.{0–31} removed").
func scheduleSummary(r *Result) []string {
	whole := map[string]bool{}
	for _, g := range append(append([]string(nil), r.Groups.Added...), r.Groups.Removed...) {
		whole[g] = true
	}
	type key struct{ phase, folded, verb string }
	kinds := map[key][]string{}
	var order []key
	for _, p := range r.Schedule {
		var groups []string
		for _, g := range p.Groups {
			if !whole[g] {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 {
			continue
		}
		verb := fmt.Sprintf("%d → %d per group", p.Old, p.New)
		switch {
		case p.New == 0:
			verb = "removed"
		case p.Old == 0:
			verb = "added"
		}
		k := key{p.Phase, Fold(groups), verb}
		if _, ok := kinds[k]; !ok {
			order = append(order, k)
		}
		kinds[k] = append(kinds[k], p.Kind)
	}
	var out []string
	for _, k := range order {
		out = append(out, fmt.Sprintf("%s: %s of %s %s", k.phase, strings.Join(kinds[k], ", "), k.folded, k.verb))
	}
	return out
}

func firstN(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return append(append([]string(nil), xs[:n]...), fmt.Sprintf("… %d more", len(xs)-n))
}

// details walks every difference, section by section.
func details(r *Result, section func(name string, lines []string)) {
	changes := func(cs []Change) []string {
		var out []string
		for _, c := range cs {
			l := fmt.Sprintf("%s: %s → %s", c.What, c.Old, c.New)
			if c.Delta != "" {
				l += " (" + c.Delta + ")"
			}
			out = append(out, l)
		}
		return out
	}
	if len(r.Provenance) > 0 {
		section("provenance", changes(r.Provenance))
	}
	if len(r.Cluster) > 0 {
		section("cluster", changes(r.Cluster))
	}
	if len(r.Train) > 0 {
		section("training", changes(r.Train))
	}
	g := r.Groups
	var gl []string
	if len(g.Added) > 0 {
		gl = append(gl, "added: "+Fold(g.Added))
	}
	if len(g.Removed) > 0 {
		gl = append(gl, "removed: "+Fold(g.Removed))
	}
	for _, s := range g.Split {
		gl = append(gl, fmt.Sprintf("split: %s → %s", s.From[0], Fold(s.To)))
	}
	for _, m := range g.Merged {
		gl = append(gl, fmt.Sprintf("merged: %s → %s", Fold(m.From), m.To[0]))
	}
	if len(gl) > 0 {
		section("groups", gl)
	}
	folded := func(es []FoldedEdit) []string {
		var out []string
		for _, e := range es {
			out = append(out, fmt.Sprintf("%s: %s → %s on %s", e.What, e.Old, e.New, e.Folded))
		}
		return out
	}
	if len(g.Policy) > 0 {
		section("policy", folded(g.Policy))
	}
	if len(g.Layout) > 0 {
		section("layout", folded(g.Layout))
	}
	if len(r.Schedule) > 0 {
		var sl []string
		for _, p := range r.Schedule {
			sl = append(sl, fmt.Sprintf("%s %s of %s: %d → %d per step", p.Phase, p.Kind, p.Folded, p.Old, p.New))
		}
		section("schedule", sl)
	}
	if len(r.Program) > 0 {
		var pl []string
		for _, e := range r.Program {
			l := e.String()
			switch {
			case e.Example.OldOpT != "" && e.Example.NewOpT != "":
				l += fmt.Sprintf("; e.g. op %d %q → op %d %q", e.Example.OldOp, e.Example.OldOpT, e.Example.NewOp, e.Example.NewOpT)
			case e.Example.OldOpT != "":
				l += fmt.Sprintf("; e.g. op %d %q", e.Example.OldOp, e.Example.OldOpT)
			default:
				l += fmt.Sprintf("; e.g. op %d %q", e.Example.NewOp, e.Example.NewOpT)
			}
			pl = append(pl, l)
		}
		section("program, op by op", firstN(pl, 40))
	}
	if len(r.Params) > 0 {
		section("parameters", firstN(changes(r.Params), 40))
	}
	if len(r.Buffers) > 0 {
		section("buffers", firstN(folded(r.Buffers), 40))
	}
	if len(r.Warnings) > 0 {
		var wl []string
		for _, c := range r.Warnings {
			if c.Old != "" {
				wl = append(wl, "no longer: "+c.Old)
			} else {
				wl = append(wl, "new: "+c.New)
			}
		}
		section("warnings", wl)
	}
	if len(r.Other) > 0 {
		section("other fields", firstN(changes(r.Other), 40))
	}
	if len(r.Prediction) > 0 {
		section("prediction", changes(r.Prediction))
	}
	if len(r.Memory) > 0 {
		section("memory live at the peak, by buffer kind", changes(r.Memory))
	}
	if r.Checkpoint != nil {
		section("checkpoint", r.Checkpoint.lines())
	}
	if len(r.Causes) > 0 {
		section("likely causes", r.Causes)
	}
}

// Markdown renders the difference for a pull-request comment: a summary
// table, then the details in a collapsed section.
func Markdown(w io.Writer, r *Result) {
	fmt.Fprintf(w, "### fsdpc plan diff: %s → %s\n\n", safetext.MarkdownCode(r.Old.Name), safetext.MarkdownCode(r.New.Name))
	if r.Identical {
		fmt.Fprintln(w, "No differences.")
		return
	}
	fmt.Fprintln(w, "| | |")
	fmt.Fprintln(w, "|---|---|")
	for _, s := range Summary(r, 4) {
		fmt.Fprintf(w, "| %s | %s |\n", s.Label, mdEscape(s.Text))
	}
	if len(r.Causes) > 0 {
		fmt.Fprintf(w, "| likely causes | %s |\n", mdEscape(strings.Join(firstN(r.Causes, 3), "; ")))
	}
	fmt.Fprintln(w, "\n<details><summary>Details</summary>")
	fmt.Fprintln(w)
	details(r, func(section string, lines []string) {
		fmt.Fprintf(w, "**%s**\n\n", section)
		for _, l := range lines {
			fmt.Fprintf(w, "- %s\n", mdEscape(l))
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintln(w, "</details>")
}

// mdEscape makes a line of the diff literal Markdown: its names and values
// come from plans, and the comment must not gain a heading, link, image,
// mention or table cell from them.
func mdEscape(s string) string { return safetext.Markdown(s) }

// Schema names the JSON form every fsdpc command writes (docs/json.md).
const Schema = "fsdpc/v1"

// Document is diff's JSON form (docs/json.md): the result, with what the
// command adds beside it (each plan's metrics, the gates' outcomes).
type Document struct {
	Schema  string `json:"schema"`
	Command string `json:"command"`
	Old     string `json:"old"`
	New     string `json:"new"`
	*Result
	Metrics any `json:"metrics,omitempty"`
	Gates   any `json:"gates,omitempty"`
}

// JSON renders the documented JSON form; metrics and gates, if not nil,
// go beside the result.
func JSON(w io.Writer, r *Result, metrics, gates any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // gates read step>+5%, not step\u003e+5%
	return enc.Encode(Document{Schema, "diff", r.Old.Name, r.New.Name, r, metrics, gates})
}
