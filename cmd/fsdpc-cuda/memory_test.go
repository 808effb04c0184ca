//go:build !cuda

package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/cuda/devices"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
)

// memInfo stands in for NVML: the CPU device's MemInfo, all of it this
// process's.
type memInfo struct{ dev gpu.Device }

func (m memInfo) Sample() (gpu.MemorySample, error) {
	free, total, err := m.dev.MemInfo()
	return gpu.MemorySample{Used: total - free, Total: total, Process: total - free, HasProcess: true}, err
}

// TestWorkerMemory: the worker hands the backend NVML's sampler when the
// platform has one, and says why not when it cannot (stderr once, the
// reason in Options.MemoryOff for the report); NVML is shut down after
// the run. How the report prints each case is executor/gpu's
// TestMemorySampling; one whole run with a sampler is TestWorkerRehearsal.
func TestWorkerMemory(t *testing.T) {
	cases := []struct {
		name    string
		memory  func(gpu.Device) (gpu.MemorySampler, func() error, error)
		sampled bool
		off     string // Options.MemoryOff
		errOut  string // "" : nothing about NVML on stderr
	}{
		{"sampled", func(d gpu.Device) (gpu.MemorySampler, func() error, error) { return memInfo{d}, nil, nil },
			true, "", ""},
		{"no driver", func(gpu.Device) (gpu.MemorySampler, func() error, error) {
			return nil, nil, fmt.Errorf("GPU 00000000:65:00.0: %w", devices.ErrNoDriver)
		}, false, "no driver", "fsdpc-cuda: NVML memory sampling off: GPU 00000000:65:00.0: no NVIDIA driver"},
		{"no such GPU", func(gpu.Device) (gpu.MemorySampler, func() error, error) {
			return nil, nil, fmt.Errorf(`nvmlDeviceGetHandleByPciBusId("00000000:65:00.0"): Not Found`)
		}, false, `nvmlDeviceGetHandleByPciBusId("00000000:65:00.0"): Not Found`, "NVML memory sampling off: nvmlDeviceGetHandleByPciBusId"},
		// This machine's NVML, at a bus id no GPU has: off either way.
		{"this machine", func(gpu.Device) (gpu.MemorySampler, func() error, error) { return nvmlMemory("0000ffff:ff:1f.0") },
			false, "", "fsdpc-cuda: NVML memory sampling off: GPU 0000ffff:ff:1f.0: "},
		{"no NVML", nil, false, "no NVML on this platform", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plat := cpu
			closed := 0
			if c.memory != nil {
				plat.memory = func(d gpu.Device) (gpu.MemorySampler, func() error, error) {
					s, _, err := c.memory(d)
					return s, func() error { closed++; return nil }, err
				}
			}
			var opt gpu.Options
			var errOut strings.Builder
			stop := sampleMemory(&opt, gputest.New(), plat, &errOut)
			stop()
			if (opt.Memory != nil) != c.sampled {
				t.Errorf("sampler handed to the backend: %v, want %v", opt.Memory != nil, c.sampled)
			}
			if c.sampled && opt.MemoryOff != "" || !c.sampled && opt.MemoryOff == "" {
				t.Errorf("MemoryOff = %q with sampled=%v", opt.MemoryOff, c.sampled)
			}
			if c.off != "" && opt.MemoryOff != c.off {
				t.Errorf("MemoryOff = %q, want %q", opt.MemoryOff, c.off)
			}
			got := errOut.String()
			if c.errOut == "" && strings.Contains(got, "NVML") || !strings.Contains(got, c.errOut) {
				t.Errorf("stderr, want %q:\n%s", c.errOut, got)
			}
			if n := strings.Count(got, "NVML"); n > 1 {
				t.Errorf("stderr mentions NVML %d times:\n%s", n, got)
			}
			if (closed == 1) != c.sampled || closed > 1 {
				t.Errorf("NVML shut down %d times", closed)
			}
		})
	}
}
