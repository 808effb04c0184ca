package launch

import "syscall"

// workerAttr makes a worker die with the launcher. The launcher tears its
// workers down itself on an error, Ctrl-C, SIGTERM or SIGHUP; but killed
// outright (SIGKILL, the OOM killer) it cannot, and its workers would run
// on, holding their GPUs. The kernel sends the parent-death signal when
// the thread that started the worker ends; Go ends a thread only when a
// goroutine locked to it (LockOSThread) returns, which Launch never does.
// SIGKILL, because nobody is left to follow a SIGTERM up after the grace
// period. (Go's fork checks the parent is still there after setting it,
// so a launcher killed mid-start is caught too.)
//
// The workers stay in the launcher's process group (no Setpgid), so a
// terminal's Ctrl-C or hangup, sent to the foreground group, reaches
// them as well.
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
