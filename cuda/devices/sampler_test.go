//go:build cgo

package devices

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

const GiB = 1 << 30

// fakeNVML is go-nvml's mock with one GPU at bus id 00000000:65:00.0
// (UUID GPU-1234), counting Init and Shutdown.
type fakeNVML struct {
	init, shutdown int
	initRet        nvml.Return
	hasV2          bool
	lib            *mock.Interface
}

func newFake(dev *mock.Device) *fakeNVML {
	f := &fakeNVML{initRet: nvml.SUCCESS, hasV2: true}
	f.lib = &mock.Interface{
		InitFunc: func() nvml.Return {
			f.init++
			return f.initRet
		},
		ShutdownFunc: func() nvml.Return { f.shutdown++; return nvml.SUCCESS },
		DeviceGetHandleByPciBusIdFunc: func(id string) (nvml.Device, nvml.Return) {
			if id != "00000000:65:00.0" {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return dev, nvml.SUCCESS
		},
		DeviceGetHandleByUUIDFunc: func(id string) (nvml.Device, nvml.Return) {
			if id != "GPU-1234" {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return dev, nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
				if name == "nvmlDeviceGetMemoryInfo_v2" && f.hasV2 {
					return nil
				}
				return errors.New("undefined symbol " + name)
			}}
		},
	}
	return f
}

// gpu answers the memory calls: 80 GiB, 20 GiB free, 1 GiB of the used
// reserved; v2 and the process list fail with the given returns.
func gpu(v2Ret, procRet nvml.Return, procs ...nvml.ProcessInfo) *mock.Device {
	return &mock.Device{
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 80 * GiB, Free: 20 * GiB, Used: 60 * GiB}, nvml.SUCCESS
		},
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 80 * GiB, Free: 20 * GiB, Used: 59 * GiB, Reserved: 1 * GiB}, v2Ret
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return procs, procRet
		},
	}
}

func TestSampler(t *testing.T) {
	const pid = 4242
	mine := nvml.ProcessInfo{Pid: pid, UsedGpuMemory: 7 * GiB}
	other := nvml.ProcessInfo{Pid: 1, UsedGpuMemory: 50 * GiB}
	cases := []struct {
		name     string
		id       string
		dev      *mock.Device
		noV2     bool
		want     MemorySample
		askAgain bool // the process list is still asked for after a sample
	}{
		{"by bus id, v2, this process listed", "00000000:65:00.0", gpu(nvml.SUCCESS, nvml.SUCCESS, other, mine),
			false, MemorySample{Total: 80 * GiB, Used: 60 * GiB, Reserved: GiB, Process: 7 * GiB, HasProcess: true}, true},
		{"by UUID", "GPU-1234", gpu(nvml.SUCCESS, nvml.SUCCESS, mine),
			false, MemorySample{Total: 80 * GiB, Used: 60 * GiB, Reserved: GiB, Process: 7 * GiB, HasProcess: true}, true},
		{"no v2 symbol", "00000000:65:00.0", gpu(nvml.SUCCESS, nvml.SUCCESS, mine),
			true, MemorySample{Total: 80 * GiB, Used: 60 * GiB, Process: 7 * GiB, HasProcess: true}, true},
		{"v2 refused", "00000000:65:00.0", gpu(nvml.ERROR_ARGUMENT_VERSION_MISMATCH, nvml.SUCCESS),
			false, MemorySample{Total: 80 * GiB, Used: 60 * GiB}, true},
		{"not listed (a container's PID namespace)", "00000000:65:00.0", gpu(nvml.SUCCESS, nvml.SUCCESS, other),
			false, MemorySample{Total: 80 * GiB, Used: 60 * GiB, Reserved: GiB}, true},
		{"usage not available", "00000000:65:00.0", gpu(nvml.SUCCESS, nvml.SUCCESS, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: ^uint64(0)}),
			false, MemorySample{Total: 80 * GiB, Used: 60 * GiB, Reserved: GiB}, true},
		{"no permission to list", "00000000:65:00.0", gpu(nvml.SUCCESS, nvml.ERROR_NO_PERMISSION),
			false, MemorySample{Total: 80 * GiB, Used: 60 * GiB, Reserved: GiB}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(c.dev)
			f.hasV2 = !c.noV2
			s, err := openSampler(f.lib, c.id, pid)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				got, err := s.Sample()
				if err != nil || got != c.want {
					t.Fatalf("sample %d: %+v, %v\nwant %+v", i, got, err, c.want)
				}
			}
			if n := len(c.dev.GetComputeRunningProcessesCalls()); (n == 2) != c.askAgain {
				t.Errorf("the process list was asked for %d times", n)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil || f.init != 1 || f.shutdown != 1 {
				t.Errorf("second close: %v; %d inits, %d shutdowns", err, f.init, f.shutdown)
			}
			if _, err := s.Sample(); err == nil || !strings.Contains(err.Error(), "closed") {
				t.Errorf("a sample after Close: %v", err)
			}
		})
	}
}

func TestSamplerErrors(t *testing.T) {
	failing := gpu(nvml.SUCCESS, nvml.SUCCESS)
	failing.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	cases := []struct {
		name      string
		id        string
		initRet   nvml.Return
		dev       *mock.Device
		noV2      bool
		open      string // the error of openSampler, "" for none
		sample    string // the error of Sample
		shutdowns int    // after a failed open
	}{
		{"no driver", "00000000:65:00.0", nvml.ERROR_LIBRARY_NOT_FOUND, nil, false, ErrNoDriver.Error(), "", 0},
		{"no driver loaded", "00000000:65:00.0", nvml.ERROR_DRIVER_NOT_LOADED, nil, false, "nvmlInit: ", "", 0},
		{"init fails", "00000000:65:00.0", nvml.ERROR_UNKNOWN, nil, false, "nvmlInit: ", "", 0},
		{"no such bus id", "00000000:17:00.0", nvml.SUCCESS, nil, false, `nvmlDeviceGetHandleByPciBusId("00000000:17:00.0"): `, "", 1},
		{"no such UUID", "GPU-9", nvml.SUCCESS, nil, false, `nvmlDeviceGetHandleByUUID("GPU-9"): `, "", 1},
		{"the GPU is lost", "00000000:65:00.0", nvml.SUCCESS, failing, true, "", "nvmlDeviceGetMemoryInfo(00000000:65:00.0): ", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(c.dev)
			f.initRet, f.hasV2 = c.initRet, !c.noV2
			s, err := openSampler(f.lib, c.id, 1)
			if c.open != "" {
				if err == nil || !strings.Contains(err.Error(), c.open) {
					t.Fatalf("open: %v, want %q", err, c.open)
				}
				noDriver := c.initRet == nvml.ERROR_LIBRARY_NOT_FOUND || c.initRet == nvml.ERROR_DRIVER_NOT_LOADED
				if errors.Is(err, ErrNoDriver) != noDriver {
					t.Errorf("open: %v: ErrNoDriver %v, want %v", err, errors.Is(err, ErrNoDriver), noDriver)
				}
				if f.shutdown != c.shutdowns {
					t.Errorf("%d shutdowns after a failed open", f.shutdown)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Sample(); err == nil || !strings.Contains(err.Error(), c.sample) {
				t.Errorf("sample: %v, want %q", err, c.sample)
			}
		})
	}
}

// TestOpenSamplerHere runs against whatever this machine has: without a
// driver ErrNoDriver, with one a bus id no GPU has is not found.
func TestOpenSamplerHere(t *testing.T) {
	s, err := OpenSampler("0000ffff:ff:1f.0")
	if err == nil {
		s.Close()
		t.Fatal("a GPU at 0000ffff:ff:1f.0")
	}
	if !errors.Is(err, ErrNoDriver) && !strings.Contains(err.Error(), "nvmlDeviceGetHandleByPciBusId") {
		t.Errorf("%v: neither ErrNoDriver nor naming the NVML call", err)
	}
}

// TestListSaysNoDriver: on a machine without a working NVIDIA driver
// (libnvidia-ml missing, or present with no kernel driver loaded, as in a
// container with the CUDA libraries), List reports ErrNoDriver, which the
// CLI turns into a plain sentence; on a machine with GPUs it lists them.
func TestListSaysNoDriver(t *testing.T) {
	info, err := List()
	if err == nil {
		if len(info.GPUs) == 0 && info.Driver == "" {
			t.Errorf("List: no error, but no driver version either")
		}
		return
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Errorf("List: %v: want ErrNoDriver when NVML cannot reach a driver", err)
	}
}
