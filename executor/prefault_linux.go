package executor

import (
	"syscall"
	"unsafe"
)

// Linux madvise advice values (include/uapi/asm-generic/mman-common.h);
// the syscall package does not name the newer ones.
const (
	madvHugepage      = 14 // MADV_HUGEPAGE, Linux 2.6.38
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE, Linux 5.14
)

// prefault maps a new block's pages before the poison fill touches them:
// with transparent huge pages for its 2 MiB-aligned interior (where
// /sys/kernel/mm/transparent_hugepage/enabled is "madvise", the common
// default), then all of it in one madvise call instead of a page fault per
// 4 KiB page. A fresh `fsdpc run` takes every block's memory new from the
// kernel, and those faults were most of its system time
// (bench/host-run.sh). Both are advice: a kernel without them returns an
// error, ignored, and the fill faults the pages in as before. The block's
// bytes are not changed.
func prefault(b []byte) {
	const page, huge = 4 << 10, 2 << 20
	if len(b) < 16*page {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	end := p + uintptr(len(b))
	if lo, hi := (p+huge-1)&^(huge-1), end&^(huge-1); hi > lo {
		_ = syscall.Madvise(b[lo-p:hi-p], madvHugepage)
	}
	if lo, hi := (p+page-1)&^(page-1), end&^(page-1); hi > lo {
		_ = syscall.Madvise(b[lo-p:hi-p], madvPopulateWrite)
	}
}
