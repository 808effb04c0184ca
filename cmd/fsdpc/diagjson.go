package main

import (
	"slices"

	"github.com/fsdpc/fsdpc/ir"
)

// diagDoc is one diagnostic in JSON (docs/json.md, Diagnostics): the
// front end's and the planner's warnings, placed in the model file.
type diagDoc struct {
	Severity string `json:"severity"`
	File     string `json:"file"`
	// Line and Column are 1-based; null when the diagnostic is about the
	// file as a whole.
	Line   *int `json:"line"`
	Column *int `json:"column"`
	// Path is the TOML key path the front end names, null where the
	// message names what it is about.
	Path    *string   `json:"path"`
	Message string    `json:"message"`
	Notes   []noteDoc `json:"notes"`
}

// noteDoc is a further place a diagnostic involves, in the same file.
type noteDoc struct {
	Line    *int   `json:"line"`
	Column  *int   `json:"column"`
	Message string `json:"message"`
}

// newDiagDocs lists diagnostics for JSON: [] for none.
func newDiagDocs(lists ...ir.Diagnostics) []diagDoc {
	out := []diagDoc{}
	for _, ds := range lists {
		for _, d := range ds {
			x := diagDoc{Severity: d.Severity.String(), File: d.File, Message: d.Msg, Notes: []noteDoc{}}
			x.Line, x.Column = placeDoc(d.Pos)
			if d.Path != "" {
				x.Path = &d.Path
			}
			for _, n := range d.Notes {
				nd := noteDoc{Message: n.Msg}
				nd.Line, nd.Column = placeDoc(n.Pos)
				x.Notes = append(x.Notes, nd)
			}
			out = append(out, x)
		}
	}
	return out
}

func placeDoc(p ir.Pos) (line, col *int) {
	if p.Line <= 0 {
		return nil, nil
	}
	return &p.Line, &p.Col
}

// plannerOnly drops from the planner's warnings those the model's already
// give (the planner carries the front end's checkpointing warning into the
// plan), so none is printed twice.
func plannerOnly(model, planned ir.Diagnostics) ir.Diagnostics {
	var out ir.Diagnostics
	for _, w := range planned {
		if !slices.ContainsFunc(model, func(x ir.Diagnostic) bool { return x.Pos == w.Pos && x.Msg == w.Msg }) {
			out = append(out, w)
		}
	}
	return out
}
