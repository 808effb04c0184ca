//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"gorgonia.org/cu"
)

// Stats is a device's allocation accounting, shaped like gputest's: what
// a run reports as measured memory next to the plan's prediction. Bytes
// are the bytes asked for, not the driver's rounded-up sizes.
type Stats struct {
	// LiveBytes and PeakBytes account device memory (Alloc),
	// LiveHostBytes and PeakHostBytes pinned host memory (AllocHost).
	LiveBytes, PeakBytes         int64
	LiveHostBytes, PeakHostBytes int64
	// Allocs and Frees count successful calls of either kind.
	Allocs, Frees int64
}

// Stats returns the allocation accounting so far.
func (d *Device) Stats() Stats {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	return d.stats
}

// ResetPeak sets both peaks to the live bytes, to measure one step's.
func (d *Device) ResetPeak() {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	d.stats.PeakBytes = d.stats.LiveBytes
	d.stats.PeakHostBytes = d.stats.LiveHostBytes
}

// account records an allocation (bytes > 0) or a free (bytes < 0).
func (d *Device) account(host bool, bytes int64) {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	st := &d.stats
	live, peak := &st.LiveBytes, &st.PeakBytes
	if host {
		live, peak = &st.LiveHostBytes, &st.PeakHostBytes
	}
	*live += bytes
	*peak = max(*peak, *live)
	if bytes > 0 {
		st.Allocs++
	} else {
		st.Frees++
	}
}

// allocation is one live block.
type allocation struct {
	bytes int64
	host  unsafe.Pointer // the pinned block's pointer; nil for device memory
}

func (a allocation) free(p gpu.Ptr) error {
	if a.host != nil {
		return freeHost(a.host)
	}
	return cu.MemFree(cu.DevicePtr(p))
}

// Alloc takes device memory; the size must be positive.
func (d *Device) Alloc(bytes int64) (gpu.Ptr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda: cuMemAlloc %d bytes: the size must be positive", bytes)
	}
	var p gpu.Ptr
	err := d.do(func(st *state) error {
		dp, err := cu.MemAlloc(bytes)
		if err != nil {
			free, total, _ := cu.MemInfo()
			return fmt.Errorf("cuda: cuMemAlloc %d bytes (%d of %d free): %w", bytes, free, total, err)
		}
		p = gpu.Ptr(dp)
		st.allocs[p] = allocation{bytes: bytes}
		d.account(false, bytes)
		return nil
	})
	return p, err
}

// AllocHost takes pinned host memory; the size must be positive. With
// unified addressing its host address is also its device address, so the
// Ptr serves copies and kernels alike.
func (d *Device) AllocHost(bytes int64) (gpu.Ptr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda: cuMemAllocHost %d bytes: the size must be positive", bytes)
	}
	var p gpu.Ptr
	err := d.do(func(st *state) error {
		hp, err := allocHost(bytes)
		if err != nil {
			return fmt.Errorf("cuda: cuMemAllocHost %d bytes: %w", bytes, err)
		}
		p = gpu.Ptr(uintptr(hp))
		st.allocs[p] = allocation{bytes: bytes, host: hp}
		d.account(true, bytes)
		return nil
	})
	return p, err
}

// Free returns a block Alloc or AllocHost made. Like cudaFree, the
// driver's free waits for work still using the memory.
func (d *Device) Free(p gpu.Ptr) error {
	return d.do(func(st *state) error {
		a, ok := st.allocs[p]
		if !ok {
			return fmt.Errorf("cuda: free of %#x, which is not a live allocation of device %d", uint64(p), d.ordinal)
		}
		if err := a.free(p); err != nil {
			what := "cuMemFree"
			if a.host != nil {
				what = "cuMemFreeHost"
			}
			return fmt.Errorf("cuda: %s %#x (%d bytes): %w", what, uint64(p), a.bytes, err)
		}
		delete(st.allocs, p)
		d.account(a.host != nil, -a.bytes)
		return nil
	})
}

// MemInfo is the device's free and total memory (cuMemGetInfo).
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.do(func(*state) error {
		var err error
		if free, total, err = cu.MemInfo(); err != nil {
			return fmt.Errorf("cuda: cuMemGetInfo: %w", err)
		}
		return nil
	})
	return free, total, err
}

// Copy copies bytes in s's order; cuMemcpyAsync infers the direction from
// the unified addresses.
func (d *Device) Copy(dst, src gpu.Ptr, bytes int64, s gpu.Stream) error {
	if bytes < 0 {
		return fmt.Errorf("cuda: cuMemcpyAsync %d bytes: negative size", bytes)
	}
	if bytes == 0 {
		return nil
	}
	return d.do(func(st *state) error {
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		return st.copy(dst, src, bytes, cs)
	})
}

func (st *state) copy(dst, src gpu.Ptr, bytes int64, cs cu.Stream) error {
	if err := cu.MemcpyAsync(cu.DevicePtr(dst), cu.DevicePtr(src), bytes, cs); err != nil {
		return fmt.Errorf("cuda: cuMemcpyAsync %d bytes %#x -> %#x: %w", bytes, uint64(src), uint64(dst), err)
	}
	return nil
}

// Memset sets bytes to value in s's order (cuMemsetD8Async: any
// alignment).
func (d *Device) Memset(dst gpu.Ptr, value byte, bytes int64, s gpu.Stream) error {
	if bytes < 0 {
		return fmt.Errorf("cuda: cuMemsetD8Async %d bytes: negative size", bytes)
	}
	if bytes == 0 {
		return nil
	}
	return d.do(func(st *state) error {
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		if err := cu.MemsetD8Async(cu.DevicePtr(dst), value, bytes, cs); err != nil {
			return fmt.Errorf("cuda: cuMemsetD8Async %d bytes at %#x: %w", bytes, uint64(dst), err)
		}
		return nil
	})
}

// Upload copies data to dst in s's order (cuMemcpyAsync). A synchronous
// cuMemcpy would run on the legacy default stream, which the backend's
// non-blocking streams are not ordered after, and from pageable memory
// it returns before the DMA has finished.
func (d *Device) Upload(dst gpu.Ptr, data []byte, s gpu.Stream) error {
	if len(data) == 0 {
		return nil
	}
	return d.do(func(st *state) error {
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		if err := memcpyToAsync(uint64(dst), data, cs); err != nil {
			return fmt.Errorf("cuda: cuMemcpyAsync %d bytes to %#x on stream %d: %w", len(data), uint64(dst), s, err)
		}
		return nil
	})
}

// Download copies len(dst) bytes from src synchronously, as Upload.
func (d *Device) Download(dst []byte, src gpu.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.do(func(*state) error {
		if err := memcpyFrom(dst, uint64(src)); err != nil {
			return fmt.Errorf("cuda: cuMemcpy %d bytes from %#x: %w", len(dst), uint64(src), err)
		}
		return nil
	})
}
