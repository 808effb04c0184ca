package gpu

import (
	"sync/atomic"
	"time"

	"github.com/fsdpc/fsdpc/ir"
)

// CountingDevice counts the calls made to a Device: each takes the
// device's mutex and makes its CUDA context current on the calling thread
// (cuda.Device), the CPU cost the issue model charges per operation. A benchmark and the run report read
// it per step.
type CountingDevice struct {
	Device
	calls atomic.Int64
}

// Counting wraps d.
func Counting(d Device) *CountingDevice { return &CountingDevice{Device: d} }

// Calls is how many calls have been made so far.
func (c *CountingDevice) Calls() int64 { return c.calls.Load() }

func (c *CountingDevice) Alloc(bytes int64) (Ptr, error) {
	c.calls.Add(1)
	return c.Device.Alloc(bytes)
}

func (c *CountingDevice) AllocHost(bytes int64) (Ptr, error) {
	c.calls.Add(1)
	return c.Device.AllocHost(bytes)
}

func (c *CountingDevice) Free(p Ptr) error {
	c.calls.Add(1)
	return c.Device.Free(p)
}

func (c *CountingDevice) MemInfo() (free, total int64, err error) {
	c.calls.Add(1)
	return c.Device.MemInfo()
}

func (c *CountingDevice) NewStream(priority int) (Stream, error) {
	c.calls.Add(1)
	return c.Device.NewStream(priority)
}

func (c *CountingDevice) NewSyncEvent() (Event, error) {
	c.calls.Add(1)
	return c.Device.NewSyncEvent()
}

func (c *CountingDevice) NewEvent() (Event, error) {
	c.calls.Add(1)
	return c.Device.NewEvent()
}

func (c *CountingDevice) Record(e Event, s Stream) error {
	c.calls.Add(1)
	return c.Device.Record(e, s)
}

func (c *CountingDevice) Wait(s Stream, e Event) error {
	c.calls.Add(1)
	return c.Device.Wait(s, e)
}

func (c *CountingDevice) SyncEvent(e Event) error {
	c.calls.Add(1)
	return c.Device.SyncEvent(e)
}

func (c *CountingDevice) Query(e Event) (bool, error) {
	c.calls.Add(1)
	return c.Device.Query(e)
}

func (c *CountingDevice) Elapsed(from, to Event) (time.Duration, error) {
	c.calls.Add(1)
	return c.Device.Elapsed(from, to)
}

func (c *CountingDevice) Copy(dst, src Ptr, bytes int64, s Stream) error {
	c.calls.Add(1)
	return c.Device.Copy(dst, src, bytes, s)
}

func (c *CountingDevice) Memset(dst Ptr, value byte, bytes int64, s Stream) error {
	c.calls.Add(1)
	return c.Device.Memset(dst, value, bytes, s)
}

func (c *CountingDevice) Upload(dst Ptr, data []byte, s Stream) error {
	c.calls.Add(1)
	return c.Device.Upload(dst, data, s)
}

func (c *CountingDevice) Download(dst []byte, src Ptr) error {
	c.calls.Add(1)
	return c.Device.Download(dst, src)
}

func (c *CountingDevice) Cast(dst Ptr, dt ir.DType, src Ptr, st ir.DType, n int64, s Stream) error {
	c.calls.Add(1)
	return c.Device.Cast(dst, dt, src, st, n, s)
}

func (c *CountingDevice) Reduce(dst Ptr, srcs []Ptr, n int64, dt ir.DType, scale float32, s Stream) error {
	c.calls.Add(1)
	return c.Device.Reduce(dst, srcs, n, dt, scale, s)
}

func (c *CountingDevice) Divide(p Ptr, dt ir.DType, n int64, f float64, s Stream) error {
	c.calls.Add(1)
	return c.Device.Divide(p, dt, n, f, s)
}

func (c *CountingDevice) Add(dst Ptr, dt ir.DType, src Ptr, st ir.DType, n int64, s Stream) error {
	c.calls.Add(1)
	return c.Device.Add(dst, dt, src, st, n, s)
}

func (c *CountingDevice) Fill(p Ptr, dt ir.DType, n int64, seed uint64, s Stream) error {
	c.calls.Add(1)
	return c.Device.Fill(p, dt, n, seed, s)
}

func (c *CountingDevice) Spin(d time.Duration, s Stream) error {
	c.calls.Add(1)
	return c.Device.Spin(d, s)
}

func (c *CountingDevice) Burn(flops float64, s Stream) error {
	c.calls.Add(1)
	return c.Device.Burn(flops, s)
}

func (c *CountingDevice) PacedCopy(dst, src Ptr, bytes int64, bytesPerSecond float64, s Stream) error {
	c.calls.Add(1)
	return c.Device.PacedCopy(dst, src, bytes, bytesPerSecond, s)
}

func (c *CountingDevice) BeginCapture(s Stream) error {
	c.calls.Add(1)
	return c.Device.BeginCapture(s)
}

func (c *CountingDevice) EndCapture(s Stream) (Graph, error) {
	c.calls.Add(1)
	return c.Device.EndCapture(s)
}

func (c *CountingDevice) LaunchGraph(g Graph, s Stream) error {
	c.calls.Add(1)
	return c.Device.LaunchGraph(g, s)
}

func (c *CountingDevice) Moves(dst, src Ptr, runs []Run, s Stream) error {
	c.calls.Add(1)
	return c.Device.Moves(dst, src, runs, s)
}
