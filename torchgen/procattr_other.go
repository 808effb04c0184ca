//go:build !linux

package torchgen

import (
	"os"
	"syscall"
)

// rankAttr puts each rank in its own process group; without Linux's
// parent-death signal the ranks outlive an fsdpc that is killed outright.
// The chroot (private) is Linux's only.
func rankAttr(private bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// createLocked creates path; without flock(2) here a scratch directory is
// never found stale, so none is swept.
func createLocked(path string) (release func(), ok bool) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false
	}
	return func() { f.Close() }, true
}

// tryLock never finds a scratch directory stale without flock(2).
func tryLock(path string) (release func(), ok bool) { return nil, false }
