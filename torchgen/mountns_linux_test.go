package torchgen

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A copy of this (static) test binary stands in for env(1) inside a fake
// chroot: started as a rank, it reports, every few milliseconds, its pid
// and how many of the root's /proc, /dev and /dev/shm it sees mounted,
// until a stop file appears.
func init() {
	tag := os.Getenv("FSDPC_TEST_FAKE_RANK")
	if tag == "" || filepath.Base(os.Args[0]) != "env" {
		return
	}
	rank := "?"
	for _, a := range os.Args[1:] {
		if r, ok := strings.CutPrefix(a, "RANK="); ok {
			rank = r
		}
	}
	report := fmt.Sprintf("/tmp/%s.rank%s", tag, rank)
	for {
		n := len(mountsUnder("/proc/self/mountinfo", "/"))
		os.WriteFile(report+".tmp", []byte(fmt.Sprintf("%d %d\n", os.Getpid(), n)), 0o644)
		os.Rename(report+".tmp", report)
		if _, err := os.Stat("/tmp/" + tag + ".stop"); err == nil {
			os.Exit(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mountsUnder lists the mount points in a mountinfo file that are /proc,
// /dev or /dev/shm under root.
func mountsUnder(mountinfo, root string) []string {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		for _, m := range []string{"proc", "dev", "dev/shm"} {
			if fields[4] == filepath.Join(root, m) {
				found = append(found, fields[4])
			}
		}
	}
	return found
}

// TestChrootMountsPrivate runs two launches on one fake chroot at once and
// kills one outright (SIGKILL). Each rank must see the root's /proc, /dev
// and /dev/shm bound, the host must never see them (they live in the
// rank's mount namespace), the launch that ends first must not take the
// other's mounts away, and the killed launch's scratch directory must be
// swept by the next run.
func TestChrootMountsPrivate(t *testing.T) {
	if root := os.Getenv("FSDPC_TEST_LAUNCH_ROOT"); root != "" {
		s, _ := planSpec(t, "m.toml", "[train]\nseq_len = 4\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 2\n[[module]]\nname = \"l\"\nkind = \"linear\"\nin = 8\nout = 8\n")
		Launch(Python{Root: root}, s, 10*time.Minute) // its ranks fail when stopped
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount namespaces and bind mounts")
	}
	if err := exec.Command("unshare", "--mount", "true").Run(); err != nil {
		t.Skipf("no mount namespaces here: %v", err)
	}
	root := t.TempDir()
	for _, d := range []string{"proc", "dev", "tmp", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, os.Args[0], filepath.Join(root, "usr/bin/env"))
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	launch := func(tag string) *exec.Cmd {
		c := exec.Command(os.Args[0], "-test.run=^TestChrootMountsPrivate$")
		c.Env = append(os.Environ(), "FSDPC_TEST_LAUNCH_ROOT="+root, "FSDPC_TEST_FAKE_RANK="+tag)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	// ranks waits for both ranks of tag to report, and returns their pids
	// and the mounts each sees.
	ranks := func(tag string) (pids, mounts []int) {
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			pids, mounts = pids[:0], mounts[:0]
			for r := 0; r < 2; r++ {
				b, _ := os.ReadFile(filepath.Join(root, "tmp", fmt.Sprintf("%s.rank%d", tag, r)))
				var pid, n int
				if _, err := fmt.Sscan(string(b), &pid, &n); err == nil {
					pids, mounts = append(pids, pid), append(mounts, n)
				}
			}
			if len(pids) == 2 {
				return pids, mounts
			}
			if time.Now().After(deadline) {
				t.Fatalf("the ranks of launch %s never started", tag)
			}
		}
	}
	b := launch("b")
	if _, m := ranks("b"); m[0] != 3 || m[1] != 3 {
		t.Fatalf("launch b's ranks see %v of the root's 3 bind mounts", m)
	}
	a := launch("a")
	pids, m := ranks("a")
	if m[0] != 3 || m[1] != 3 {
		t.Fatalf("launch a's ranks see %v of the root's 3 bind mounts", m)
	}
	if got := mountsUnder("/proc/self/mountinfo", root); len(got) > 0 {
		t.Errorf("the host sees the ranks' mounts: %v", got)
	}
	// b ends first; a's ranks keep their mounts.
	if err := os.WriteFile(filepath.Join(root, "tmp/b.stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.Wait()
	time.Sleep(200 * time.Millisecond)
	if _, m := ranks("a"); m[0] != 3 || m[1] != 3 {
		t.Errorf("after launch b ended, launch a's ranks see %v of their 3 bind mounts", m)
	}
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	for _, pid := range pids {
		for deadline := time.Now().Add(time.Minute); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("rank %d outlived its killed launcher", pid)
			}
		}
	}
	if got := mountsUnder("/proc/self/mountinfo", root); len(got) > 0 {
		t.Errorf("mounts left under the root after a killed run: %v", got)
	}
	stale, _ := filepath.Glob(filepath.Join(root, "tmp", scratchPrefix+"*"))
	if len(stale) != 1 {
		t.Fatalf("want the killed run's scratch directory left, found %v", stale)
	}
	_, _, cleanup, err := Python{Root: root}.workdir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale[0]); !os.IsNotExist(err) {
		t.Errorf("the next run did not remove the stale scratch directory %s (%v)", stale[0], err)
	}
	cleanup()
	if left, _ := filepath.Glob(filepath.Join(root, "tmp", scratchPrefix+"*")); len(left) > 0 {
		t.Errorf("scratch directories left after cleanup: %v", left)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
