package hardware

// Device memory a training process holds outside PyTorch's caching
// allocator, so outside what the plan's reserved peak counts. The CUDA
// context is about 300 MB with lazy module loading (CUDA 11.7 and later;
// pytorch/pytorch#107667), rounded up here for the kernels a training
// step loads (cuBLAS, NCCL, attention). NCCL allocates its own buffers
// per communicator: NCCL_BUFFSIZE, 4 MiB by default, for each channel and
// direction of a ring connection, and LL/LL128 buffers beside it; 256 MiB
// stands for 16 channels × 2 directions × 8 MiB.
const (
	CUDAContextBytes         = 512 * mib
	NCCLBytesPerCommunicator = 256 * mib
)
