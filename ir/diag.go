package ir

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Severity tells whether a diagnostic stops lowering.
type Severity int

const (
	Error Severity = iota
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Pos is a 1-based line and column in a source file. The zero Pos means
// "somewhere in the file" and prints as the file name alone.
type Pos struct {
	Line, Col int
}

// Diagnostic is one problem found in a model file, by the front end or by
// a later stage (the planner places its errors and warnings at the module,
// parameter or policy entry they are about). Path is the TOML key path of
// the offending value (for example module[2].module[0].kind), so a reader
// can find it even when the position is unknown; it is "" where the
// message names what it is about. The zero Pos places it in the file as a
// whole.
type Diagnostic struct {
	Severity Severity
	File     string
	Pos      Pos
	Path     string
	Msg      string
	// Notes point at other places the problem involves: the checkpoint
	// region a unit sits in, the unit that shares a tied parameter.
	Notes []Note
	// Limit marks an error that a size beyond one of fsdpc's documented
	// limits caused (docs/model-format.md, Limits), not a mistake in the
	// file: a generator such as the HF importer passes it on as the
	// model's size, not as a bug of its own.
	Limit bool
}

// Note is a further place a diagnostic involves, in the same file.
type Note struct {
	Pos Pos
	Msg string
}

// String prints the diagnostic as file:line:col: message, each note on a
// line of its own below it, indented, as file:line:col: note: message.
func (d Diagnostic) String() string {
	var b strings.Builder
	writePlace(&b, d.File, d.Pos)
	if d.Severity == Warning {
		b.WriteString("warning: ")
	}
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Msg)
	for _, n := range d.Notes {
		b.WriteString("\n\t")
		writePlace(&b, d.File, n.Pos)
		b.WriteString("note: ")
		b.WriteString(n.Msg)
	}
	return b.String()
}

func writePlace(b *strings.Builder, file string, pos Pos) {
	b.WriteString(file)
	if pos.Line > 0 {
		fmt.Fprintf(b, ":%d:%d", pos.Line, pos.Col)
	}
	b.WriteString(": ")
}

// same reports whether two diagnostics are the same in every field.
func (d Diagnostic) same(e Diagnostic) bool {
	return d.Severity == e.Severity && d.File == e.File && d.Pos == e.Pos && d.Path == e.Path &&
		d.Msg == e.Msg && d.Limit == e.Limit && slices.Equal(d.Notes, e.Notes)
}

// Diagnostics is the error the front end returns: every problem found, in
// source order. It is never empty when returned as an error.
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// HasErrors reports whether any diagnostic is an error, not a warning.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Sorted returns the diagnostics in source order (see sorted).
func (ds Diagnostics) Sorted() Diagnostics { return ds.sorted() }

// sorted returns the diagnostics ordered by position, then path, then
// message, with exact duplicates removed, so output never depends on the
// order in which checks ran.
func (ds Diagnostics) sorted() Diagnostics {
	out := append(Diagnostics(nil), ds...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Msg < b.Msg
	})
	j := 0
	for i, d := range out {
		if i > 0 && d.same(out[j-1]) {
			continue
		}
		out[j] = d
		j++
	}
	return out[:j]
}

// Collapse orders diagnostics for a reader: by position, exact duplicates
// removed, one problem per place (the instances of a repeated declaration,
// layers.0.attn and layers.1.attn, make one problem, not one per
// instance), at most maxDiagnostics with a last line counting the rest.
func (ds Diagnostics) Collapse() Diagnostics { return ds.collapse(0) }

// collapse is Collapse for a list that left dropped problems out when it
// filled up.
func (ds Diagnostics) collapse(dropped int) Diagnostics {
	all := ds.sorted()
	var out Diagnostics
	seen := map[string]bool{}
	for _, x := range all {
		key := x.key()
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, x)
	}
	if len(out) > maxDiagnostics {
		more := fmt.Sprintf("%d more problems not shown", len(out)-maxDiagnostics)
		if dropped > 0 {
			more = "at least " + more
		}
		out = append(out[:maxDiagnostics], Diagnostic{Severity: Error, File: out[0].File, Msg: more})
	}
	return out
}

// Warnings returns only the warnings.
func (ds Diagnostics) Warnings() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == Warning {
			out = append(out, d)
		}
	}
	return out
}

// maxDiagnostics bounds how many problems one file reports: a 10 MB file of
// junk must not produce a 10 MB error.
const maxDiagnostics = 50

// suggest returns the candidate closest to s, or "" when none is close
// enough to be a plausible typo. Case is ignored; a swap of two letters
// counts as one edit, and a candidate that s begins is preferred over
// others as close: "bfloat" suggests "bfloat16", not "float".
func suggest(s string, candidates []string) string {
	ls := strings.ToLower(s)
	// Scores are twice the edit distance, one for a prefix. Two candidates
	// equally close make no suggestion: "h100" could be either H100.
	best, bestScore, tie := "", 2*max(2, len(s)/3+1), false
	for _, c := range candidates {
		lc := strings.ToLower(c)
		score := 2 * editDistance(ls, lc)
		if score > 0 && len(ls) >= 3 && strings.HasPrefix(lc, ls) {
			score = 1
		}
		switch {
		case score < bestScore:
			best, bestScore, tie = c, score, false
		case score == bestScore && best != "" && c != best:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1) // two letters swapped
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// ExceedsLimits reports whether err is a model's diagnostics and every
// error among them is a documented limit.
func ExceedsLimits(err error) bool {
	var ds Diagnostics
	if !errors.As(err, &ds) {
		return false
	}
	found := false
	for _, d := range ds {
		if d.Severity == Error {
			if !d.Limit {
				return false
			}
			found = true
		}
	}
	return found
}
