//go:build cgo

package devices

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

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
