package driverinit

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const (
	self = "github.com/fsdpc/fsdpc/cuda/driverinit"
	cu   = "gorgonia.org/cu"
)

// goList runs go list under the cuda tag with cgo on, as the worker is
// built; it needs no CUDA headers, since nothing is compiled.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-tags", "cuda"}, args...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Fields(string(out))
}

// This package's init runs before cu's only while the conditions of the
// package doc hold: it sorts before cu, cu depends on everything it
// imports, and it is linked wherever cu is.
func TestInitOrder(t *testing.T) {
	if !(self < cu) {
		t.Fatalf("%s does not sort before %s: cu's init would run first", self, cu)
	}
	cuDeps := goList(t, "-deps", cu)
	for _, d := range goList(t, "-deps", self) {
		if d != self && !slices.Contains(cuDeps, d) {
			t.Errorf("%s depends on %s, which %s does not: %s could be initialized after cu, and then so would this package; import only what cu imports", self, d, cu, d)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(strings.Join(goList(t, "-f", "{{.ImportPath}}:{{join .Deps \",\"}}", "github.com/fsdpc/fsdpc/..."), "\n")), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		ds := strings.Split(deps, ",")
		if pkg != self && slices.Contains(ds, cu) && !slices.Contains(ds, self) {
			t.Errorf("%s links %s without %s: import it where cu is imported", pkg, cu, self)
		}
	}
}
