//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	// Before cu's init, which exits on a machine without a usable GPU
	// with no word of why, driverinit's explains and exits (its doc says
	// why it runs first). Imported here, where cu is, so every binary
	// linking cu through this package has it.
	_ "github.com/fsdpc/fsdpc/cuda/driverinit"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"gorgonia.org/cu"
)

// ErrClosed is returned by every method of a closed Device.
var ErrClosed = errors.New("cuda: device is closed")

var _ gpu.Device = (*Device)(nil)

// Device is one GPU, driven through its primary context (the one the CUDA
// runtime, and so NCCL, uses too; memory of another context would not be
// addressable there). A CUDA context is current on an OS thread, and Go
// moves goroutines between threads, so each method locks its goroutine to
// its thread for the call, makes the context current there, restores
// what was current after, and holds the device's mutex meanwhile: the
// calls are serialised, as if one thread owned the context, and safe from
// any goroutine. (An owner goroutine that ran each call as a closure cost
// two thread hand-offs per call: 23.3 µs to issue a launch on an H200
// machine against 4.59 µs this way, fsdpc-cuda bench's kernel launch line
// in docs/cuda.md's acceptance table.) The one exception is SyncEvent,
// which blocks and so waits outside the mutex (see there).
type Device struct {
	// Read-only after Open.
	ordinal         int
	name            string
	ctx             cu.CUContext
	least, greatest int

	mu     sync.Mutex // held by every call; guards closed and st
	closed bool
	st     *state

	statsMu sync.Mutex
	stats   Stats
}

// state is what the calls share, under Device.mu.
type state struct {
	dev             cu.Device
	ctx             cu.CUContext
	sms             int             // streaming multiprocessors
	resident        [numKernels]int // blocks of threadsPerBlock the device holds at once, per kernel
	threadsPerSM    int
	least, greatest int // stream priorities: least urgent, most urgent
	mod             cu.Module
	fns             [numKernels]cu.Function
	streams         []cu.Stream
	events          []cu.Event
	graphs          []graphExec
	allocs          map[gpu.Ptr]allocation
	tables          map[string]deviceTable // the moves kernel's tables, by content
	name            string
	major, minor    int
	totalMem        int64
}

// Count is the number of CUDA devices the driver sees.
func Count() (int, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("cuda: cuDeviceGetCount: %w", err)
	}
	return n, nil
}

// Open retains device ordinal's primary context and loads the kernels.
func Open(ordinal int) (*Device, error) {
	d := &Device{
		ordinal: ordinal,
		st:      &state{allocs: make(map[gpu.Ptr]allocation)},
	}
	st := d.st
	err := onThread(func() error {
		if err := st.open(ordinal); err != nil {
			return errors.Join(err, st.release())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// What never changes is copied out of the state, so these are read
	// without the mutex.
	d.ctx, d.least, d.greatest = st.ctx, st.least, st.greatest
	d.name = fmt.Sprintf("%s, sm_%d%d, %d SMs, %.1f GiB", st.name, st.major, st.minor, st.sms, float64(st.totalMem)/(1<<30))
	return d, nil
}

// onThread runs f with the calling goroutine locked to its thread and
// restores the thread's current context afterwards: the thread goes back
// to Go's pool, and a context left current there would outlive Close.
func onThread(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := cu.CurrentContext()
	if err != nil {
		return fmt.Errorf("cuda: cuCtxGetCurrent: %w", err)
	}
	err = f()
	if cur, _ := cu.CurrentContext(); cur != prev {
		if e := cu.SetCurrentContext(prev); e != nil && err == nil {
			err = fmt.Errorf("cuda: cuCtxSetCurrent back to the thread's context: %w", e)
		}
	}
	return err
}

func (st *state) open(ordinal int) error {
	var err error
	if st.dev, err = cu.GetDevice(ordinal); err != nil {
		return fmt.Errorf("cuda: cuDeviceGet %d: %w", ordinal, err)
	}
	if st.ctx, err = st.dev.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("cuda: cuDevicePrimaryCtxRetain on device %d: %w", ordinal, err)
	}
	if err := cu.SetCurrentContext(st.ctx); err != nil {
		return fmt.Errorf("cuda: cuCtxSetCurrent on device %d: %w", ordinal, err)
	}
	attrs, err := st.dev.Attributes(cu.MultiprocessorCount, cu.MaxThreadsPerMultiprocessor,
		cu.ComputeCapabilityMajor, cu.ComputeCapabilityMinor, cu.UnifiedAddressing)
	if err != nil {
		return fmt.Errorf("cuda: cuDeviceGetAttribute on device %d: %w", ordinal, err)
	}
	st.sms, st.threadsPerSM, st.major, st.minor = attrs[0], attrs[1], attrs[2], attrs[3]
	// gpu.Ptr is one address space for device and pinned host memory.
	if attrs[4] != 1 {
		return fmt.Errorf("cuda: device %d has no unified addressing, which the backend needs", ordinal)
	}
	if st.name, err = st.dev.Name(); err != nil {
		return fmt.Errorf("cuda: cuDeviceGetName %d: %w", ordinal, err)
	}
	if st.totalMem, err = st.dev.TotalMem(); err != nil {
		return fmt.Errorf("cuda: cuDeviceTotalMem on device %d: %w", ordinal, err)
	}
	if st.least, st.greatest, err = cu.StreamPriorityRange(); err != nil {
		return fmt.Errorf("cuda: cuCtxGetStreamPriorityRange: %w", err)
	}
	return st.loadKernels()
}

// do runs f on the calling thread with the device's context current and
// the device's mutex held, and returns its error.
func (d *Device) do(f func(st *state) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return onThread(func() error {
		if err := cu.SetCurrentContext(d.ctx); err != nil {
			return fmt.Errorf("cuda: cuCtxSetCurrent on device %d: %w", d.ordinal, err)
		}
		return f(d.st)
	})
}

// Name describes the device: "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB".
func (d *Device) Name() string { return d.name }

// Ordinal is the device's index among the driver's devices.
func (d *Device) Ordinal() int { return d.ordinal }

// Close waits for the device's work, then frees every graph, stream,
// event and allocation, unloads the kernels and releases the primary
// context. Close NCCL communicators first: they use the context. Calls
// after Close return ErrClosed; a second Close returns nil.
func (d *Device) Close() error {
	err := d.do(func(st *state) error {
		d.closed = true
		var errs []error
		if err := cu.Synchronize(); err != nil {
			errs = append(errs, fmt.Errorf("cuda: cuCtxSynchronize: %w", err))
		}
		errs = append(errs, st.release())
		return errors.Join(errs...)
	})
	if err == ErrClosed {
		return nil
	}
	return err
}

// release frees what open and the methods made, in dependency order.
func (st *state) release() error {
	var errs []error
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("cuda: %s: %w", what, err))
		}
	}
	for _, g := range st.graphs {
		note("cuGraphExecDestroy", g.destroy())
	}
	st.graphs = nil
	for i := range st.streams {
		note("cuStreamDestroy", st.streams[i].Destroy())
	}
	st.streams = nil
	for i := range st.events {
		note("cuEventDestroy", cu.DestroyEvent(&st.events[i]))
	}
	st.events = nil
	for _, t := range st.tables {
		note("freeing a moves table", cu.MemFree(cu.DevicePtr(t.dev)))
	}
	clear(st.tables)
	for p, a := range st.allocs {
		note(fmt.Sprintf("freeing %#x", uint64(p)), a.free(p))
	}
	clear(st.allocs)
	if st.mod != (cu.Module{}) {
		note("cuModuleUnload", st.mod.Unload())
		st.mod = cu.Module{}
	}
	if st.ctx != (cu.CUContext{}) {
		note("cuDevicePrimaryCtxRelease", st.dev.ReleasePrimaryCtx())
		st.ctx = cu.CUContext{}
	}
	return errors.Join(errs...)
}
