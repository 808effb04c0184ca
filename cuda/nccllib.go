//go:build cuda

package cuda

// NCCL is loaded at run time with dlopen, so the worker builds without
// NCCL's headers or library and runs single-GPU rehearsals where NCCL is
// not installed. The prototypes below are NCCL's (nccl.h, 2.x), declared
// here with every enum as int; the C trampolines call through the
// resolved pointers, which Go cannot call itself.

/*
#cgo LDFLAGS: -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct { char internal[128]; } fsdNcclUniqueId; // NCCL_UNIQUE_ID_BYTES

static int fsd_nccl_get_unique_id(void* f, fsdNcclUniqueId* id) {
	return ((int (*)(fsdNcclUniqueId*))f)(id);
}
static int fsd_nccl_comm_init_rank(void* f, void** comm, int nranks, const fsdNcclUniqueId* id, int rank) {
	return ((int (*)(void**, int, fsdNcclUniqueId, int))f)(comm, nranks, *id, rank);
}
// ncclConfig_t as NCCL 2.14 introduced it (ncclConfig_v21400): NCCL reads
// the fields its version names, so a newer NCCL takes it as it is. The
// last int is the old struct's tail padding, where 2.17 put
// cgaClusterSize: it is set to NCCL_CONFIG_UNDEF_INT.
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
	int undef;
} fsdNcclConfig;
static int fsd_nccl_comm_init_rank_nonblocking(void* f, void** comm, int nranks, const fsdNcclUniqueId* id, int rank) {
	fsdNcclConfig config = {sizeof(fsdNcclConfig), 0xcafebeef, 21400, 0, INT_MIN};
	return ((int (*)(void**, int, fsdNcclUniqueId, int, fsdNcclConfig*))f)(comm, nranks, *id, rank, &config);
}
static int fsd_nccl_all_gather(void* f, CUdeviceptr send, CUdeviceptr recv, size_t count, int dt, void* comm, CUstream s) {
	return ((int (*)(const void*, void*, size_t, int, void*, CUstream))f)(
		(const void*)(uintptr_t)send, (void*)(uintptr_t)recv, count, dt, comm, s);
}
// ncclReduceScatter and ncclAllReduce share a prototype.
static int fsd_nccl_reduce(void* f, CUdeviceptr send, CUdeviceptr recv, size_t count, int dt, int op, void* comm, CUstream s) {
	return ((int (*)(const void*, void*, size_t, int, int, void*, CUstream))f)(
		(const void*)(uintptr_t)send, (void*)(uintptr_t)recv, count, dt, op, comm, s);
}
static int fsd_nccl_comm(void* f, void* comm) {
	return ((int (*)(void*))f)(comm);
}
static int fsd_nccl_comm_split(void* f, void* comm, int color, int key, void** newcomm) {
	return ((int (*)(void*, int, int, void**, void*))f)(comm, color, key, newcomm, NULL);
}
static int fsd_nccl_comm_int(void* f, void* comm, int* v) {
	return ((int (*)(void*, int*))f)(comm, v);
}
static const char* fsd_nccl_error_string(void* f, int r) {
	return ((const char* (*)(int))f)(r);
}
static int fsd_nccl_get_version(void* f, int* v) {
	return ((int (*)(int*))f)(v);
}
static int fsd_nccl_premul_sum(void* f, int* op, void* scalar, int dt, int residence, void* comm) {
	return ((int (*)(int*, void*, int, int, void*))f)(op, scalar, dt, residence, comm);
}
static int fsd_nccl_red_op_destroy(void* f, int op, void* comm) {
	return ((int (*)(int, void*))f)(op, comm);
}
static int fsd_nccl_async_error(void* f, void* comm, int* err) {
	return ((int (*)(void*, int*))f)(comm, err);
}
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"gorgonia.org/cu"
)

// NCCL's enums (nccl.h).
const (
	ncclUint8    = 1
	ncclFloat16  = 6
	ncclFloat32  = 7
	ncclFloat64  = 8
	ncclBfloat16 = 9

	ncclSum = 0
	ncclAvg = 4 // NCCL 2.10

	ncclScalarHostImmediate = 1

	ncclInProgress = 7 // ncclResult_t of a non-blocking communicator's call still under way
)

// DefaultNCCL is the library LoadNCCL opens when neither its argument
// nor $FSDPC_NCCL names one: the soname, found on the loader's path.
const DefaultNCCL = "libnccl.so.2"

// ncclLib is a loaded NCCL.
type ncclLib struct {
	path    string
	version int // NCCL_VERSION_CODE: 21805 for 2.18.5; 0 if unknown

	getUniqueID, commInitRank, allGather, reduceScatter, allReduce  unsafe.Pointer
	commAbort, commDestroy, getErrorString, commCount, commUserRank unsafe.Pointer
	// Optional: nil when this NCCL lacks them.
	preMulSum, redOpDestroy, asyncError, commSplit unsafe.Pointer
	commInitRankConfig                             unsafe.Pointer // NCCL 2.14: non-blocking communicators
}

var (
	ncclMu     sync.Mutex
	ncclLoaded *ncclLib
)

// LoadNCCL loads NCCL from path, or from $FSDPC_NCCL when path is empty,
// or else DefaultNCCL, and returns its version (NCCL_VERSION_CODE), for
// reports. UniqueID and NewComm load it the same way. The first
// successful load stays for the process; asking for another path later is
// an error.
func LoadNCCL(path string) (int, error) {
	l, err := loadNCCL(path)
	if err != nil {
		return 0, err
	}
	return l.version, nil
}

func loadNCCL(path string) (*ncclLib, error) {
	ncclMu.Lock()
	defer ncclMu.Unlock()
	if path == "" {
		path = os.Getenv("FSDPC_NCCL")
	}
	if path == "" {
		path = DefaultNCCL
	}
	if l := ncclLoaded; l != nil {
		if path != l.path && path != DefaultNCCL {
			return nil, fmt.Errorf("cuda: NCCL is already loaded from %s; cannot load %s too", l.path, path)
		}
		return l, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	h := C.dlopen(cpath, C.RTLD_NOW|C.RTLD_GLOBAL)
	if h == nil {
		return nil, fmt.Errorf("cuda: loading NCCL: dlopen %s: %s (set FSDPC_NCCL to the path of libnccl.so.2, or pass it to LoadNCCL)", path, C.GoString(C.dlerror()))
	}
	sym := func(name string) unsafe.Pointer {
		cname := C.CString(name)
		defer C.free(unsafe.Pointer(cname))
		return C.dlsym(h, cname)
	}
	l := &ncclLib{path: path}
	required := []struct {
		name string
		p    *unsafe.Pointer
	}{
		{"ncclGetUniqueId", &l.getUniqueID},
		{"ncclCommInitRank", &l.commInitRank},
		{"ncclAllGather", &l.allGather},
		{"ncclReduceScatter", &l.reduceScatter},
		{"ncclAllReduce", &l.allReduce},
		{"ncclCommAbort", &l.commAbort},
		{"ncclCommDestroy", &l.commDestroy},
		{"ncclGetErrorString", &l.getErrorString},
		{"ncclCommCount", &l.commCount},
		{"ncclCommUserRank", &l.commUserRank},
	}
	for _, r := range required {
		if *r.p = sym(r.name); *r.p == nil {
			C.dlclose(h)
			return nil, fmt.Errorf("cuda: loading NCCL: %s has no %s: not an NCCL 2 library", path, r.name)
		}
	}
	l.preMulSum = sym("ncclRedOpCreatePreMulSum") // NCCL 2.11
	l.redOpDestroy = sym("ncclRedOpDestroy")
	if l.redOpDestroy == nil {
		l.preMulSum = nil // an operator that cannot be destroyed would leak per call
	}
	l.asyncError = sym("ncclCommGetAsyncError") // NCCL 2.4
	l.commSplit = sym("ncclCommSplit")          // NCCL 2.18
	l.commInitRankConfig = sym("ncclCommInitRankConfig")
	if l.asyncError == nil {
		l.commInitRankConfig = nil // a non-blocking communicator is polled with ncclCommGetAsyncError
	}
	if f := sym("ncclGetVersion"); f != nil {
		var v C.int
		if C.fsd_nccl_get_version(f, &v) == 0 {
			l.version = int(v)
		}
	}
	ncclLoaded = l
	return l, nil
}

// hasAvg reports NCCL ≥ 2.10, whose version codes are X·10000+Y·100+Z
// (2.8 and earlier used X·1000+Y·100+Z, all below 10000).
func (l *ncclLib) hasAvg() bool { return l.version >= 21000 }

// ncclError is a failed NCCL call.
type ncclError struct {
	call string
	code int
	msg  string
}

func (e *ncclError) Error() string {
	return fmt.Sprintf("cuda: %s: NCCL error %d (%s)", e.call, e.code, e.msg)
}

// check is nil for ncclSuccess, gpu.ErrInProgress (wrapped) for
// ncclInProgress, else an ncclError.
func (l *ncclLib) check(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	if r == ncclInProgress {
		return fmt.Errorf("cuda: %s: %w", call, gpu.ErrInProgress)
	}
	return &ncclError{call: call, code: int(r), msg: C.GoString(C.fsd_nccl_error_string(l.getErrorString, r))}
}

func (l *ncclLib) uniqueID() ([128]byte, error) {
	var id [128]byte
	err := l.check("ncclGetUniqueId", C.fsd_nccl_get_unique_id(l.getUniqueID, (*C.fsdNcclUniqueId)(unsafe.Pointer(&id))))
	return id, err
}

// initRank makes a communicator: non-blocking (config.blocking = 0) where
// this NCCL has ncclCommInitRankConfig (2.14), in which case it may
// return the communicator with gpu.ErrInProgress, to be polled; else
// blocking, with nonBlocking false.
func (l *ncclLib) initRank(id *[128]byte, nranks, rank int) (comm unsafe.Pointer, nonBlocking bool, err error) {
	if l.commInitRankConfig != nil {
		r := C.fsd_nccl_comm_init_rank_nonblocking(l.commInitRankConfig, &comm, C.int(nranks), (*C.fsdNcclUniqueId)(unsafe.Pointer(id)), C.int(rank))
		return comm, true, l.check(fmt.Sprintf("ncclCommInitRankConfig (rank %d of %d, non-blocking)", rank, nranks), r)
	}
	r := C.fsd_nccl_comm_init_rank(l.commInitRank, &comm, C.int(nranks), (*C.fsdNcclUniqueId)(unsafe.Pointer(id)), C.int(rank))
	return comm, false, l.check(fmt.Sprintf("ncclCommInitRank (rank %d of %d)", rank, nranks), r)
}

func (l *ncclLib) allGatherOn(comm unsafe.Pointer, send, recv uint64, bytes int64, cs cu.Stream) error {
	return l.check("ncclAllGather", C.fsd_nccl_all_gather(l.allGather, C.CUdeviceptr(send), C.CUdeviceptr(recv),
		C.size_t(bytes), ncclUint8, comm, rawStream(cs)))
}

func (l *ncclLib) reduceOn(call string, f, comm unsafe.Pointer, send, recv uint64, count int64, dt, op int, cs cu.Stream) error {
	return l.check(call, C.fsd_nccl_reduce(f, C.CUdeviceptr(send), C.CUdeviceptr(recv), C.size_t(count),
		C.int(dt), C.int(op), comm, rawStream(cs)))
}

// premulSum makes a PreMulSum operator whose scalar, of the op's dtype,
// is read from host memory at the call (so it may be a Go value).
func (l *ncclLib) premulSum(comm unsafe.Pointer, scalar []byte, dt int) (int, error) {
	var op C.int
	r := C.fsd_nccl_premul_sum(l.preMulSum, &op, unsafe.Pointer(&scalar[0]), C.int(dt), ncclScalarHostImmediate, comm)
	return int(op), l.check("ncclRedOpCreatePreMulSum", r)
}

func (l *ncclLib) destroyOp(comm unsafe.Pointer, op int) error {
	return l.check("ncclRedOpDestroy", C.fsd_nccl_red_op_destroy(l.redOpDestroy, C.int(op), comm))
}

// split is ncclCommSplit with the parent's configuration (a NULL
// config: a non-blocking parent makes a non-blocking child, which may
// come back with gpu.ErrInProgress, to be polled).
func (l *ncclLib) split(comm unsafe.Pointer, color, key int) (unsafe.Pointer, error) {
	if l.commSplit == nil {
		return nil, fmt.Errorf("cuda: %s (NCCL version code %d) has no ncclCommSplit, which sub-communicators (HSDP, an intermediate reshard_after_forward) need: use NCCL 2.18 or newer (FSDPC_NCCL names the library)", l.path, l.version)
	}
	var sub unsafe.Pointer
	err := l.check(fmt.Sprintf("ncclCommSplit (color %d, key %d)", color, key), C.fsd_nccl_comm_split(l.commSplit, comm, C.int(color), C.int(key), &sub))
	return sub, err
}

// shape is a ready communicator's size and this rank's place in it.
func (l *ncclLib) shape(comm unsafe.Pointer) (int, int, error) {
	var n, r C.int
	err := l.check("ncclCommCount", C.fsd_nccl_comm_int(l.commCount, comm, &n))
	if err == nil {
		err = l.check("ncclCommUserRank", C.fsd_nccl_comm_int(l.commUserRank, comm, &r))
	}
	return int(n), int(r), err
}

func (l *ncclLib) abort(comm unsafe.Pointer) error {
	return l.check("ncclCommAbort", C.fsd_nccl_comm(l.commAbort, comm))
}

func (l *ncclLib) destroy(comm unsafe.Pointer) error {
	return l.check("ncclCommDestroy", C.fsd_nccl_comm(l.commDestroy, comm))
}

// asyncErrorOf is ncclCommGetAsyncError's verdict, nil where this NCCL
// cannot tell; gpu.ErrInProgress (wrapped) while a non-blocking call is
// under way.
func (l *ncclLib) asyncErrorOf(comm unsafe.Pointer) error {
	if l.asyncError == nil {
		return nil
	}
	var e C.int
	if err := l.check("ncclCommGetAsyncError", C.fsd_nccl_async_error(l.asyncError, comm, &e)); err != nil {
		return err
	}
	return l.check("asynchronous NCCL error", e)
}
