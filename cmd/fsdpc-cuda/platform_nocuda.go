//go:build !cuda

package main

import (
	"errors"

	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
)

var errNotBuilt = errors.New("this fsdpc-cuda was built without CUDA: rebuild it with\n  go build -tags cuda -o fsdpc-cuda ./cmd/fsdpc-cuda\non a machine with the CUDA headers and libcuda (Debian non-free: nvidia-cuda-dev; see .ci/install-cuda)")

var native = platform{
	open:     func(int) (gpu.Device, error) { return nil, errNotBuilt },
	count:    func() (int, error) { return 0, errNotBuilt },
	uniqueID: func(string) ([128]byte, error) { return [128]byte{}, errNotBuilt },
	comm: func(gpu.Device, string, [128]byte, int, int, time.Duration) (gpu.Comm, error) {
		return nil, errNotBuilt
	},
}
