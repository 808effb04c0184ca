package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// blockedPrefix starts the line a blocked write prints (main_entry_test.go).
const blockedPrefix = "atomicfile test hook: blocked before renaming "

// TestSignalRemovesTempFiles: fsdpc interrupted (SIGINT) or terminated
// (SIGTERM) in the middle of writing an output removes its temporary file,
// leaves the old output as it was and exits 130 or 143. The write is
// stopped deterministically before its rename by a test hook, and the
// signal sent once the hook says where the temporary file is.
func TestSignalRemovesTempFiles(t *testing.T) {
	for _, c := range []struct {
		name string
		args func(out string) []string
	}{
		{"plan", func(out string) []string { return []string{"plan", "-o", out, "gpt2-124m"} }},
		{"report", func(out string) []string { return []string{"report", "-o", out, "gpt2-124m"} }},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(c.name+" "+sig.String(), func(t *testing.T) {
				dir := t.TempDir()
				out := filepath.Join(dir, "out")
				if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(os.Args[0], c.args(out)...)
				cmd.Env = append(os.Environ(), "FSDPC_TEST_MAIN=1", "FSDPC_TEST_BLOCK_BEFORE_RENAME=1")
				stderr, err := cmd.StderrPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// A hang guard only: nothing here waits on a clock.
				guard := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
				defer guard.Stop()
				var tmp string
				var said []string
				for sc := bufio.NewScanner(stderr); sc.Scan(); {
					if rest, ok := strings.CutPrefix(sc.Text(), blockedPrefix); ok {
						tmp = rest
						break
					}
					said = append(said, sc.Text())
				}
				if tmp == "" {
					cmd.Wait()
					t.Fatalf("the write never reached its rename; stderr:\n%s", strings.Join(said, "\n"))
				}
				if _, err := os.Stat(tmp); err != nil {
					t.Fatalf("the temporary file is not there mid-write: %v", err)
				}
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				cmd.Wait()
				if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) {
					t.Errorf("%s: %s, want exit %d", sig, cmd.ProcessState, 128+int(sig))
				}
				if _, err := os.Stat(tmp); !os.IsNotExist(err) {
					t.Errorf("the temporary file %s is left behind (%v)", tmp, err)
				}
				if b, _ := os.ReadFile(out); string(b) != "old" {
					t.Errorf("the output changed to %d bytes", len(b))
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 1 {
					t.Errorf("the directory holds %d entries, want the output only", len(entries))
				}
			})
		}
	}
}
