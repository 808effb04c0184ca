package gputest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
)

// Errors the device wraps, as errors.Is finds them.
var (
	// ErrOutOfMemory: an Alloc beyond the capacity (CUDA_ERROR_OUT_OF_MEMORY).
	ErrOutOfMemory = errors.New("out of memory")
	// ErrInvalidAddress: an access or Free outside a live allocation
	// (CUDA_ERROR_ILLEGAL_ADDRESS).
	ErrInvalidAddress = errors.New("invalid address")
	// ErrHazard: memory accessed by two parties with no ordering between
	// them.
	ErrHazard = errors.New("hazard")
	// ErrCapture: a stream capture used wrongly, or left unjoined
	// (cudaErrorStreamCapture*).
	ErrCapture = errors.New("stream capture error")
	// ErrInvalidHandle: a stream, event or graph the device did not make.
	ErrInvalidHandle = errors.New("invalid handle")
	// ErrInvalidValue: a negative size, an unsupported dtype, a bad rate.
	ErrInvalidValue = errors.New("invalid value")
	// ErrNotReady: Elapsed on a record that has not executed yet.
	ErrNotReady = errors.New("not ready")
	// ErrClosed: the device was closed.
	ErrClosed = errors.New("device closed")
)

// maxErrors bounds the asynchronous errors kept for Errors.
const maxErrors = 64

// Device is a fake GPU; New makes one. All methods may be called from any
// goroutine.
type Device struct {
	cfg config

	mu     sync.Mutex
	cond   *sync.Cond // broadcast on every change streams or waiters wait for
	closed bool
	done   chan struct{} // closed by Close: interrupts sleeps and burns
	wg     sync.WaitGroup

	mem   memory     // allocations and accounting, under mu
	memMu sync.Mutex // serialises every access to allocation bytes

	streams []*stream // Stream(i+1)
	events  []*event  // Event(i+1)
	graphs  []*graph  // Graph(i+1)

	host vclock // the host's vector clock (race detection)

	err  error   // the first asynchronous error: sticky
	errs []error // every asynchronous error, up to maxErrors

	stats Stats
	sink  atomic.Uint64 // Burn's result, so its work is not dead code

	// running counts, per fabric group, the collectives of this device
	// that have started and not ended: a communicator's Abort waits for
	// those of every other group (nccl.go).
	running map[*group]int

	// tables are Moves' tables in device memory, by content
	// (movetable.go).
	tables map[string]gpu.Ptr
}

var _ gpu.Device = (*Device)(nil)

// Kind is a kind of kernel, for the launch counters.
type Kind uint8

// The kinds, one per kernel method of gpu.Device.
const (
	KindCopy Kind = iota
	KindMemset
	KindCast
	KindReduce
	KindDivide
	KindAdd
	KindFill
	KindSpin
	KindBurn
	KindPacedCopy
	KindCollective // a Fabric communicator's collective
	KindUpload     // an Upload's copy from the host
	KindMoves      // a Moves: a grouped copy and cast
	NumKinds       // the number of kinds
)

var kindNames = [NumKinds]string{"Copy", "Memset", "Cast", "Reduce", "Divide", "Add", "Fill", "Spin", "Burn", "PacedCopy", "Collective", "Upload", "Moves"}

func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Stats are the device's counters.
type Stats struct {
	// Launches counts executed kernels by kind, graph replays included.
	Launches [NumKinds]int64
	// GraphLaunches counts executed graph launches.
	GraphLaunches int64
	// BytesCopied counts bytes moved by Copy and PacedCopy; BytesUploaded
	// and BytesDownloaded those moved by Upload and Download.
	BytesCopied, BytesUploaded, BytesDownloaded int64
	// LiveBytes and PeakBytes account device memory (Alloc), LiveHostBytes
	// and PeakHostBytes pinned host memory (AllocHost), in bytes asked for.
	LiveBytes, PeakBytes         int64
	LiveHostBytes, PeakHostBytes int64
	// Allocs and Frees count successful calls of either kind.
	Allocs, Frees int64
	// TableBytes is the device memory of Moves' tables (movetable.go),
	// which no Alloc made.
	TableBytes int64
	// Events counts the events made, TimingEvents those made by NewEvent
	// (with timing).
	Events, TimingEvents int64
}

// Option configures New.
type Option func(*config)

type config struct {
	name            string
	capacity        int64
	race            bool
	burnRate        float64
	least, greatest int
}

// WithCapacity sets the device memory in bytes (default 16 GiB): Alloc
// fails with ErrOutOfMemory beyond it, and MemInfo reports it.
func WithCapacity(bytes int64) Option {
	if bytes < 0 {
		panic(fmt.Sprintf("gputest.WithCapacity(%d): negative capacity", bytes))
	}
	return func(c *config) { c.capacity = bytes }
}

// WithRaceDetection turns on the happens-before checking of every memory
// access (see the package documentation).
func WithRaceDetection() Option { return func(c *config) { c.race = true } }

// WithBurnRate sets how many flops Burn does per second of busy-waiting
// (default 1e15: 1 µs per GFLOP). A Burn takes at most 50 ms.
func WithBurnRate(flopsPerSecond float64) Option {
	if !(flopsPerSecond > 0) {
		panic(fmt.Sprintf("gputest.WithBurnRate(%v): the rate must be positive", flopsPerSecond))
	}
	return func(c *config) { c.burnRate = flopsPerSecond }
}

// WithName sets what Name returns.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithPriorityRange sets what PriorityRange returns (default 0, -5, as
// on an H100); least must not be below greatest.
func WithPriorityRange(least, greatest int) Option {
	if least < greatest {
		panic(fmt.Sprintf("gputest.WithPriorityRange(%d, %d): least is more urgent than greatest", least, greatest))
	}
	return func(c *config) { c.least, c.greatest = least, greatest }
}

// New makes a device. It starts no goroutine until NewStream.
func New(opts ...Option) *Device {
	cfg := config{capacity: 16 << 30, burnRate: 1e15, greatest: -5}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.name == "" {
		cfg.name = fmt.Sprintf("gputest fake GPU, %d MiB", cfg.capacity>>20)
	}
	d := &Device{cfg: cfg, done: make(chan struct{})}
	d.cond = sync.NewCond(&d.mu)
	d.mem.init()
	return d
}

// Name is the device's description.
func (d *Device) Name() string { return d.cfg.name }

// Stats returns a copy of the counters.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Errors returns the asynchronous errors recorded so far, the first of
// which is sticky.
func (d *Device) Errors() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]error(nil), d.errs...)
}

// Close stops every stream, abandoning queued work, and frees all
// memory. It returns the sticky asynchronous error, if any, so that an
// error no synchronisation reported is not lost. Closing again does
// nothing.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.done)
	d.cond.Broadcast()
	d.mu.Unlock()
	d.wg.Wait()

	d.mu.Lock()
	defer d.mu.Unlock()
	d.mem.release()
	d.stats.LiveBytes, d.stats.LiveHostBytes = 0, 0
	return d.err
}

// fail records an asynchronous error; the first one sticks. d.mu is held.
func (d *Device) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	if len(d.errs) < maxErrors {
		d.errs = append(d.errs, err)
	}
}

// sticky returns the sticky error, with the call's context. d.mu is held.
func (d *Device) sticky(call string) error {
	if d.err == nil {
		return nil
	}
	return fmt.Errorf("gputest: %s: earlier asynchronous error: %w", call, d.err)
}

// open fails if the device is closed. d.mu is held.
func (d *Device) open(call string) error {
	if d.closed {
		return fmt.Errorf("gputest: %s: %w", call, ErrClosed)
	}
	return nil
}

// stopped reports whether Close has begun.
func (d *Device) stopped() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// sleep blocks for t or until Close.
func (d *Device) sleep(t time.Duration) {
	if t <= 0 {
		return
	}
	tm := time.NewTimer(t)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-d.done:
	}
}
