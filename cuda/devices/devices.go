// Package devices lists the local NVIDIA GPUs through NVML
// (github.com/NVIDIA/go-nvml), which loads libnvidia-ml.so.1 at run time:
// the package builds anywhere and reports plainly when there is no driver.
package devices

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoDriver means there is no usable NVIDIA driver here: NVML could not
// be loaded, or it loaded but the kernel driver is not (a container or
// machine with the CUDA libraries and no GPU).
var ErrNoDriver = errors.New("no NVIDIA driver")

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

// List queries NVML. It returns ErrNoDriver when there is no driver, and
// an error naming the NVML call that failed otherwise.
func List() (Info, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND:
			return Info{}, fmt.Errorf("%w: libnvidia-ml.so.1 could not be loaded", ErrNoDriver)
		case nvml.ERROR_DRIVER_NOT_LOADED:
			return Info{}, fmt.Errorf("%w: NVML is installed but the kernel driver is not loaded", ErrNoDriver)
		}
		return Info{}, nvmlError("nvmlInit", ret)
	}
	defer nvml.Shutdown()
	var info Info
	var ret nvml.Return
	if info.Driver, ret = nvml.SystemGetDriverVersion(); ret != nvml.SUCCESS {
		return info, nvmlError("nvmlSystemGetDriverVersion", ret)
	}
	if v, ret := nvml.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		info.CUDA = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return info, nvmlError("nvmlDeviceGetCount", ret)
	}
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return info, nvmlError(fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), ret)
		}
		g := GPU{Index: i}
		if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
			return info, nvmlError("nvmlDeviceGetName", ret)
		}
		g.UUID, _ = d.GetUUID()
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryBytes = mem.Total
		}
		g.ComputeMajor, g.ComputeMinor, _ = d.GetCudaComputeCapability()
		for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
			state, ret := d.GetNvLinkState(link)
			if ret != nvml.SUCCESS {
				break // no more links, or no NVLink at all
			}
			if state == nvml.FEATURE_ENABLED {
				g.NVLinks++
			}
		}
		info.GPUs = append(info.GPUs, g)
	}
	return info, nil
}

func nvmlError(call string, ret nvml.Return) error {
	return fmt.Errorf("%s: %s", call, nvml.ErrorString(ret))
}
