package ir

import (
	"errors"
	"fmt"
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

// Diagnostic is one problem found in a model file. Path is the TOML key
// path of the offending value (for example module[2].module[0].kind), so a
// reader can find it even when the position is unknown.
type Diagnostic struct {
	Severity Severity
	File     string
	Pos      Pos
	Path     string
	Msg      string
	// Limit marks an error that a size beyond one of fsdpc's documented
	// limits caused (docs/model-format.md, Limits), not a mistake in the
	// file: a generator such as the HF importer passes it on as the
	// model's size, not as a bug of its own.
	Limit bool
}

func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Pos.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", d.Pos.Line, d.Pos.Col)
	}
	b.WriteString(": ")
	if d.Severity == Warning {
		b.WriteString("warning: ")
	}
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Msg)
	return b.String()
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
		if i > 0 && d == out[j-1] {
			continue
		}
		out[j] = d
		j++
	}
	return out[:j]
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
