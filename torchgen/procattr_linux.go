package torchgen

import "syscall"

// rankAttr puts each rank in its own process group (Launch kills the
// group, so nothing a rank starts outlives the run) and makes it die with
// fsdpc: killed outright (SIGKILL, the OOM killer), fsdpc cannot tear its
// ranks down, and they would sit in their collectives until the rendezvous
// timeout. chroot, env and python3 each exec the next in one process, so
// the parent-death signal reaches the Python rank itself.
func rankAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
