//go:build !cuda

package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/cuda/devices"
	"github.com/fsdpc/fsdpc/executor/gpu"
)

// memInfo stands in for NVML: the CPU device's MemInfo, all of it this
// process's.
type memInfo struct{ dev gpu.Device }

func (m memInfo) Sample() (gpu.MemorySample, error) {
	free, total, err := m.dev.MemInfo()
	return gpu.MemorySample{Used: total - free, Total: total, Process: total - free, HasProcess: true}, err
}

// TestWorkerMemory: the report has NVML's figures when the platform
// samples, and says why not when it cannot (stderr says it once); NVML is
// shut down after the run.
func TestWorkerMemory(t *testing.T) {
	bin := planFile(t, "gpt2-124m")
	cases := []struct {
		name   string
		memory func(gpu.Device) (gpu.MemorySampler, func() error, error)
		out    []string
		errOut string // "" : nothing about NVML on stderr
	}{
		{"sampled", func(d gpu.Device) (gpu.MemorySampler, func() error, error) { return memInfo{d}, nil, nil },
			[]string{"NVML peak − at open", "NVML peak, this process", "samples every 2ms: device peak"}, ""},
		{"no driver", func(gpu.Device) (gpu.MemorySampler, func() error, error) {
			return nil, nil, fmt.Errorf("GPU 00000000:65:00.0: %w", devices.ErrNoDriver)
		}, []string{"NVML: not sampled (no driver)"}, "fsdpc-cuda: NVML memory sampling off: GPU 00000000:65:00.0: no NVIDIA driver"},
		{"no such GPU", func(gpu.Device) (gpu.MemorySampler, func() error, error) {
			return nil, nil, fmt.Errorf(`nvmlDeviceGetHandleByPciBusId("00000000:65:00.0"): Not Found`)
		}, []string{`NVML: not sampled (nvmlDeviceGetHandleByPciBusId("00000000:65:00.0"): Not Found)`}, "NVML memory sampling off: nvmlDeviceGetHandleByPciBusId"},
		// This machine's NVML, at a bus id no GPU has: off either way.
		{"this machine", func(gpu.Device) (gpu.MemorySampler, func() error, error) { return nvmlMemory("0000ffff:ff:1f.0") },
			[]string{"NVML: not sampled ("}, "fsdpc-cuda: NVML memory sampling off: GPU 0000ffff:ff:1f.0: "},
		{"no NVML", nil, []string{"NVML: not sampled (no NVML on this platform)"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			plat := cpu
			closed := 0
			if c.memory != nil {
				plat.memory = func(d gpu.Device) (gpu.MemorySampler, func() error, error) {
					s, _, err := c.memory(d)
					return s, func() error { closed++; return nil }, err
				}
			}
			code, out, errOut := runWorker(t, plat, nil, "--virtual", "--scale=16", "--steps=2", "--calibrate-bytes=1MiB", bin)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			for _, want := range c.out {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if c.errOut == "" && strings.Contains(errOut, "NVML") || !strings.Contains(errOut, c.errOut) {
				t.Errorf("stderr, want %q:\n%s", c.errOut, errOut)
			}
			if n := strings.Count(errOut, "NVML"); n > 1 {
				t.Errorf("stderr mentions NVML %d times:\n%s", n, errOut)
			}
			if wantClosed := c.name == "sampled"; (closed == 1) != wantClosed {
				t.Errorf("NVML shut down %d times", closed)
			}
		})
	}
}
