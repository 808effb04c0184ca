// Package devices lists the local NVIDIA GPUs through NVML
// (github.com/NVIDIA/go-nvml), which loads libnvidia-ml.so.1 at run time:
// the package builds anywhere and reports plainly when there is no driver.
// go-nvml reaches NVML through cgo, so a binary built without cgo
// (CGO_ENABLED=0, as a cross-compilation is by default) has no NVML:
// List and OpenSampler then return ErrNoCgo (nocgo.go), and everything
// else fsdpc does still works.
package devices

import (
	"errors"
	"fmt"
)

// ErrNoDriver means there is no usable NVIDIA driver here: NVML could not
// be loaded, or it loaded but the kernel driver is not (a container or
// machine with the CUDA libraries and no GPU).
var ErrNoDriver = errors.New("no NVIDIA driver")

// ErrNoCgo is ErrNoDriver for a binary built without cgo, which NVML
// needs.
var ErrNoCgo = fmt.Errorf("%w reachable: this binary was built without cgo (CGO_ENABLED=0), which NVML needs; build it with cgo to see the GPUs", ErrNoDriver)

// Info is what NVML reports about the machine.
type Info struct {
	Driver string
	// CUDA is the highest CUDA version the driver supports, "12.4".
	CUDA string
	GPUs []GPU
}

// GPU is one device.
type GPU struct {
	Index        int
	Name         string
	UUID         string
	MemoryBytes  uint64
	ComputeMajor int
	ComputeMinor int
	// NVLinks is the number of active NVLink links.
	NVLinks int
}

// MemorySample is one reading, in bytes.
type MemorySample struct {
	// Total is the board's memory; Used what is in use by anyone
	// (total − free, as cuMemGetInfo counts it); Reserved the part of it
	// the driver and firmware keep for themselves (only with
	// nvmlDeviceGetMemoryInfo_v2, drivers from R510: 0 otherwise).
	Total, Used, Reserved uint64
	// Process is this process's memory on the device (its CUDA context,
	// its allocations, NCCL's buffers), when HasProcess: NVML lists
	// processes by their PID in the host's namespace, so from inside a
	// container, or on a MIG instance, it is not found.
	Process    uint64
	HasProcess bool
}
