package torchgen

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRanksDieWithFsdpc kills the launching process outright (SIGKILL,
// which it cannot catch) while its ranks run, and requires every rank to
// be gone soon after: the ranks must not sit in their collectives until
// the rendezvous times out. The ranks are a stand-in python3 that records
// its pid and sleeps; the launcher is this test binary, re-executed.
func TestRanksDieWithFsdpc(t *testing.T) {
	if dir := os.Getenv("FSDPC_TEST_LAUNCHER"); dir != "" {
		launchForever(t, dir)
		return
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "python3")
	script := "#!/bin/sh\necho $$ > " + dir + "/rank.$RANK\nexec sleep 300\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	launcher := exec.Command(os.Args[0], "-test.run=^TestRanksDieWithFsdpc$")
	launcher.Env = append(os.Environ(), "FSDPC_TEST_LAUNCHER="+dir)
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	defer launcher.Process.Kill()
	var pids []int
	for deadline := time.Now().Add(2 * time.Minute); len(pids) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the ranks never started")
		}
		pids = pids[:0]
		for r := 0; r < 2; r++ {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank.%d", r)))
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
				pids = append(pids, pid)
			}
		}
	}
	launcher.Process.Signal(syscall.SIGKILL)
	launcher.Wait()
	for _, pid := range pids {
		gone := false
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if syscall.Kill(pid, 0) != nil {
				gone = true
				break
			}
		}
		if !gone {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("rank process %d outlived the killed launcher", pid)
		}
	}
}

// launchForever is the launcher's side: two ranks of the stand-in python.
func launchForever(t *testing.T, dir string) {
	s, _ := planSpec(t, "m.toml", "[train]\nseq_len = 4\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n")
	Launch(Python{Path: filepath.Join(dir, "python3")}, s, 10*time.Minute)
}
