package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r.html")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", "gpt2-124m", "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.HasSuffix(bytes.TrimSpace(b), []byte("</html>")) {
		t.Fatalf("no complete page at %s: %v", out, err)
	}
	stdout.Reset()
	if code := run([]string{"report", "-o", out, "gpt2-124m", "llama3-8b"}, &stdout, &stderr); code != 0 {
		t.Fatalf("two plans: exit %d: %s", code, stderr.String())
	}
	// A bad second argument leaves the earlier report whole.
	before, _ := os.ReadFile(out)
	stderr.Reset()
	if code := run([]string{"report", "gpt2-124m", "no-such-model", "-o", out}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "no-such-model") {
		t.Errorf("a missing model: exit %d, %q", code, stderr.String())
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
		t.Error("a failed report changed the file")
	}
	for _, args := range [][]string{{"report"}, {"report", "a", "b", "c"}} {
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code := run([]string{"report", "-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	if code := run([]string{"report", "gpt2-124m", "-o", filepath.Join(dir, "missing", "r.html")}, &stdout, &stderr); code == 0 {
		t.Error("an unwritable path: exit 0")
	}
}
