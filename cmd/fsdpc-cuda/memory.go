package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/cuda/devices"
	"github.com/fsdpc/fsdpc/executor/gpu"
)

// sampleMemory gives the backend the platform's NVML sampler for dev, so
// that the report has the device's memory over the whole run next to
// cuMemGetInfo's two readings. Without one the run goes on, and the
// report says why. The returned func shuts NVML down after the run.
func sampleMemory(opt *gpu.Options, dev gpu.Device, plat platform, stderr io.Writer) func() {
	if plat.memory == nil {
		opt.MemoryOff = "no NVML on this platform"
		return func() {}
	}
	s, closeNVML, err := plat.memory(dev)
	if err != nil {
		fmt.Fprintf(stderr, "fsdpc-cuda: NVML memory sampling off: %v\n", err)
		opt.MemoryOff = err.Error()
		if errors.Is(err, devices.ErrNoDriver) {
			opt.MemoryOff = "no driver"
		}
		return func() {}
	}
	opt.Memory = s
	return func() {
		if err := closeNVML(); err != nil {
			fmt.Fprintf(stderr, "fsdpc-cuda: NVML: %v\n", err)
		}
	}
}

// nvmlMemory samples the GPU at PCI bus id busID through NVML.
func nvmlMemory(busID string) (gpu.MemorySampler, func() error, error) {
	s, err := devices.OpenSampler(busID)
	if err != nil {
		return nil, nil, fmt.Errorf("GPU %s: %w", busID, err)
	}
	return nvmlSampler{s}, s.Close, nil
}

// nvmlSampler is a devices.Sampler as the backend's MemorySampler.
type nvmlSampler struct{ s *devices.Sampler }

func (n nvmlSampler) Sample() (gpu.MemorySample, error) {
	x, err := n.s.Sample()
	if err != nil {
		return gpu.MemorySample{}, err
	}
	return gpu.MemorySample{Used: int64(x.Used), Total: int64(x.Total), Reserved: int64(x.Reserved),
		Process: int64(x.Process), HasProcess: x.HasProcess}, nil
}
