package torchgen

import (
	"os"
	"syscall"
)

// rankAttr puts each rank in its own process group (Launch kills the
// group, so nothing a rank starts outlives the run) and makes it die with
// fsdpc: killed outright (SIGKILL, the OOM killer), fsdpc cannot tear its
// ranks down, and they would sit in their collectives until the rendezvous
// timeout. chroot, env and python3 each exec the next in one process, so
// the parent-death signal reaches the Python rank itself. private gives
// the process a mount namespace of its own (Go makes its mounts private
// to it before the exec), for the chroot's bind mounts.
func rankAttr(private bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if private {
		a.Unshareflags = syscall.CLONE_NEWNS
	}
	return a
}

// createLocked creates path (it must not exist) and takes an exclusive
// lock on it, held until release or the end of this process.
func createLocked(path string) (release func(), ok bool) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false
	}
	return lockFile(f)
}

// tryLock takes the lock on an existing path if no live process holds it.
func tryLock(path string) (release func(), ok bool) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, false
	}
	return lockFile(f)
}

func lockFile(f *os.File) (func(), bool) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}
