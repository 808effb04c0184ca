package main

import (
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/cuda/devices"
)

func TestDevices(t *testing.T) {
	defer func(f func() (devices.Info, error)) { listDevices = f }(listDevices)

	listDevices = func() (devices.Info, error) { return devices.Info{}, devices.ErrNoDriver }
	if code, _, errOut := runCLI("devices"); code != 1 || !strings.Contains(errOut, "no NVIDIA driver") {
		t.Errorf("no driver: exit %d, %q", code, errOut)
	}

	listDevices = func() (devices.Info, error) {
		return devices.Info{Driver: "550.54.15", CUDA: "12.4", GPUs: []devices.GPU{
			{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 85520809984, ComputeMajor: 9, NVLinks: 18},
			{Index: 1, Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 85520809984, ComputeMajor: 9, NVLinks: 18},
		}}, nil
	}
	code, out, _ := runCLI("devices")
	if code != 0 || !strings.Contains(out, "NVIDIA H100 80GB HBM3") || !strings.Contains(out, "driver 550.54.15") {
		t.Errorf("devices: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("devices", "-toml")
	if code != 0 || !strings.Contains(out, `gpu = "h100-sxm"`) || !strings.Contains(out, "world_size = 2") {
		t.Errorf("devices -toml: exit %d\n%s", code, out)
	}
}

// On this machine the real NVML call must not crash, whatever it finds.
func TestDevicesReal(t *testing.T) {
	info, err := devices.List()
	if err != nil {
		t.Logf("devices.List: %v", err)
		return
	}
	t.Logf("%d GPUs, driver %s", len(info.GPUs), info.Driver)
}
