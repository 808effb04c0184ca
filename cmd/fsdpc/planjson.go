package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// writePlanJSON writes the document {"schema", "command", "plan"} byte
// for byte as writeJSON would, but streams the plan's operations and
// buffers (millions of each in the largest plans the planner writes) one
// at a time instead of building the whole encoding in memory: the rest of
// the document is encoded with those lists empty and the lists are
// written in their place.
func writePlanJSON(w io.Writer, command string, p *schedule.Plan, compute *computeJSON) error {
	q := *p
	q.Ops, q.Buffers = nil, nil
	var head bytes.Buffer
	doc := struct {
		Schema  string         `json:"schema"`
		Command string         `json:"command"`
		Compute *computeJSON   `json:"compute,omitempty"`
		Plan    *schedule.Plan `json:"plan"`
	}{diff.Schema, command, compute, &q}
	if err := writeJSON(&head, doc); err != nil {
		return err
	}
	// The plan's fields sit at depth 2: a newline and four spaces before
	// each. A newline cannot occur inside a JSON string, so each marker
	// is found once, where the field is.
	rest := head.Bytes()
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"buffers", func(w io.Writer) error { return streamList(w, p.Buffers) }},
		{"ops", func(w io.Writer) error { return streamOps(w, p) }},
	} {
		marker := []byte("\n    \"" + f.name + "\": []")
		i := bytes.Index(rest, marker)
		if i < 0 || bytes.Contains(rest[i+len(marker):], marker) {
			return fmt.Errorf("internal error: the plan's JSON has no single %q field", f.name)
		}
		if _, err := w.Write(rest[:i+len(marker)-2]); err != nil {
			return err
		}
		if err := f.write(w); err != nil {
			return err
		}
		rest = rest[i+len(marker):]
	}
	_, err := w.Write(rest)
	return err
}

// streamList writes a list of a plan's field as writeJSON indents it at
// depth 2: "[]" when empty, else one element a line group.
func streamList[T any](w io.Writer, xs []T) error {
	if len(xs) == 0 {
		_, err := io.WriteString(w, "[]")
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("      ", "  ")
	enc.SetEscapeHTML(false)
	if _, err := io.WriteString(w, "[\n      "); err != nil {
		return err
	}
	for i := range xs {
		buf.Reset()
		if i > 0 {
			buf.WriteString(",\n      ")
		}
		if err := enc.Encode(xs[i]); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\n    ]")
	return err
}

// streamOps is streamList for the plan's operations, each written by
// appendOpJSON.
func streamOps(w io.Writer, p *schedule.Plan) error {
	ops := p.Ops
	if len(ops) == 0 {
		_, err := io.WriteString(w, "[]")
		return err
	}
	b := []byte("[\n      ")
	for i := range ops {
		if i > 0 {
			b = append(b, ",\n      "...)
		}
		var err error
		if b, err = appendOpJSON(b, p, &ops[i]); err != nil {
			return err
		}
		if len(b) >= 64<<10 || i == len(ops)-1 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := io.WriteString(w, "\n    ]")
	return err
}
