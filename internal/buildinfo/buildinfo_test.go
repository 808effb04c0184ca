package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestFormat: a module version wins; a VCS revision stands in for it,
// marked when the tree was modified; without either the build is (devel).
func TestFormat(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "69f268594a64f2303c330b1f51a138d8598e3214"}}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "(devel)"},
		{"a released module", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}, Settings: rev}, true, "v0.3.0"},
		{"a pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261128150243-69f268594a64+dirty"}}, true, "v0.0.0-20261128150243-69f268594a64+dirty"},
		{"a revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, true, "(devel) 69f268594a64f2303c330b1f51a138d8598e3214"},
		{"a modified tree", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, true, "(devel) 69f268594a64f2303c330b1f51a138d8598e3214+dirty"},
		{"an unmodified tree", &debug.BuildInfo{Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "false"})}, true, "(devel) 69f268594a64f2303c330b1f51a138d8598e3214"},
		{"nothing stamped", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "(devel)"},
	} {
		if got := format(c.bi, c.ok); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestVersionInTests: a test binary records (devel) whatever go test
// stamped, so golden plans do not depend on the checkout.
func TestVersionInTests(t *testing.T) {
	if got := Version(); got != Devel {
		t.Errorf("Version() in a test binary = %q, want %q", got, Devel)
	}
}
