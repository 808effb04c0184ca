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

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if !matchSeg(pat[0], name[0]) {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
