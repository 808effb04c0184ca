package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputsNeverClobber: -o never replaces the input it read, a symlink
// or a non-regular file, and exits 1 saying why.
func TestOutputsNeverClobber(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.toml")
	src, err := os.ReadFile("../../plans/gpt2-124m.toml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(model, src, 0o644)
	other := filepath.Join(dir, "other.bin")
	os.WriteFile(other, []byte("keep"), 0o644)
	link := filepath.Join(dir, "link.bin")
	os.Symlink(other, link)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"plan over its input", []string{"plan", "-o", model, model}, "is the input"},
		{"plan over a symlink", []string{"plan", "-o", link, model}, "symbolic link"},
		{"plan over /dev/null", []string{"plan", "-o", "/dev/null", model}, "not a regular file"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", c.name, code, stderr.String(), c.want)
		}
	}
	if b, _ := os.ReadFile(model); !bytes.Equal(b, src) {
		t.Error("the model file was overwritten")
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced")
	}
	if b, _ := os.ReadFile(other); string(b) != "keep" {
		t.Error("the symlink's target was overwritten")
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode().IsRegular() {
		t.Error("/dev/null is no longer a device")
	}
}
