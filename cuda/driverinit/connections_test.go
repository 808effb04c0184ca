package driverinit

import (
	"os"
	"testing"
)

func TestSetConnections(t *testing.T) {
	for _, c := range []struct {
		env  string
		set  bool
		want string
	}{
		{"", false, Connections},
		{"4", true, "4"},
		{"1", true, "1"},
	} {
		if c.set {
			t.Setenv(ConnectionsVar, c.env)
		} else {
			t.Setenv(ConnectionsVar, "") // restored after the test
			os.Unsetenv(ConnectionsVar)
		}
		if got := setConnections(); got != c.want || os.Getenv(ConnectionsVar) != c.want {
			t.Errorf("with %s=%q (set %v): setConnections() = %q, environment %q, want %q", ConnectionsVar, c.env, c.set, got, os.Getenv(ConnectionsVar), c.want)
		}
	}
}
