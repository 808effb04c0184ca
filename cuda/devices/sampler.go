//go:build cgo

package devices

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Sampler reads one GPU's memory through NVML while a run goes on.
//
// It finds the GPU by PCI bus id or UUID, never by index: NVML numbers
// every GPU of the machine in its own order and ignores
// CUDA_VISIBLE_DEVICES, so NVML's device 0 need not be CUDA's; the bus id
// (cuDeviceGetAttribute's PCI domain, bus and device) names the same
// board in both.
type Sampler struct {
	lib api
	dev nvml.Device
	id  string
	pid uint32

	mu     sync.Mutex
	v2     bool // nvmlDeviceGetMemoryInfo_v2 is there: reserved is known
	procs  bool // nvmlDeviceGetComputeRunningProcesses still worth asking
	closed bool
}

// api is the part of go-nvml the sampler calls; tests replace it.
type api interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetHandleByPciBusId(string) (nvml.Device, nvml.Return)
	DeviceGetHandleByUUID(string) (nvml.Device, nvml.Return)
	Extensions() nvml.ExtendedInterface
}

// global is go-nvml's package-level library, the one List uses too.
type global struct{}

func (global) Init() nvml.Return     { return nvml.Init() }
func (global) Shutdown() nvml.Return { return nvml.Shutdown() }
func (global) DeviceGetHandleByPciBusId(id string) (nvml.Device, nvml.Return) {
	return nvml.DeviceGetHandleByPciBusId(id)
}
func (global) DeviceGetHandleByUUID(id string) (nvml.Device, nvml.Return) {
	return nvml.DeviceGetHandleByUUID(id)
}
func (global) Extensions() nvml.ExtendedInterface { return nvml.Extensions() }

// OpenSampler initialises NVML and finds the GPU id names: a PCI bus id
// ("00000000:65:00.0", the form cuda.Device.PCIBusID gives; NVML also
// takes "0000:65:00.0") or a UUID ("GPU-…", "MIG-…"). It returns
// ErrNoDriver (or an error that is one) when NVML cannot be loaded or
// finds no driver. Close it to shut NVML down.
func OpenSampler(id string) (*Sampler, error) {
	return openSampler(global{}, id, os.Getpid())
}

func openSampler(lib api, id string, pid int) (*Sampler, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND:
			return nil, ErrNoDriver
		case nvml.ERROR_DRIVER_NOT_LOADED:
			// The CUDA toolkit's libnvidia-ml loads on a machine without
			// a GPU, and only nvmlInit finds no driver: the same case.
			return nil, fmt.Errorf("%w (%w)", nvmlError("nvmlInit", ret), ErrNoDriver)
		}
		return nil, nvmlError("nvmlInit", ret)
	}
	var dev nvml.Device
	var ret nvml.Return
	call := "nvmlDeviceGetHandleByPciBusId"
	if strings.HasPrefix(id, "GPU-") || strings.HasPrefix(id, "MIG-") {
		call = "nvmlDeviceGetHandleByUUID"
		dev, ret = lib.DeviceGetHandleByUUID(id)
	} else {
		dev, ret = lib.DeviceGetHandleByPciBusId(id)
	}
	if ret != nvml.SUCCESS {
		err := nvmlError(fmt.Sprintf("%s(%q)", call, id), ret)
		if ret := lib.Shutdown(); ret != nvml.SUCCESS {
			err = errors.Join(err, nvmlError("nvmlShutdown", ret))
		}
		return nil, err
	}
	return &Sampler{
		lib: lib, dev: dev, id: id, pid: uint32(pid),
		// The _v2 entry point arrived with driver R510; calling a symbol
		// the library lacks would crash, so look before using it.
		v2:    lib.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil,
		procs: true,
	}, nil
}

// Sample reads the device's memory and, where NVML lists it, this
// process's. An error names the NVML call; failing to list the processes
// is not one (the device figures still stand), it only leaves Process
// unknown, and after NOT_SUPPORTED or NO_PERMISSION the sampler stops
// asking.
func (s *Sampler) Sample() (MemorySample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return MemorySample{}, fmt.Errorf("NVML sampler of %s: closed", s.id)
	}
	var x MemorySample
	if s.v2 {
		m, ret := s.dev.GetMemoryInfo_v2()
		if ret == nvml.SUCCESS {
			// v2's used leaves out what the driver reserves, which v1's
			// used and cuMemGetInfo count: total − free is the same in
			// both, so Used means one thing whichever call answered.
			x.Total, x.Used, x.Reserved = m.Total, m.Total-m.Free, m.Reserved
		} else {
			// A driver that has the symbol may still refuse the struct
			// version (ERROR_ARGUMENT_VERSION_MISMATCH); v1 answers the
			// same question, less the reserved part.
			s.v2 = false
		}
	}
	if !s.v2 {
		m, ret := s.dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return x, nvmlError(fmt.Sprintf("nvmlDeviceGetMemoryInfo(%s)", s.id), ret)
		}
		x.Total, x.Used = m.Total, m.Total-m.Free
	}
	if !s.procs {
		return x, nil
	}
	procs, ret := s.dev.GetComputeRunningProcesses()
	switch ret {
	case nvml.SUCCESS:
		for _, p := range procs {
			// VALUE_NOT_AVAILABLE (all ones) where the driver cannot
			// tell, e.g. under Windows' WDDM.
			if p.Pid == s.pid && p.UsedGpuMemory != ^uint64(0) {
				x.Process, x.HasProcess = p.UsedGpuMemory, true
				break
			}
		}
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION:
		s.procs = false
	}
	return x, nil
}

// Close shuts NVML down; later calls do nothing.
func (s *Sampler) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return nvmlError("nvmlShutdown", ret)
	}
	return nil
}
