package ir

import (
	"fmt"
	"path"
	"strings"
)

// Glob matches dotted module names segment by segment: "*" matches within
// one segment ("layers.*" matches "layers.3" but not "layers.3.attention"),
// "**" matches any number of segments, and "?" and "[a-z]" work as in
// path.Match. The empty glob matches only the root module, whose name is "".
type Glob struct {
	src  string
	segs []string
}

// CompileGlob checks a pattern's syntax.
func CompileGlob(s string) (Glob, error) {
	g := Glob{src: s}
	if s == "" {
		return g, nil
	}
	g.segs = strings.Split(s, ".")
	for _, seg := range g.segs {
		if seg == "" {
			return Glob{}, fmt.Errorf("pattern %q has an empty segment", s)
		}
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return Glob{}, fmt.Errorf("pattern %q has a malformed segment %q (check its [ ] and \\)", s, seg)
		}
	}
	return g, nil
}

func (g Glob) String() string { return g.src }

// globMeta are the characters path.Match gives a meaning: a segment
// without any of them matches only itself.
const globMeta = "*?[\\"

// Literal reports whether the glob matches exactly one name, and which:
// no wildcards, classes or escapes in any segment.
func (g Glob) Literal() (string, bool) {
	if strings.ContainsAny(g.src, globMeta) {
		return "", false
	}
	return g.src, true
}

// Match reports whether the dotted module name matches.
func (g Glob) Match(name string) bool {
	if g.src == "" || name == "" {
		return g.src == "" && name == ""
	}
	for _, seg := range g.segs {
		if seg == "**" {
			return matchSegs(g.segs, strings.Split(name, "."))
		}
	}
	// Without "**" segment i matches name segment i: walk the name in
	// place, since the tuner matches every module against every pattern
	// of every candidate (splitting each name cost it a sixth of its time).
	rest := name
	for i, seg := range g.segs {
		part := rest
		if j := strings.IndexByte(rest, '.'); j >= 0 {
			if i == len(g.segs)-1 {
				return false // the name has more segments
			}
			part, rest = rest[:j], rest[j+1:]
		} else if i != len(g.segs)-1 {
			return false // the name has fewer segments
		}
		if !matchSeg(seg, part) {
			return false
		}
	}
	return true
}

// matchSeg matches one segment, comparing literal ones directly.
func matchSeg(seg, part string) bool {
	if !strings.ContainsAny(seg, globMeta) {
		return seg == part
	}
	ok, _ := path.Match(seg, part)
	return ok
}

// matchSegs matches a pattern with "**" segments against a name's
// segments by simulating the pattern as an automaton: the set of pattern
// positions reached after each name segment, where "**" stays put on a
// segment and is also skipped for free. Each name segment is compared
// with each pattern segment at most once, so a match costs
// O(len(pat)·len(name)) segment comparisons; the backtracking it replaces
// was exponential in the number of "**" (six of them in a 14 KB model's
// units took 17.8 s to plan).
func matchSegs(pat, name []string) bool {
	cur := make([]bool, len(pat)+1)
	next := make([]bool, len(pat)+1)
	cur[0] = true
	skipStars(pat, cur)
	for _, part := range name {
		clear(next)
		any := false
		for i, on := range cur[:len(pat)] {
			if !on {
				continue
			}
			if pat[i] == "**" {
				next[i], any = true, true
			} else if countSeg(); matchSeg(pat[i], part) {
				next[i+1], any = true, true
			}
		}
		if !any {
			return false
		}
		skipStars(pat, next)
		cur, next = next, cur
	}
	return cur[len(pat)]
}

// skipStars adds, to a set of pattern positions, the positions past each
// "**" reached: "**" matches zero segments too.
func skipStars(pat []string, on []bool) {
	for i, seg := range pat {
		if on[i] && seg == "**" {
			on[i+1] = true
		}
	}
}

// segSteps counts segment comparisons in matchSegs when set (tests only:
// the fuzzer bounds a match's steps).
var segSteps *int

func countSeg() {
	if segSteps != nil {
		*segSteps++
	}
}
