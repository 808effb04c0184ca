// Package cuda will hold all of fsdpc's cgo: the CUDA driver through
// gorgonia.org/cu, PTX kernels and NCCL loaded at run time. It builds only
// with the cuda build tag, into the fsdpc-cuda worker, because
// gorgonia.org/cu exits the process in its init when no GPU is present.
//
// Nothing is implemented here yet (issue "CUDA executor").
package cuda
