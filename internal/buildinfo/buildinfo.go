// Package buildinfo names the build of fsdpc that is running: what
// `fsdpc --version` prints and what every plan records as the fsdpc that
// made it (schedule.Header.FsdpcVersion), so a plan names its build. It is
// its own package because both the planner and the CLI read it and it
// belongs to neither stage.
package buildinfo

import (
	"runtime/debug"
	"sync"
	"testing"
)

// Devel is the version of a build that carries neither a module version
// nor a VCS revision, and of every test binary.
const Devel = "(devel)"

// Version is the running build's version: the module version when the
// build has one ("v0.3.0" from `go install …@v0.3.0`, or the pseudo-version
// Go 1.24 and later stamp from the checkout, "v0.0.0-20261128150243-
// 69f268594a64+dirty"); else "(devel) " and the VCS revision that `go
// build` stamped, with "+dirty" for a modified tree; else "(devel)".
//
// A test binary is always "(devel)": `go test` stamps no VCS revision by
// default, but -buildvcs=true would, and the plans tests write and compare
// with golden files (plans/*.plan.txt, planner/testdata/plan-hashes.txt)
// must not depend on the checkout they run in.
func Version() string {
	once.Do(func() {
		if testing.Testing() {
			version = Devel
			return
		}
		bi, ok := debug.ReadBuildInfo()
		version = format(bi, ok)
	})
	return version
}

var (
	once    sync.Once
	version string
)

// format is Version for the build information bi (ok false: none).
func format(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return Devel
	}
	if v := bi.Main.Version; v != "" && v != Devel {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return Devel
	}
	return Devel + " " + rev + dirty
}
