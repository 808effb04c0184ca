package gpu

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// DeviceFigures are what the device measured in Calibrate: the figures a
// rehearsal's prediction uses in place of the plan's cluster, so that
// measured and predicted step times compare the schedule, not the
// hardware.
type DeviceFigures struct {
	// CopyBandwidth: bytes copied per second by one large device copy
	// (each byte read and written). MemoryBandwidth is the traffic, twice
	// that.
	CopyBandwidth, MemoryBandwidth float64
	// GatherBandwidth: bytes per second of the copies a virtual all-gather
	// of Ranks ranks makes, all members at once.
	GatherBandwidth float64
	// ReduceBandwidth: bytes read and written per second by the reduction
	// kernel over Ranks fp32 inputs; ReduceByDType the same for every
	// dtype the kernel reduces (ReduceDTypes), fp32 included: a 2-byte
	// dtype moves half the bytes per element, so a kernel that keeps too
	// few loads in flight shows it there first.
	ReduceBandwidth float64
	ReduceByDType   [len(ReduceDTypes)]float64
	// Launch is the GPU-side time of an empty kernel; Issue the CPU's cost
	// of issuing one operation through the backend's device.
	Launch, Issue time.Duration
	Ranks         int
	Bytes         int64 // the transfer size measured
}

// ReduceDTypes are the dtypes Calibrate measures the reduction in.
var ReduceDTypes = [...]ir.DType{ir.FP32, ir.BF16, ir.FP16}

// Calibrate measures the device: medians of repeated runs of bytes-sized
// transfers, ranks virtual ranks for the gather and the reduction.
func Calibrate(dev Device, ranks int, bytes int64, repeats int) (DeviceFigures, error) {
	f := DeviceFigures{Ranks: ranks, Bytes: bytes}
	if ranks < 2 || bytes < 1<<10 || repeats < 1 {
		return f, fmt.Errorf("calibrate: %d ranks, %d bytes, %d repeats: need at least 2, 1 KiB, 1", ranks, bytes, repeats)
	}
	bytes -= bytes % int64(ranks*4)
	_, greatest := dev.PriorityRange()
	streams := make([]Stream, ranks)
	bufs := make([]Ptr, ranks)
	for i := range streams {
		s, err := dev.NewStream(greatest)
		if err != nil {
			return f, err
		}
		streams[i] = s
		if bufs[i], err = dev.Alloc(bytes); err != nil {
			return f, fmt.Errorf("calibrate: %w", err)
		}
		if err := dev.Memset(bufs[i], 0, bytes, s); err != nil {
			return f, err
		}
	}
	defer func() {
		for _, p := range bufs {
			dev.Free(p)
		}
	}()
	t0, err := dev.NewEvent()
	if err != nil {
		return f, err
	}
	t1, err := dev.NewEvent()
	if err != nil {
		return f, err
	}
	join := make([]Event, ranks)
	for i := range join {
		if join[i], err = dev.NewSyncEvent(); err != nil {
			return f, err
		}
	}
	s0 := streams[0]
	timer := &gatedTimer{dev: dev, streams: streams, t0: t0, t1: t1, join: join, gate: time.Millisecond, repeats: repeats}
	per := func(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() }

	d, _, err := timer.time(func() error { return dev.Copy(bufs[1], bufs[0], bytes, s0) })
	if err != nil {
		return f, fmt.Errorf("calibrate: copy: %w", err)
	}
	f.CopyBandwidth = per(bytes, d)
	f.MemoryBandwidth = 2 * f.CopyBandwidth

	// A virtual all-gather: every rank copies every other rank's chunk.
	c := bytes / int64(ranks)
	d, _, err = timer.time(func() error {
		for i, s := range streams {
			for j := range streams {
				if i != j {
					if err := dev.Copy(bufs[i]+Ptr(int64(j)*c), bufs[j]+Ptr(int64(j)*c), c, s); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return f, fmt.Errorf("calibrate: gather: %w", err)
	}
	f.GatherBandwidth = per(int64(ranks*(ranks-1))*c, d)

	// The reduction of one reduce-scatter chunk per rank, all at once:
	// each reads its chunk of every rank and writes it in place. The
	// buffers hold zeros, which every dtype reduces without overflow.
	for k, dt := range ReduceDTypes {
		d, _, err = timer.time(func() error {
			for i, s := range streams {
				srcs := make([]Ptr, ranks)
				for j := range srcs {
					srcs[j] = bufs[j] + Ptr(int64(i)*c)
				}
				if err := dev.Reduce(bufs[i]+Ptr(int64(i)*c), srcs, c/dt.Size(), dt, 1, s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return f, fmt.Errorf("calibrate: reduce %s: %w", dt, err)
		}
		f.ReduceByDType[k] = per(int64(ranks)*int64(ranks+1)*c, d)
	}
	f.ReduceBandwidth = f.ReduceByDType[0]

	// Launch and issue: many empty kernels on one stream, queued behind
	// the gate, so the device time is the launches' own.
	const n = 1000
	d, issue, err := timer.time(func() error {
		for i := 0; i < n; i++ {
			if err := dev.Spin(0, s0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return f, fmt.Errorf("calibrate: launch: %w", err)
	}
	f.Issue = issue / n
	f.Launch = d / n
	return f, nil
}

// gatedTimer times device work between two events on its first stream,
// fanning out to every stream and back. A spin holds the first stream
// while the work is issued, so that t0 executes after the CPU has
// enqueued everything and the events time the device's work alone:
// without it the figures measured the issue (a 256 MiB copy on an H200
// read 519 GB/s where the copy engine moves about 2 TB/s). A gate the
// issue outlasts is doubled and the run repeated.
type gatedTimer struct {
	dev     Device
	streams []Stream
	t0, t1  Event
	join    []Event // join[i] records streams[i]'s end (i > 0)
	gate    time.Duration
	repeats int
}

// time returns the medians over repeats runs, after one to warm up, of
// the device's time for work and of the CPU's time to issue it.
func (g *gatedTimer) time(work func() error) (device, issue time.Duration, err error) {
	var ds, is []time.Duration
	for rep, tries := 0, 0; rep < g.repeats+1; tries++ {
		if tries > 4*(g.repeats+1) {
			return 0, 0, fmt.Errorf("the CPU took longer than a %v gate to issue the work, %d times", g.gate, tries)
		}
		d, issued, err := g.once(work)
		if err != nil {
			return 0, 0, err
		}
		if issued > g.gate/2 {
			g.gate = 2 * issued
			continue
		}
		if rep > 0 {
			ds = append(ds, d)
			is = append(is, issued)
		}
		rep++
	}
	slices.Sort(ds)
	slices.Sort(is)
	return max(ds[len(ds)/2], time.Nanosecond), is[len(is)/2], nil
}

// once runs work behind the gate and returns the device's time for it
// and the CPU's time to issue it.
func (g *gatedTimer) once(work func() error) (device, issued time.Duration, err error) {
	s0 := g.streams[0]
	if err := g.dev.Spin(g.gate, s0); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := g.dev.Record(g.t0, s0); err != nil {
		return 0, 0, err
	}
	for _, s := range g.streams[1:] {
		if err := g.dev.Wait(s, g.t0); err != nil {
			return 0, 0, err
		}
	}
	if err := work(); err != nil {
		return 0, 0, err
	}
	for i, s := range g.streams[1:] {
		if err := g.dev.Record(g.join[i+1], s); err != nil {
			return 0, 0, err
		}
		if err := g.dev.Wait(s0, g.join[i+1]); err != nil {
			return 0, 0, err
		}
	}
	if err := g.dev.Record(g.t1, s0); err != nil {
		return 0, 0, err
	}
	issued = time.Since(start)
	if err := g.dev.SyncEvent(g.t1); err != nil {
		return 0, 0, err
	}
	device, err = g.dev.Elapsed(g.t0, g.t1)
	if err != nil {
		return 0, 0, err
	}
	return device, issued, nil
}

// RehearsalModel is the cost model of a single-GPU rehearsal of p on a
// device with figures f: copies at the measured copy bandwidth, virtual
// collectives at the gather bandwidth the ranks share (or linkBandwidth,
// when the rehearsal paces them), the measured launch and issue costs
// (one device context serves every virtual rank, so each rank's issue
// waits for the others'), and no slowdown of stand-in compute by
// overlapping collectives (a spinning stand-in does not compete).
func RehearsalModel(p *schedule.Plan, f DeviceFigures, linkBandwidth float64, ranks int, standIn StandIn) *schedule.Model {
	m := schedule.NewModel(p)
	m.HW.HBMBandwidth = f.MemoryBandwidth
	m.Cal.MemoryEfficiency = 1
	m.Cal.Launch = f.Launch.Seconds()
	bw := f.GatherBandwidth / float64(max(ranks, 1))
	if linkBandwidth > 0 {
		bw = linkBandwidth
	}
	m.HW.IntraNodeBandwidth, m.HW.InterNodeBandwidth = bw, bw
	m.Cal.BusEfficiency = 1
	m.Cal.AlphaIntra, m.Cal.AlphaInter = f.Launch.Seconds(), f.Launch.Seconds()
	m.Cal.AlphaOnly = true
	m.Cal.IssueKernel = f.Issue.Seconds() * float64(max(ranks, 1))
	m.Cal.IssueOther = m.Cal.IssueKernel
	if standIn == SpinStandIn {
		m.Cal.Overlap = 0
	}
	return m
}

// CommModel is the cost model of one rank per GPU over NCCL: the
// device's measured memory bandwidth, launch and issue costs, and the
// plan's cluster for the links and their latencies, which one GPU cannot
// measure. A spinning stand-in does not slow down under communication.
func CommModel(p *schedule.Plan, f DeviceFigures, standIn StandIn) *schedule.Model {
	m := schedule.NewModel(p)
	m.HW.HBMBandwidth = f.MemoryBandwidth
	m.Cal.MemoryEfficiency = 1
	m.Cal.Launch = f.Launch.Seconds()
	m.Cal.IssueKernel = f.Issue.Seconds()
	m.Cal.IssueOther = m.Cal.IssueKernel
	if standIn == SpinStandIn {
		m.Cal.Overlap = 0
	}
	return m
}

// Write prints the figures, with the ratios the acceptance checks read.
func (f DeviceFigures) Write(w io.Writer) {
	gbs := func(x float64) string { return fmt.Sprintf("%.1f GB/s", x/1e9) }
	fmt.Fprintf(w, "device figures (%d virtual ranks, %s per transfer, medians)\n", f.Ranks, ir.FormatBytes(f.Bytes))
	fmt.Fprintf(w, "  copy            %s (memory traffic %s)\n", gbs(f.CopyBandwidth), gbs(f.MemoryBandwidth))
	fmt.Fprintf(w, "  gather copies   %s  = %.0f%% of copy\n", gbs(f.GatherBandwidth), 100*f.GatherBandwidth/f.CopyBandwidth)
	for k, dt := range ReduceDTypes {
		bw := f.ReduceByDType[k]
		if k == 0 && bw == 0 {
			bw = f.ReduceBandwidth
		}
		if bw > 0 {
			fmt.Fprintf(w, "  reduction %-5s %s  = %.0f%% of memory bandwidth\n", dt, gbs(bw), 100*bw/f.MemoryBandwidth)
		}
	}
	fmt.Fprintf(w, "  kernel launch   %v on the device, %v to issue\n", f.Launch, f.Issue)
}
