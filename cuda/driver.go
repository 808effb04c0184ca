//go:build cuda

package cuda

// The driver calls gorgonia.org/cu v0.9.6 does not wrap, and the raw
// handles they need. cu's handle types are structs holding one C handle
// with an unexported field; Stream exports it through C() (as cu's own
// cgo type, which converts through unsafe.Pointer like any pointer), and
// Function does not, so its raw handle is read by reinterpreting the
// struct, guarded by a compile-time size check below.

/*
#cgo linux CFLAGS: -I/usr/local/cuda/include
#cgo linux LDFLAGS: -L/usr/local/cuda/lib64 -lcuda
#include <cuda.h>
#include <stdint.h>
#include <string.h>

// fsd_memcpy_host copies between Go memory and any unified address: with
// unified addressing cuMemcpy infers the direction from the pointers, so
// one call serves device memory and pinned host memory alike.
// fsd_memcpy_to_async enqueues the copy of Go memory on a stream: from
// pageable memory the driver stages the bytes before it returns (the
// CUDA documentation's "API synchronization behavior"), so Go's memory
// is not referenced after the call, while the copy to dst stays in the
// stream's order, where the readers' streams can wait for it.
static CUresult fsd_memcpy_to_async(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
	return cuMemcpyAsync(dst, (CUdeviceptr)(uintptr_t)src, n, s);
}
static CUresult fsd_memcpy_from(void* dst, CUdeviceptr src, size_t n) {
	return cuMemcpy((CUdeviceptr)(uintptr_t)dst, src, n);
}

// fsd_occupancy is how many blocks of block threads of f one SM holds at
// once, given f's registers and shared memory.
static CUresult fsd_occupancy(int* n, CUfunction f, int block) {
	return cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, block, 0);
}

// fsd_launch_reduce launches reduce with its sources in a fixed array
// passed by value: cu's Launch copies only 8 bytes per parameter.
#define FSD_MAX_SRCS 64
typedef struct { CUdeviceptr p[FSD_MAX_SRCS]; } fsd_srcs;
static CUresult fsd_launch_reduce(CUfunction f, unsigned grid, unsigned block, CUstream s,
		CUdeviceptr dst, const CUdeviceptr* srcs, int nsrc, long long n, long long dt, double scale) {
	fsd_srcs a;
	long long ns = nsrc;
	if (nsrc < 1 || nsrc > FSD_MAX_SRCS) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	memset(&a, 0, sizeof a);
	memcpy(a.p, srcs, (size_t)nsrc * sizeof(CUdeviceptr));
	void* args[] = {&dst, &a, &ns, &n, &dt, &scale};
	return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, args, NULL);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// Compile-time checks that cu.Function is exactly one C handle, which
// rawFunction relies on: a negative or positive difference is an
// out-of-range constant index.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(cu.Function{})-unsafe.Sizeof(C.CUfunction(nil))]
	_ = [1]struct{}{}[unsafe.Sizeof(C.CUfunction(nil))-unsafe.Sizeof(cu.Function{})]
)

func rawStream(s cu.Stream) C.CUstream { return C.CUstream(unsafe.Pointer(s.C())) }

func rawFunction(f *cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(f)) }

// driverError is a CUresult from a call made here rather than through cu.
type driverError C.CUresult

func (e driverError) Error() string {
	var name, desc *C.char
	C.cuGetErrorName(C.CUresult(e), &name)
	C.cuGetErrorString(C.CUresult(e), &desc)
	if name == nil {
		return fmt.Sprintf("CUresult %d", int(e))
	}
	if desc == nil {
		return C.GoString(name)
	}
	return C.GoString(name) + ": " + C.GoString(desc)
}

func check(r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return driverError(r)
}

// occupancy is cuOccupancyMaxActiveBlocksPerMultiprocessor for f at
// block threads and no dynamic shared memory.
func occupancy(f *cu.Function, block int) (int, error) {
	var n C.int
	if err := check(C.fsd_occupancy(&n, rawFunction(f), C.int(block))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// allocHost is cuMemAllocHost, which cu lacks (it has only MemFreeHost).
func allocHost(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := check(C.cuMemAllocHost(&p, C.size_t(bytes))); err != nil {
		return nil, err
	}
	return p, nil
}

func freeHost(p unsafe.Pointer) error { return check(C.cuMemFreeHost(p)) }

func memcpyToAsync(dst uint64, src []byte, s cu.Stream) error {
	return check(C.fsd_memcpy_to_async(C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), rawStream(s)))
}

func memcpyFrom(dst []byte, src uint64) error {
	return check(C.fsd_memcpy_from(unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst))))
}

func launchReduce(f *cu.Function, grid, block int, s cu.Stream, dst uint64, srcs []uint64, n, dt int64, scale float64) error {
	cs := make([]C.CUdeviceptr, len(srcs))
	for i, p := range srcs {
		cs[i] = C.CUdeviceptr(p)
	}
	return check(C.fsd_launch_reduce(rawFunction(f), C.uint(grid), C.uint(block), rawStream(s),
		C.CUdeviceptr(dst), &cs[0], C.int(len(cs)), C.longlong(n), C.longlong(dt), C.double(scale)))
}
