package driverinit

import (
	"os"
	"testing"
)

// TestSetConnections: fsdpc-cuda asks for the most queues unless the
// environment already says how many.
func TestSetConnections(t *testing.T) {
	for _, c := range []struct {
		env  string
		set  bool
		want string
	}{
		{"", false, maxConnections},
		{"4", true, "4"},
		{"1", true, "1"},
	} {
		if c.set {
			t.Setenv(connectionsVar, c.env)
		} else {
			t.Setenv(connectionsVar, "") // restored after the test
			os.Unsetenv(connectionsVar)
		}
		if got := setConnections(); got != c.want || os.Getenv(connectionsVar) != c.want {
			t.Errorf("with %s=%q (set %v): setConnections() = %q, environment %q, want %q", connectionsVar, c.env, c.set, got, os.Getenv(connectionsVar), c.want)
		}
	}
}
