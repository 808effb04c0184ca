//go:build !linux

package torchgen

import "syscall"

// rankAttr puts each rank in its own process group; without Linux's
// parent-death signal the ranks outlive an fsdpc that is killed outright.
func rankAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
