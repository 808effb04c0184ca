//go:build cuda

package main

import (
	"fmt"

	"time"

	"github.com/fsdpc/fsdpc/cuda"
	"github.com/fsdpc/fsdpc/executor/gpu"
)

// native is the CUDA driver and NCCL.
var native = platform{
	built: true,
	open: func(ordinal int) (gpu.Device, error) {
		return cuda.Open(ordinal)
	},
	count: cuda.Count,
	uniqueID: func(lib string) ([128]byte, error) {
		return cuda.UniqueID(lib)
	},
	comm: func(dev gpu.Device, lib string, id [128]byte, n, rank int, timeout time.Duration) (gpu.Comm, error) {
		return cuda.NewComm(dev.(*cuda.Device), lib, id, n, rank, timeout)
	},
	// NVML finds the GPU by its bus id: its indexes ignore
	// CUDA_VISIBLE_DEVICES, so the ordinal could name another board.
	memory: func(dev gpu.Device) (gpu.MemorySampler, func() error, error) {
		d, ok := dev.(*cuda.Device)
		if !ok {
			return nil, nil, fmt.Errorf("%T is not a CUDA device", dev)
		}
		id, err := d.PCIBusID()
		if err != nil {
			return nil, nil, err
		}
		return nvmlMemory(id)
	},
}
