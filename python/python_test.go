package python_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/python"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// TestPythonPackage runs python/tests (unittest) against the package
// under the torch of .ci/install-torch (or FSDPC_PYTHON): the importer
// and the apply library are product code, tested in CI like the Go. Like
// the conformance suite it runs under FSDPC_TORCH_CONFORMANCE=1, as
// .ci/run sets it, and then a missing torch fails it.
func TestPythonPackage(t *testing.T) {
	if os.Getenv("FSDPC_TORCH_CONFORMANCE") != "1" {
		t.Skip("set FSDPC_TORCH_CONFORMANCE=1 to run the Python tests under torch")
	}
	py, err := torchgen.FindPython(os.Getenv("FSDPC_PYTHON"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := py.RunScript(torchgen.Script{
		Setup: func(dir string) error {
			if err := python.WriteTo(dir); err != nil {
				return err
			}
			if err := copyTree("tests", filepath.Join(dir, "tests")); err != nil {
				return err
			}
			return writeFixtures(filepath.Join(dir, "tests", "fixtures"))
		},
		Args:    []string{"-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v"},
		Timeout: 20 * time.Minute,
		Stderr:  testWriter{t},
	})
	if err != nil {
		t.Fatalf("python tests: %v\n%s", err, out)
	}
}

// TestEmbeddedFilesAreTheTree checks that every .py file of python/fsdpc
// is embedded, so an installed fsdpc never runs an older or partial
// package than the checkout's.
func TestEmbeddedFilesAreTheTree(t *testing.T) {
	dir := t.TempDir()
	if err := python.WriteTo(dir); err != nil {
		t.Fatal(err)
	}
	var missing []string
	err := filepath.WalkDir("fsdpc", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".py") {
			return err
		}
		want, _ := os.ReadFile(path)
		got, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil || string(got) != string(want) {
			missing = append(missing, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("not embedded (add their directory to embed.go's pattern): %v", missing)
	}
}

// TestTyped runs mypy (strict, pyproject.toml's settings) over the
// package where mypy is installed; .ci/run installs it.
func TestTyped(t *testing.T) {
	mypy, err := exec.LookPath("mypy")
	if err != nil {
		if os.Getenv("FSDPC_TORCH_CONFORMANCE") == "1" {
			t.Fatal("mypy not found: .ci/run installs Debian's mypy")
		}
		t.Skip("mypy not installed")
	}
	if testing.Short() {
		t.Skip("-short: mypy takes seconds")
	}
	cmd := exec.Command(mypy, "--config-file", "../pyproject.toml", "fsdpc")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mypy: %v\n%s", err, out)
	}
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestPreflightReadsThisFormat: load_plan and the start-up check (which
// takes plan.py's PLAN_FORMATS) accept the exports this fsdpc writes,
// whose plan_format is schedule.FormatVersion; a new plan format must be
// added to PLAN_FORMATS deliberately.
func TestPreflightReadsThisFormat(t *testing.T) {
	src, err := os.ReadFile("fsdpc/plan.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PLAN_FORMATS = \(([0-9, ]+)\)`).FindSubmatch(src)
	if m == nil {
		t.Fatal("plan.py sets no PLAN_FORMATS tuple")
	}
	for _, f := range strings.Split(string(m[1]), ",") {
		if strings.TrimSpace(f) == strconv.Itoa(schedule.FormatVersion) {
			return
		}
	}
	t.Errorf("plan.py's PLAN_FORMATS (%s) lacks plan format %d, which fsdpc writes", m[1], schedule.FormatVersion)
}
