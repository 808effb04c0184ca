package gputest

import (
	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/ir"
)

// Element encodings of the kernels' dtypes: the host backend's
// (executor.LoadElement and StoreElement), so the CPU device rounds
// exactly as the host reference does; storing a float64 rounds through
// float32, as the host does.

// kernelDType reports whether the arithmetic kernels handle dt.
func kernelDType(dt ir.DType) bool {
	return dt == ir.FP64 || dt == ir.FP32 || dt == ir.BF16 || dt == ir.FP16
}

// decode32 widens len(out) elements of dt to float32 (fp64 rounds to
// nearest even).
func decode32(dt ir.DType, b []byte, out []float32) {
	mustKernel("decode32", dt)
	for i := range out {
		out[i] = float32(executor.LoadElement(dt, b, int64(i)))
	}
}

// encode32 rounds the values to dt and stores them.
func encode32(dt ir.DType, in []float32, b []byte) {
	mustKernel("encode32", dt)
	for i, v := range in {
		executor.StoreElement(dt, b, int64(i), float64(v))
	}
}

// decode64 widens len(out) elements of dt to float64, exactly.
func decode64(dt ir.DType, b []byte, out []float64) {
	mustKernel("decode64", dt)
	for i := range out {
		out[i] = executor.LoadElement(dt, b, int64(i))
	}
}

// encode64 rounds the values to dt and stores them; to bf16 and fp16
// through float32, as the host backend does.
func encode64(dt ir.DType, in []float64, b []byte) {
	mustKernel("encode64", dt)
	for i, v := range in {
		executor.StoreElement(dt, b, int64(i), v)
	}
}

func mustKernel(what string, dt ir.DType) {
	if !kernelDType(dt) {
		panic("gputest: " + what + " of " + dt.String())
	}
}
