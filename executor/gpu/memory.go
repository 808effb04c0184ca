package gpu

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/fsdpc/fsdpc/ir"
)

// Device memory as the driver sees it, sampled while the run goes on.
// cuMemGetInfo (Device.MemInfo) is read only when the backend opens and
// after the streams drain, and the caching allocator only knows its own
// blocks; a sampler (NVML in the worker: cuda/devices) sees the whole
// device between those two reads, including what NCCL and the CUDA
// context take and what other processes hold.

// MemorySampler reads a device's memory in use. Sample is called from one
// goroutine at a time.
type MemorySampler interface {
	Sample() (MemorySample, error)
}

// MemorySample is one reading.
type MemorySample struct {
	// Used is the device's memory in use by anyone (total − free), Total
	// its size, in bytes.
	Used, Total int64
	// Reserved is the part of Used the driver and firmware keep for
	// themselves (NVML's nvmlMemory_v2_t.reserved); 0 when unknown.
	Reserved int64
	// Process is this process's memory on the device, when HasProcess
	// (NVML lists it only where it can see the process: not from inside
	// a container's PID namespace, for one).
	Process    int64
	HasProcess bool
}

// DefaultMemoryInterval is the time between samples when
// Options.MemoryInterval is 0: short enough to see a step's peak on a
// plan scaled to a few milliseconds a step, long enough that NVML's calls
// (tens of microseconds) take no noticeable CPU from the ranks' issue.
const DefaultMemoryInterval = 2 * time.Millisecond

// MemoryFigures are the samples of a run, from Open to the end of Drain.
type MemoryFigures struct {
	Samples  int
	Interval time.Duration
	// Total is the device's size; Open the memory in use at the first
	// sample (when the backend opened); Peak the most in use at any
	// sample, and Reserved the driver's part of it (0: unknown).
	Total, Open, Peak, Reserved int64
	// Process is the most this process used at any sample, when
	// HasProcess.
	Process    int64
	HasProcess bool
	// Err is the first error; sampling stopped there, so the figures
	// cover the run only up to it.
	Err error
}

// memSampling is the backend's sampler goroutine.
type memSampling struct {
	s        MemorySampler
	interval time.Duration
	quit     chan struct{}
	done     chan struct{}

	mu      sync.Mutex // guards what follows, written by the goroutine
	fig     MemoryFigures
	stopped bool
}

// start takes a first sample at once, so that a run always has the
// baseline and at least one sample whatever the scheduler does, then
// samples every interval until stop.
func (m *memSampling) start(s MemorySampler, interval time.Duration) {
	if s == nil {
		return
	}
	if interval <= 0 {
		interval = DefaultMemoryInterval
	}
	m.s, m.interval = s, interval
	m.fig.Interval = interval
	m.quit, m.done = make(chan struct{}), make(chan struct{})
	if !m.take() {
		close(m.done)
		return
	}
	go m.run()
}

func (m *memSampling) run() {
	defer close(m.done)
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	for {
		select {
		case <-m.quit:
			return
		case <-tick.C:
			if !m.take() {
				return
			}
		}
	}
}

// take records one sample; false after an error.
func (m *memSampling) take() bool {
	x, err := m.s.Sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &m.fig
	if err != nil {
		f.Err = fmt.Errorf("sample %d: %w", f.Samples+1, err)
		return false
	}
	if f.Samples == 0 {
		f.Open = x.Used
	}
	f.Samples++
	f.Total = x.Total
	if x.Used > f.Peak || f.Samples == 1 {
		f.Peak, f.Reserved = x.Used, x.Reserved
	}
	if x.HasProcess && (!f.HasProcess || x.Process > f.Process) {
		f.Process, f.HasProcess = x.Process, true
	}
	return true
}

// stop ends the goroutine and takes a last sample, so that memory still
// held when the streams have drained is counted however short the run.
// Later calls do nothing; Drain and Close both call it.
func (m *memSampling) stop() {
	if m.s == nil {
		return
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	failed := m.fig.Err != nil
	m.mu.Unlock()
	close(m.quit)
	<-m.done
	if !failed {
		m.take()
	}
}

// figures returns a copy of the figures so far; nil without a sampler.
func (m *memSampling) figures() *MemoryFigures {
	if m.s == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fig
	return &f
}

// writeMemory prints the sampled memory after the table's memory rows.
func (x *Measurement) writeMemory(w io.Writer, row func(name string, got, want float64, unit func(float64) string)) {
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	pred := float64(x.Predicted.PeakMemory)
	row("allocator reserved", float64(x.AllocatorReserved), pred, mib)
	if x.AllocatorModel > 0 {
		row("  its exact-size policy", float64(x.AllocatorReserved), float64(x.AllocatorModel), mib)
	}
	f := x.Memory
	if f == nil {
		why := x.MemoryOff
		if why == "" {
			why = "no sampler"
		}
		fmt.Fprintf(w, "  NVML: not sampled (%s)\n", why)
		return
	}
	if f.Samples > 0 {
		row("NVML peak − at open", float64(f.Peak-f.Open), pred, mib)
		if f.HasProcess {
			row("NVML peak, this process", float64(f.Process), pred, mib)
		}
		reserved := ""
		if f.Reserved > 0 {
			reserved = fmt.Sprintf(", %s of it reserved by the driver", ir.FormatBytes(f.Reserved))
		}
		proc := "this process not in NVML's list"
		if f.HasProcess {
			proc = "this process at most " + ir.FormatBytes(f.Process)
		}
		fmt.Fprintf(w, "  NVML: %d samples every %v: device peak %s in use of %s (%s at open%s); %s\n",
			f.Samples, f.Interval, ir.FormatBytes(f.Peak), ir.FormatBytes(f.Total), ir.FormatBytes(f.Open), reserved, proc)
	}
	if f.Err != nil {
		fmt.Fprintf(w, "  NVML: sampling stopped after %d samples: %v\n", f.Samples, f.Err)
	}
}
