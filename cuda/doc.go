// Package cuda will hold fsdpc's CUDA execution: the driver through
// gorgonia.org/cu, PTX kernels and NCCL loaded at run time. It builds only
// with the cuda build tag, into the fsdpc-cuda worker, because
// gorgonia.org/cu exits the process in its init when no GPU is present.
// All of fsdpc's cgo lives under cuda/: cuda/devices discovers GPUs through
// NVML, which it loads at run time, so the fsdpc binary builds and runs
// without a driver.
//
// The executor itself is not built yet (issue "CUDA executor").
package cuda
