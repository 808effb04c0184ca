//go:build cuda

package driverinit

// The only cgo here: cuInit and the driver's names for its result. The
// flags are those of the package cuda (driver.go).

/*
#cgo linux CFLAGS: -I/usr/local/cuda/include
#cgo linux LDFLAGS: -L/usr/local/cuda/lib64
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"os"
)

// init exits the process when the CUDA driver cannot start: this package
// exists to do so before gorgonia.org/cu does (see the package doc), so
// the exit belongs here, in an init, and nowhere else. Being first, it is
// also where the hardware queues are set (connections.go), before the
// driver reads its environment. os.Setenv reaches the C environment the
// driver reads: in a cgo binary Go's setenv calls the C library's.
func init() {
	setConnections()
	r := C.cuInit(0)
	if r == C.CUDA_SUCCESS {
		return
	}
	f := probe(int(r), errorName(r), errorString(r))
	fmt.Fprint(os.Stderr, f.explain())
	os.Exit(1)
}

// errorName is the driver's name for r, "CUDA_ERROR_NO_DEVICE", or "" when
// it has none (cuGetErrorName needs no cuInit).
func errorName(r C.CUresult) string {
	var s *C.char
	if C.cuGetErrorName(r, &s) != C.CUDA_SUCCESS || s == nil {
		return ""
	}
	return C.GoString(s)
}

// errorString is the driver's description of r, or "".
func errorString(r C.CUresult) string {
	var s *C.char
	if C.cuGetErrorString(r, &s) != C.CUDA_SUCCESS || s == nil {
		return ""
	}
	return C.GoString(s)
}
