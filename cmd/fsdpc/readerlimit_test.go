package main

import (
	"runtime/debug"
	"testing"
)

// TestReaderMemoryLimit: the readers of plans run under readerMemoryLimit
// and restore the limit they found; other commands, a user's GOMEMLIMIT and
// a lower limit already set are left alone.
func TestReaderMemoryLimit(t *testing.T) {
	const none = int64(1<<63 - 1) // the runtime's default: no limit
	for _, c := range []struct {
		command string
		env     string // GOMEMLIMIT
		before  int64
		want    int64
	}{
		{"show", "", none, readerMemoryLimit},
		{"sim", "", none, readerMemoryLimit},
		{"diff", "", none, readerMemoryLimit},
		{"report", "", none, readerMemoryLimit},
		{"textconv", "", none, readerMemoryLimit},
		{"verify", "", none, readerMemoryLimit},
		{"export", "", none, readerMemoryLimit},
		{"plan", "", none, none},
		{"show", "2GiB", none, none},
		{"show", "", 512 << 20, 512 << 20},
	} {
		t.Run(c.command+"/"+c.env, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", c.env)
			old := debug.SetMemoryLimit(c.before)
			defer debug.SetMemoryLimit(old)
			restore := limitReaderMemory(c.command)
			if got := debug.SetMemoryLimit(-1); got != c.want {
				t.Errorf("limit %d during %s, want %d", got, c.command, c.want)
			}
			restore()
			if got := debug.SetMemoryLimit(-1); got != c.before {
				t.Errorf("limit %d after %s, want %d restored", got, c.command, c.before)
			}
		})
	}
}
