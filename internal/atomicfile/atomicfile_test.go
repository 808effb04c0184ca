package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{dir, "is a directory"},
		{link, "symbolic link"},
		{fifo, "not a regular file"},
		{"/dev/null", "not a regular file"},
	} {
		err := Write(c.path, []byte("new"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write(%s) = %v, want an error containing %q", c.path, err, c.want)
		}
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", st, err)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", st, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target changed to %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestWriteReplacesRegular(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	for _, data := range []string{"one", "two"} {
		if err := Write(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != data {
			t.Errorf("read %q, want %q", b, data)
		}
	}
}

func TestNotAnInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "model.toml")
	os.WriteFile(in, []byte("x"), 0o644)
	if err := NotAnInput(filepath.Join(dir, ".", "model.toml"), in); err == nil {
		t.Error("the input as output was accepted")
	}
	if err := NotAnInput(filepath.Join(dir, "plan.bin"), in); err != nil {
		t.Errorf("a new output was refused: %v", err)
	}
}

// TestWritesReleaseSignals: once no Write is in progress, nothing is
// registered for the signal cleanup and no signal is caught, whether the
// writes succeeded or failed.
func TestWritesReleaseSignals(t *testing.T) {
	dir := t.TempDir()
	Write(filepath.Join(dir, "ok"), []byte("x"))
	Write(filepath.Join(dir, "missing", "dir", "out"), []byte("x"))
	Write(filepath.Join("/proc", "fsdpc-not-writable"), []byte("x"))
	temps.Lock()
	defer temps.Unlock()
	if temps.active != 0 || len(temps.names) != 0 {
		t.Errorf("after the writes: %d active, registered %v", temps.active, temps.names)
	}
}
