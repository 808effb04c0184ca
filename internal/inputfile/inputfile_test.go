package inputfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "model.toml")
	os.WriteFile(regular, []byte("0123456789"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(regular, link)
	for _, c := range []struct {
		path, want string
	}{
		// No writer ever opens the FIFO: a blocking open would hang here.
		{fifo, "is a named pipe (FIFO), not a model file: fsdpc reads only regular files"},
		{dir, "is a directory, not a model file"},
		{"/dev/zero", "is a character device, not a model file"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		if f, err := Open(c.path, "a model file"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s) = %v, %v; want an error containing %q", c.path, f, err, c.want)
		}
		if _, err := ReadFile(c.path, "a model file", 100); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadFile(%s) = %v; want an error containing %q", c.path, err, c.want)
		}
	}
	for _, c := range []struct {
		path  string
		limit int64
		want  string
	}{
		{regular, 100, "0123456789"},
		{link, 100, "0123456789"}, // a symlink to a regular file reads it
		{regular, 4, "01234"},     // limit+1 bytes: enough to know it is too large
	} {
		b, err := ReadFile(c.path, "a model file", c.limit)
		if err != nil || string(b) != c.want {
			t.Errorf("ReadFile(%s, %d) = %q, %v; want %q", c.path, c.limit, b, err, c.want)
		}
	}
}
