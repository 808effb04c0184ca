// Package cuda is fsdpc's CUDA execution: it implements executor/gpu's
// Device on a real GPU through the driver API (gorgonia.org/cu plus a few
// cgo calls), and gpu.Comm over NCCL loaded at run time. All of fsdpc's
// cgo lives under cuda/.
//
// The implementation builds only with the cuda build tag, into the
// fsdpc-cuda worker, because gorgonia.org/cu calls cuInit in its init and
// exits the process when no GPU is present. Without the tag the package
// holds what needs no GPU: the kernels' names and dtype codes
// (kernelspec.go), the moves kernel's table encoding (movetable.go), and
// the tests that hold the committed kernels.ptx to kernels.cu and to
// them and run every zoo rehearsal's moves through the encoding, which
// run in CI.
//
// With the tag:
//
//   - kernels.cu: the CUDA C kernels (cast, reduce, divide, add,
//     fill_pattern, spin, burn, paced_copy, moves), bit-exact with the host's
//     arithmetic; kernels.ptx is generated from it by `go generate ./cuda`
//     and embedded (kernels.go), and the driver compiles it at load.
//   - device.go: Open and Count; a Device runs each call on the caller's
//     thread, locked for the call, with its primary context made current
//     there and its mutex held.
//   - memory.go: allocation with accounting (Stats), copies, memset.
//   - stream.go: streams with priorities, events and their timing.
//   - kernels.go: the kernel launches, sized by the device's SM count.
//   - graph.go: stream capture and graph replay.
//   - driver.go: the driver calls cu does not wrap, and its raw handles.
//   - nccl.go, nccllib.go: the NCCL communicator, and NCCL's dlopen'd
//     entry points ($FSDPC_NCCL or an argument overrides libnccl.so.2).
//   - driverinit (imported by device.go): calls cuInit before cu's init
//     does, and when it fails says why on stderr and exits 1, where cu
//     would print a bare error name to stdout.
//   - device_test.go: the kernels against the host's arithmetic, copies,
//     stand-ins and capture, on a real GPU (go test -tags cuda ./cuda).
//
// cuda/devices discovers GPUs through NVML, which it loads at run time,
// so the fsdpc binary builds and runs without a driver.
package cuda
