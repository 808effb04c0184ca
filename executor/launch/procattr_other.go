//go:build !linux

package launch

import "syscall"

// workerAttr: only Linux has a parent-death signal; elsewhere workers
// outlive a launcher killed outright.
func workerAttr() *syscall.SysProcAttr { return nil }
