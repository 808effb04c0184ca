package main

import (
	"io"
	"os"
	"sync"
)

// checkedWriter passes writes through to w and keeps the first error, so a
// command's output errors (a full disk, a closed file) are checked in one
// place, run, instead of after every Fprintf: the commands write freely,
// and run turns a latched error into a non-zero exit. After the first
// error it writes nothing more and returns that error, so a command that
// ignores it does no further work on output that cannot land.
type checkedWriter struct {
	w   io.Writer
	mu  sync.Mutex // the launcher's and the executor's goroutines write too
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	c.err = err
	return n, err
}

// flush flushes w if it holds bytes back (safetext.Writer keeps a UTF-8
// sequence a write cut short).
func (c *checkedWriter) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.w.(interface{ Flush() error }); ok && c.err == nil {
		c.err = f.Flush()
	}
}

// Err is the first write error, or nil.
func (c *checkedWriter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// isTerminal reports whether w (through a checkedWriter) is a terminal.
func isTerminal(w io.Writer) bool {
	if c, ok := w.(*checkedWriter); ok {
		w = c.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
