//go:build cuda

package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
	"gorgonia.org/cu"
)

// kernelsPTX is kernels.cu compiled by `go generate ./cuda`; the driver
// compiles it for the device when Open loads it.
//
//go:embed kernels.ptx
var kernelsPTX string

const (
	// threadsPerBlock suits every kernel: memory-bound loops want enough
	// warps per block to hide latency and nothing else.
	threadsPerBlock = 256
	// pacedBlockRate is what one paced_copy block is assumed to sustain,
	// in bytes per nanosecond (GB/s): a paced copy gets one block per this
	// much of its target rate, so a fast emulated link is not held back by
	// one block's bandwidth, and a slow one occupies a single SM.
	pacedBlockRate = 10.0
)

func (st *state) loadKernels() error {
	log := &cu.JITErrorLogBuffer{Buffer: make([]byte, 16<<10)}
	mod, err := cu.LoadDataEx(kernelsPTX, log)
	if err != nil {
		msg := strings.TrimSpace(strings.TrimRight(string(log.Buffer), "\x00"))
		if msg != "" {
			msg = "\n" + msg
		}
		return fmt.Errorf("cuda: cuModuleLoadDataEx kernels.ptx (PTX ISA 7.8 needs a driver for CUDA 11.8 or later): %w%s", err, msg)
	}
	st.mod = mod
	for k, name := range kernelNames {
		if st.fns[k], err = mod.Function(name); err != nil {
			return fmt.Errorf("cuda: cuModuleGetFunction %s: %w", name, err)
		}
		// The blocks an SM holds depend on the kernel's registers (ptxas:
		// cast and add use 40 on sm_90, so 6 blocks of 256 threads fit,
		// not the 8 the thread limit allows): a grid-stride loop's grid is
		// what the device holds at once, no more.
		perSM, err := occupancy(&st.fns[k], threadsPerBlock)
		if err != nil {
			return fmt.Errorf("cuda: cuOccupancyMaxActiveBlocksPerMultiprocessor %s: %w", name, err)
		}
		st.resident[k] = st.sms * max(perSM, 1)
	}
	return nil
}

// blocks is the grid of kernel k's grid-stride loop over n elements: one
// thread per element up to as many blocks as the device holds at once.
func (st *state) blocks(k kernel, n int64) int {
	return int(min((n+threadsPerBlock-1)/threadsPerBlock, int64(st.resident[k])))
}

// launch launches kernel k. Every argument is 8 bytes, as kernels.cu
// declares them, because cu's Launch copies 8 bytes per parameter.
func (st *state) launch(k kernel, grid, block int, cs cu.Stream, args ...uint64) error {
	params := make([]unsafe.Pointer, len(args))
	for i := range args {
		params[i] = unsafe.Pointer(&args[i])
	}
	if err := st.fns[k].Launch(grid, 1, 1, block, 1, 1, 0, cs, params); err != nil {
		return fmt.Errorf("cuda: cuLaunchKernel %s (%d blocks of %d): %w", kernelNames[k], grid, block, err)
	}
	return nil
}

// onStream runs f on the device (Device.do) with s's handle.
func (d *Device) onStream(s gpu.Stream, f func(st *state, cs cu.Stream) error) error {
	return d.do(func(st *state) error {
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		return f(st, cs)
	})
}

func kernelDType(op string, dt ir.DType) (int64, error) {
	c, ok := dtypeCode(dt)
	if !ok {
		return 0, fmt.Errorf("cuda: %s of %s: the kernels handle fp64, fp32, bf16 and fp16 only", op, dt)
	}
	return c, nil
}

func checkCount(op string, n int64) error {
	if n < 0 {
		return fmt.Errorf("cuda: %s of %d elements", op, n)
	}
	return nil
}

func f64bits(f float64) uint64 { return math.Float64bits(f) }

// Moves runs an op's runs as one launch of the moves kernel (kernels.cu),
// which reads a table of pieces in device memory. An op's runs are the
// same every step, so each distinct table is uploaded once, on its first
// use, and kept until Close: a step's launches, and a graph's replays,
// read tables that live as long as the device.
//
// The cache is shared by every stream (in a rehearsal every virtual rank
// has the same runs), so a table is written synchronously before it is
// published (uploadTable): a reader on any stream, at any later time, and
// a graph captured at any time find it written. An upload ordered on the
// first user's stream alone left the others reading bytes that stream had
// not written yet (issue 29, N1; gputest's Moves models the table).
func (d *Device) Moves(dst, src gpu.Ptr, runs []gpu.Run, s gpu.Stream) error {
	table, err := moveTable(runs)
	if err != nil || len(table) == 0 {
		return err
	}
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		t, ok := x.tables[string(table)]
		if !ok {
			var err error
			if t, err = x.uploadTable(table); err != nil {
				return fmt.Errorf("cuda: moves: %w", err)
			}
		}
		grid := int(min(t.pieces, int64(x.resident[kMoves])))
		return x.launch(kMoves, grid, threadsPerBlock, cs, uint64(dst), uint64(src), uint64(t.dev), uint64(t.pieces))
	})
}

// deviceTable is an uploaded moves table: its pieces in device memory.
type deviceTable struct {
	dev    gpu.Ptr
	pieces int64
}

// uploadTable copies table to new device memory and records it under its
// bytes. The copy is cuMemcpyHtoD from pinned memory, which returns when
// the bytes are on the device (CUDA's API synchronisation rules): it is
// ordered before every later launch on every stream, and, being on the
// legacy stream, which the backend's non-blocking streams never wait for,
// it is legal during a relaxed-mode capture and is not captured.
func (st *state) uploadTable(table []byte) (deviceTable, error) {
	n := int64(len(table))
	t := deviceTable{pieces: n / moveSize}
	host, err := allocHost(n)
	if err != nil {
		return t, fmt.Errorf("cuMemAllocHost %d bytes for a table of %d pieces: %w", n, t.pieces, err)
	}
	defer freeHost(host)
	copy(unsafe.Slice((*byte)(host), n), table)
	dp, err := cu.MemAlloc(n)
	if err != nil {
		return t, fmt.Errorf("cuMemAlloc %d bytes for a table of %d pieces: %w", n, t.pieces, err)
	}
	if err := cu.MemcpyHtoD(dp, host, n); err != nil {
		cu.MemFree(dp)
		return t, fmt.Errorf("cuMemcpyHtoD of a table of %d pieces: %w", t.pieces, err)
	}
	t.dev = gpu.Ptr(dp)
	if st.tables == nil {
		st.tables = make(map[string]deviceTable)
	}
	st.tables[string(table)] = t
	return t, nil
}

// Cast converts n elements, as gpu.Device.Cast specifies (kernels.cu,
// cast); the same dtype is a stream-ordered copy.
func (d *Device) Cast(dst gpu.Ptr, dt ir.DType, src gpu.Ptr, st ir.DType, n int64, s gpu.Stream) error {
	dc, err := kernelDType("cast", dt)
	if err != nil {
		return err
	}
	sc, err := kernelDType("cast", st)
	if err != nil {
		return err
	}
	if err := checkCount("cast", n); err != nil || n == 0 {
		return err
	}
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		if dt == st {
			return x.copy(dst, src, n*dt.Size(), cs)
		}
		return x.launch(kCast, x.blocks(kCast, n), threadsPerBlock, cs, uint64(dst), uint64(dc), uint64(src), uint64(sc), uint64(n))
	})
}

// Reduce sums srcs into dst, as gpu.Device.Reduce specifies (kernels.cu,
// reduce), with at most 64 sources.
func (d *Device) Reduce(dst gpu.Ptr, srcs []gpu.Ptr, n int64, dt ir.DType, scale float32, s gpu.Stream) error {
	c, err := kernelDType("reduce", dt)
	if err != nil {
		return err
	}
	if len(srcs) == 0 || len(srcs) > maxReduceSrcs {
		return fmt.Errorf("cuda: reduce of %d sources: the kernel takes 1 to %d", len(srcs), maxReduceSrcs)
	}
	if err := checkCount("reduce", n); err != nil || n == 0 {
		return err
	}
	ps := make([]uint64, len(srcs))
	for i, p := range srcs {
		ps[i] = uint64(p)
	}
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		if err := launchReduce(&x.fns[kReduce], x.blocks(kReduce, n), threadsPerBlock, cs, uint64(dst), ps, n, c, float64(scale)); err != nil {
			return fmt.Errorf("cuda: cuLaunchKernel reduce (%d sources, %d elements): %w", len(srcs), n, err)
		}
		return nil
	})
}

// Divide divides n elements in place by f, rounded to float32 unless the
// dtype is fp64 (kernels.cu, divide).
func (d *Device) Divide(p gpu.Ptr, dt ir.DType, n int64, f float64, s gpu.Stream) error {
	c, err := kernelDType("divide", dt)
	if err != nil {
		return err
	}
	if err := checkCount("divide", n); err != nil || n == 0 {
		return err
	}
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		return x.launch(kDivide, x.blocks(kDivide, n), threadsPerBlock, cs, uint64(p), uint64(c), uint64(n), f64bits(f))
	})
}

// Add adds src to dst in dst's op math (kernels.cu, add).
func (d *Device) Add(dst gpu.Ptr, dt ir.DType, src gpu.Ptr, st ir.DType, n int64, s gpu.Stream) error {
	dc, err := kernelDType("add", dt)
	if err != nil {
		return err
	}
	sc, err := kernelDType("add", st)
	if err != nil {
		return err
	}
	if err := checkCount("add", n); err != nil || n == 0 {
		return err
	}
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		return x.launch(kAdd, x.blocks(kAdd, n), threadsPerBlock, cs, uint64(dst), uint64(dc), uint64(src), uint64(sc), uint64(n))
	})
}

// Fill writes gpu.Pattern(seed, i) (kernels.cu, fill_pattern).
func (d *Device) Fill(p gpu.Ptr, dt ir.DType, n int64, seed uint64, s gpu.Stream) error {
	c, err := kernelDType("fill", dt)
	if err != nil {
		return err
	}
	if err := checkCount("fill", n); err != nil || n == 0 {
		return err
	}
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		return x.launch(kFillPattern, x.blocks(kFillPattern, n), threadsPerBlock, cs, uint64(p), uint64(c), uint64(n), seed)
	})
}

// Spin occupies one SM (a one-thread block) for dur of the device's
// global timer. A zero or negative dur still launches the kernel, which
// then returns at once: the cost of a launch, which calibration measures.
func (d *Device) Spin(dur time.Duration, s gpu.Stream) error {
	ns := max(dur.Nanoseconds(), 0)
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		return x.launch(kSpin, 1, 1, cs, uint64(ns))
	})
}

// Burn runs flops/2 fused multiply-adds (an FMA is two flops, the
// convention of a matmul's 2·m·n·k) over every thread the device holds at
// once, rounded up to whole rounds of 8 per thread.
func (d *Device) Burn(flops float64, s gpu.Stream) error {
	if math.IsNaN(flops) || math.IsInf(flops, 0) || flops < 0 {
		return fmt.Errorf("cuda: burn of %v flops", flops)
	}
	if flops == 0 {
		return nil
	}
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		grid := x.resident[kBurn]
		perThread := flops / 2 / float64(grid*threadsPerBlock)
		iters := uint64(max(math.Ceil(perThread/8), 1))
		return x.launch(kBurn, grid, threadsPerBlock, cs, iters)
	})
}

// PacedCopy copies bytes no faster than bytesPerSecond (kernels.cu,
// paced_copy); an infinite rate is a plain Copy.
func (d *Device) PacedCopy(dst, src gpu.Ptr, bytes int64, bytesPerSecond float64, s gpu.Stream) error {
	if !(bytesPerSecond > 0) {
		return fmt.Errorf("cuda: paced copy at %v bytes/s", bytesPerSecond)
	}
	if bytes < 0 {
		return fmt.Errorf("cuda: paced copy of %d bytes", bytes)
	}
	if bytes == 0 {
		return nil
	}
	if math.IsInf(bytesPerSecond, 1) {
		return d.Copy(dst, src, bytes, s)
	}
	perNs := bytesPerSecond / 1e9
	return d.onStream(s, func(x *state, cs cu.Stream) error {
		grid := int(min(math.Ceil(perNs/pacedBlockRate), float64(x.sms)))
		grid = max(grid, 1)
		return x.launch(kPacedCopy, grid, threadsPerBlock, cs, uint64(dst), uint64(src), uint64(bytes), f64bits(perNs))
	})
}
