//go:build cuda

package main

import (
	"github.com/fsdpc/fsdpc/cuda"
	"github.com/fsdpc/fsdpc/executor/gpu"
)

// native is the CUDA driver and NCCL.
var native = platform{
	built: true,
	open: func(ordinal int) (gpu.Device, error) {
		return cuda.Open(ordinal)
	},
	uniqueID: func(lib string) ([128]byte, error) {
		return cuda.UniqueID(lib)
	},
	comm: func(dev gpu.Device, lib string, id [128]byte, n, rank int) (gpu.Comm, error) {
		return cuda.NewComm(dev.(*cuda.Device), lib, id, n, rank)
	},
}
