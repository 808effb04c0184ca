package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// promiseRE matches prose that promises code rather than describing it:
// executor's doc said "a CUDA backend is to implement it next" and
// launch's "cmd/fsdpc-cuda, still to be built" long after both existed.
var promiseRE = regexp.MustCompile(`(?i)\b(still to (be built|come|be written)|is to implement|to be built|not yet (built|written|implemented)|is to use it)\b`)

// TestPackageDocs: every package's doc comment names only paths that exist
// in the repository and states no work as still to come, so the package
// docs describe the code as it is.
func TestPackageDocs(t *testing.T) {
	top := map[string]bool{}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			top[e.Name()] = true
		}
	}
	pathRE := regexp.MustCompile(`\b([a-z][a-z0-9_-]*(?:/[A-Za-z0-9_.-]*[A-Za-z0-9_])+)`)
	docs, paths := 0, 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil || f.Doc == nil {
			return err
		}
		docs++
		text := f.Doc.Text()
		if m := promiseRE.FindString(text); m != "" {
			t.Errorf("%s: the package doc says %q: describe the code as it is", path, m)
		}
		for _, m := range pathRE.FindAllStringSubmatch(text, -1) {
			p := strings.TrimRight(m[1], ".")
			first, _, _ := strings.Cut(p, "/")
			if !top[first] {
				continue
			}
			paths++
			if _, err := os.Stat(filepath.Join("..", p)); err != nil {
				// "cuda/devices.Sampler": a path then a Go identifier.
				dir := p[:strings.LastIndexByte(p, '/')]
				if _, err2 := os.Stat(filepath.Join("..", dir)); err2 != nil || !strings.Contains(p[len(dir):], ".") {
					t.Errorf("%s: the package doc names %s, which does not exist", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if docs < 20 || paths < 5 {
		t.Fatalf("only %d package docs, %d paths checked: the walk no longer finds them", docs, paths)
	}
}
