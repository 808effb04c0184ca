// Package docs holds fsdpc's documentation; its test keeps the documents
// honest about the repository: every relative link and every file or
// directory a document names in code spans must exist.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// documents are the Markdown files under test, relative to the repository
// root.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, docs...)
}

var (
	// [text](target) and ![alt](target), not inside code spans.
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	// A code span holding a path: `dir/file.go`, `plans/*.toml`, `ir/`.
	pathSpanRE = regexp.MustCompile("`([A-Za-z0-9_.*-]+/[A-Za-z0-9_./*-]*)`")
	headingRE  = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	fenceRE    = regexp.MustCompile("(?ms)^```.*?^```")
)

// TestRelativeLinksExist: every relative link of README.md and docs/*.md
// names a file that exists, and an #anchor into a Markdown file names one
// of its headings.
func TestRelativeLinksExist(t *testing.T) {
	checked, anchors := 0, 0
	for _, doc := range documents(t) {
		text := fenceRE.ReplaceAllString(readFile(t, doc), "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %v", doc, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") {
				anchors++
				if !hasAnchor(readFile(t, path), anchor) {
					t.Errorf("%s: link %q: %s has no heading with anchor #%s", doc, target, path, anchor)
				}
			}
		}
	}
	// As TestNamedPathsExist: a pattern that stopped matching would check
	// nothing and pass.
	t.Logf("%d relative links, %d of them with an anchor", checked, anchors)
	if checked < 20 || anchors == 0 {
		t.Fatalf("only %d relative links (%d anchors) checked: the pattern no longer finds the documents' links", checked, anchors)
	}
}

// TestNamedPathsExist: a code span whose first segment is a top-level
// entry of the repository (`planner/layout.go`, `plans/*.toml`,
// `.ci/run`) names something that exists; a glob must match. Paths that
// start elsewhere (`testdata/…` inside a package, `torch/…`, `../shared`)
// are not the repository's and are left alone.
func TestNamedPathsExist(t *testing.T) {
	top := map[string]bool{}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		top[e.Name()] = true
	}
	checked := 0
	for _, doc := range documents(t) {
		for _, m := range pathSpanRE.FindAllStringSubmatch(readFile(t, doc), -1) {
			p := strings.TrimSuffix(m[1], "/")
			first, _, _ := strings.Cut(p, "/")
			if !top[first] || first == "go.mod" {
				continue
			}
			// `cuda/devices.Sampler` names a Go identifier in a package.
			if dir, ident, ok := strings.Cut(p[strings.LastIndexByte(p, '/')+1:], "."); ok && ident != "" && ident[0] >= 'A' && ident[0] <= 'Z' {
				p = p[:strings.LastIndexByte(p, '/')+1] + dir
			}
			matches, err := filepath.Glob(filepath.Join("..", p))
			if err != nil || len(matches) == 0 {
				t.Errorf("%s: names `%s`, which does not exist in the repository", doc, m[1])
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("only %d paths checked: the pattern no longer finds the documents' paths", checked)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hasAnchor reports whether a Markdown text has a heading whose GitHub
// anchor is anchor: lower case, spaces to hyphens, punctuation dropped.
func hasAnchor(text, anchor string) bool {
	for _, m := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
		if slug(m[1]) == anchor {
			return true
		}
	}
	return false
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
