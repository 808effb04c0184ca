//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunCUDAWorkersDieWithLauncher: fsdpc run --backend cuda, killed
// outright (SIGKILL) or hung up on (SIGHUP), leaves no worker running;
// before, both left them running (issue 14). The workers share the
// launcher's process group.
func TestRunCUDAWorkersDieWithLauncher(t *testing.T) {
	bin := tinyPlan(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			launcher := exec.Command(testBinary(t), "run", "--backend", "cuda", "--worker", testBinary(t), bin)
			launcher.Env = append(os.Environ(), "FSDPC_TEST_LAUNCHER=1", "FSDPC_TEST_FAKE_WORKER=hang", "GORACE=atexit_sleep_ms=0")
			stdout, err := launcher.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := launcher.Start(); err != nil {
				t.Fatal(err)
			}
			// Hang guards only: nothing here waits on a clock.
			guard := time.AfterFunc(2*time.Minute, func() { launcher.Process.Kill() })
			defer guard.Stop()
			var workers []int
			sc := bufio.NewScanner(stdout)
			for len(workers) < 2 && sc.Scan() {
				var rank, pid int
				if _, err := fmt.Sscanf(sc.Text(), "[rank %d] fake worker: hanging, pid %d", &rank, &pid); err == nil {
					workers = append(workers, pid)
					t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // should the test fail
				}
			}
			if len(workers) < 2 {
				launcher.Process.Kill()
				launcher.Wait()
				t.Fatalf("the workers never said they were running (%d did)", len(workers))
			}
			for _, pid := range workers {
				if got, want := processGroup(t, pid), processGroup(t, launcher.Process.Pid); got != want {
					t.Errorf("worker %d is in process group %d, the launcher in %d", pid, got, want)
				}
			}
			if err := launcher.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			go func() { // drain: the launcher may still report the teardown
				for sc.Scan() {
				}
			}()
			launcher.Wait()
			if sig == syscall.SIGHUP {
				if code := launcher.ProcessState.ExitCode(); code != 1 {
					t.Errorf("after SIGHUP the launcher %s, want exit 1 after tearing the workers down", launcher.ProcessState)
				}
			}
			for _, pid := range workers {
				deadline := time.Now().Add(time.Minute)
				for alive(pid) {
					if time.Now().After(deadline) {
						t.Fatalf("worker %d still runs a minute after the launcher got %s", pid, sig)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
}

// processGroup reads a process's group from /proc/PID/stat.
func processGroup(t *testing.T, pid int) int {
	t.Helper()
	f := procStat(pid)
	if len(f) < 3 {
		t.Fatalf("no /proc/%d/stat", pid)
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// alive reports whether pid runs: it exists and is not a zombie waiting
// for a parent (here, a reaper) to collect it.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	f := procStat(pid)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// procStat returns /proc/PID/stat's fields after the command name:
// state, parent, process group, …
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	return strings.Fields(s)
}
