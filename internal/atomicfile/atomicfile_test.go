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

// TestCheckAndSame: output names Write cannot use fail up front, with a
// message that says why; Same sees one file through another name.
func TestCheckAndSame(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"", "empty"},
		{filepath.Join(dir, strings.Repeat("a", 250)), "bytes long; the limit is 240"},
		{dir + "/", "names a directory"},
		{dir, "is a directory"},
		{filepath.Join(dir, "no", "x"), "its directory"},
		{filepath.Join(file, "x"), "is not a directory"},
		{filepath.Join(dir, "x\n\x1b[2J"), ""},
	} {
		err := Check(tc.path)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%q) = %v, want %q", tc.path, err, tc.want)
		}
	}
	if err := Check(filepath.Join(dir, strings.Repeat("a", 240))); err != nil {
		t.Errorf("a 240-byte name: %v", err)
	}
	link := filepath.Join(dir, "hard")
	if err := os.Link(file, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{file, link, true},
		{file, dir + "/./f", true},
		{filepath.Join(dir, "new"), filepath.Join(dir, "sub", "..", "new"), true},
		{filepath.Join(dir, "new"), filepath.Join(dir, "new2"), false},
		{file, filepath.Join(dir, "new"), false},
	} {
		if got := Same(tc.a, tc.b); got != tc.same {
			t.Errorf("Same(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
	if err := CheckDir(file); err == nil {
		t.Error("CheckDir accepts a file")
	}
	if err := CheckDir(filepath.Join(dir, "new", "deeper")); err != nil {
		t.Errorf("CheckDir of a directory to create: %v", err)
	}
	if err := CheckDir(dir); err != nil {
		t.Errorf("CheckDir of a directory: %v", err)
	}
}
