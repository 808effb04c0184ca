package gputest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// member is one rank of a fabric test: its device, a stream and an event.
type member struct {
	dev  *Device
	st   gpu.Stream
	ev   gpu.Event
	comm gpu.Comm
}

// join makes n members of one communicator, each on its own device.
func join(t *testing.T, f *Fabric, n int) []*member {
	t.Helper()
	id := f.UniqueID()
	ms := make([]*member, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range ms {
		d := New(WithRaceDetection())
		t.Cleanup(func() { d.Close() })
		st, _ := d.NewStream(0)
		ev, _ := d.NewEvent()
		ms[r] = &member{dev: d, st: st, ev: ev}
		wg.Go(func() { ms[r].comm, errs[r] = f.NewComm(d, id, n, r) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ms
}

// upload puts fp32 values on a member's device.
func (m *member) upload(t *testing.T, vals ...float64) gpu.Ptr {
	t.Helper()
	b := m.bytes(vals...)
	p, err := m.dev.Alloc(int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.dev.Upload(p, b, m.st); err != nil {
		t.Fatal(err)
	}
	return p
}

func (m *member) sync() error {
	if err := m.dev.Record(m.ev, m.st); err != nil {
		return err
	}
	return m.dev.SyncEvent(m.ev)
}

func (m *member) read(t *testing.T, p gpu.Ptr, n int) []float64 {
	t.Helper()
	if err := m.sync(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4*n)
	if err := m.dev.Download(b, p); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = executor.LoadElement(ir.FP32, b, int64(i))
	}
	return out
}

// parallel runs f for every member at once, as the members' processes
// would: a communicator's first collective blocks until every member has
// called it.
func parallel(t *testing.T, ms []*member, f func(r int, m *member) error) {
	t.Helper()
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for r, m := range ms {
		wg.Go(func() { errs[r] = f(r, m) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestFabricCollectives(t *testing.T) {
	f := NewFabric()
	ms := join(t, f, 3)
	var gathered, scattered, reduced, in [3]gpu.Ptr
	for r, m := range ms {
		x := float64(r + 1)
		gathered[r] = m.upload(t, 0, 0, 0, 0, 0, 0)
		if err := m.dev.Upload(gathered[r]+gpu.Ptr(8*r), m.bytes(x, 10*x), m.st); err != nil {
			t.Fatal(err)
		}
		in[r] = m.upload(t, x, 2*x, 3*x)
		scattered[r] = m.upload(t, 0)
		reduced[r] = m.upload(t, x, -x)
	}
	parallel(t, ms, func(r int, m *member) error {
		return errors.Join(
			m.comm.AllGather(gathered[r]+gpu.Ptr(8*r), gathered[r], 8, m.st),
			m.comm.ReduceScatter(in[r], scattered[r], 1, ir.FP32, schedule.ReduceAvg, 0, m.st),
			m.comm.AllReduce(reduced[r], 2, ir.FP32, schedule.ReducePremulSum, 0.5, m.st))
	})
	for r, m := range ms {
		if got, want := m.read(t, gathered[r], 6), []float64{1, 10, 2, 20, 3, 30}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("rank %d all-gather: %v, want %v", r, got, want)
		}
		if got, want := m.read(t, scattered[r], 1)[0], float64(r+1)*2; got != want {
			t.Errorf("rank %d reduce-scatter (avg of chunk %d): %v, want %v", r, r, got, want)
		}
		if got, want := m.read(t, reduced[r], 2), []float64{3, -3}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("rank %d all-reduce: %v, want %v", r, got, want)
		}
		if errs := m.dev.Errors(); len(errs) > 0 {
			t.Errorf("rank %d: %v", r, errs)
		}
	}
}

func (m *member) bytes(vals ...float64) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		executor.StoreElement(ir.FP32, b, int64(i), v)
	}
	return b
}

func TestFabricSplit(t *testing.T) {
	f := NewFabric()
	ms := join(t, f, 4)
	subs := make([]gpu.Comm, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for r, m := range ms {
		// Colors by parity, keys reversed: ranks 2, 0 and 3, 1.
		wg.Go(func() { subs[r], errs[r] = m.comm.Split(r%2, -r) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	wantRank := []int{1, 1, 0, 0}
	bufs := make([]gpu.Ptr, 4)
	for r, m := range ms {
		if subs[r].Size() != 2 || subs[r].Rank() != wantRank[r] {
			t.Errorf("rank %d: member %d of %d, want %d of 2", r, subs[r].Rank(), subs[r].Size(), wantRank[r])
		}
		bufs[r] = m.upload(t, float64(r))
	}
	parallel(t, ms, func(r int, m *member) error {
		return subs[r].AllReduce(bufs[r], 1, ir.FP32, schedule.ReduceSum, 0, m.st)
	})
	for r, m := range ms {
		want := []float64{2, 4}[r%2] // 0+2, 1+3
		if got := m.read(t, bufs[r], 1)[0]; got != want {
			t.Errorf("rank %d: sum over its half %v, want %v", r, got, want)
		}
	}
}

func TestFabricHangAndAbort(t *testing.T) {
	f := NewFabric()
	f.Hang(1)
	ms := join(t, f, 2)
	ps := []gpu.Ptr{ms[0].upload(t, 1, 2), ms[1].upload(t, 1, 2)}
	parallel(t, ms, func(r int, m *member) error {
		return errors.Join(
			m.comm.AllReduce(ps[r], 2, ir.FP32, schedule.ReduceSum, 0, m.st),
			m.comm.AllReduce(ps[r], 2, ir.FP32, schedule.ReduceSum, 0, m.st))
	})
	done := make(chan error, 1)
	go func() { done <- ms[0].sync() }()
	select {
	case err := <-done:
		t.Fatalf("a hung collective finished: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	// A peer's Abort ends only its own part; rank 0 waits for its own.
	if err := ms[1].comm.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := ms[1].sync(); !errors.Is(err, ErrAborted) {
		t.Errorf("the aborted member: %v, want ErrAborted", err)
	}
	select {
	case err := <-done:
		t.Fatalf("a peer's Abort ended rank 0's collective: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := ms[0].comm.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrAborted) {
		t.Errorf("after its Abort, the hung stream's sync returned %v, want ErrAborted", err)
	}
	if err := ms[0].comm.AllReduce(0, 1, ir.FP32, schedule.ReduceSum, 0, ms[0].st); !errors.Is(err, ErrAborted) {
		t.Errorf("a collective after Abort: %v, want ErrAborted", err)
	}
}

// TestFabricMismatch: members whose collectives at one place differ in
// kind, or agree on the bytes but not on the dtype or the operator, fail
// the group instead of reducing garbage.
func TestFabricMismatch(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(r int, m *member, p gpu.Ptr) error
		want string
	}{
		{"kinds", func(r int, m *member, p gpu.Ptr) error {
			if r == 0 {
				return m.comm.AllReduce(p, 2, ir.FP32, schedule.ReduceSum, 0, m.st)
			}
			return m.comm.AllGather(p, p, 8, m.st)
		}, "AllGather of 8 bytes"},
		{"dtypes of the same size", func(r int, m *member, p gpu.Ptr) error {
			return m.comm.AllReduce(p, 4, []ir.DType{ir.BF16, ir.FP16}[r], schedule.ReduceSum, 0, m.st)
		}, "AllReduce of fp16"},
		{"reduce ops", func(r int, m *member, p gpu.Ptr) error {
			return m.comm.AllReduce(p, 2, ir.FP32, []schedule.ReduceOp{schedule.ReduceSum, schedule.ReduceAvg}[r], 0, m.st)
		}, "AllReduce of fp32, avg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := join(t, NewFabric(), 2)
			ps := []gpu.Ptr{ms[0].upload(t, 1, 2, 3, 4), ms[1].upload(t, 1, 2, 3, 4)}
			parallel(t, ms, func(r int, m *member) error { return c.call(r, m, ps[r]) })
			errs := []error{ms[0].sync(), ms[1].sync()}
			if errs[0] == nil || errs[1] == nil {
				t.Fatalf("mismatched collectives ran: %v", errs)
			}
			if err := errors.Join(errs...); !strings.Contains(err.Error(), "collectives out of order") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("the error does not say what went wrong (want %q): %v", c.want, err)
			}
		})
	}
}

// TestFabricFirstCollectiveBlocks: like NCCL's lazy connection, a
// member's first collective returns only when every member has called
// its own; later ones return at once.
func TestFabricFirstCollectiveBlocks(t *testing.T) {
	ms := join(t, NewFabric(), 2)
	ps := []gpu.Ptr{ms[0].upload(t, 1), ms[1].upload(t, 2)}
	done := make(chan error, 1)
	go func() { done <- ms[0].comm.AllReduce(ps[0], 1, ir.FP32, schedule.ReduceSum, 0, ms[0].st) }()
	select {
	case err := <-done:
		t.Fatalf("the first collective returned before the peer called it: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	if err := ms[1].comm.AllReduce(ps[1], 1, ir.FP32, schedule.ReduceSum, 0, ms[1].st); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The second is enqueued without waiting for the peer.
	if err := ms[0].comm.AllReduce(ps[0], 1, ir.FP32, schedule.ReduceSum, 0, ms[0].st); err != nil {
		t.Fatal(err)
	}
}

// TestFabricEnqueueOrder: a communicator's collectives complete in the
// order they were enqueued even on different streams: the second, on a
// stream free to run, waits for the first, which waits behind a spin.
func TestFabricEnqueueOrder(t *testing.T) {
	ms := join(t, NewFabric(), 2)
	var ps, qs [2]gpu.Ptr
	var other [2]gpu.Stream
	for r, m := range ms {
		ps[r], qs[r] = m.upload(t, 1), m.upload(t, 10)
		other[r] = must(m.dev.NewStream(0))
		ok(t, m.dev.Record(m.ev, m.st))
		ok(t, m.dev.Wait(other[r], m.ev))
		ok(t, m.dev.Spin(100*time.Millisecond, m.st))
	}
	parallel(t, ms, func(r int, m *member) error {
		return errors.Join(
			m.comm.AllReduce(ps[r], 1, ir.FP32, schedule.ReduceSum, 0, m.st),
			m.comm.AllReduce(qs[r], 1, ir.FP32, schedule.ReduceSum, 0, other[r]))
	})
	start := time.Now()
	ev := must(ms[0].dev.NewEvent())
	ok(t, ms[0].dev.Record(ev, other[0]))
	ok(t, ms[0].dev.SyncEvent(ev))
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("the second collective finished after %v, before the first (behind a 100ms spin) could", el)
	}
}

// TestFabricAbortWaitsForOtherCommunicators: like ncclCommAbort, Abort
// returns only when no other communicator of the device has a collective
// in flight: with two hung communicators, aborting one after the other
// hangs, aborting both at once does not.
func TestFabricAbortWaitsForOtherCommunicators(t *testing.T) {
	f := NewFabric()
	f.Hang(0)
	ms := join(t, f, 2)
	subs := make([]gpu.Comm, 2)
	parallel(t, ms, func(r int, m *member) (err error) {
		subs[r], err = m.comm.Split(0, r)
		return err
	})
	var ps, qs [2]gpu.Ptr
	var other [2]gpu.Stream
	for r, m := range ms {
		ps[r], qs[r] = m.upload(t, 1), m.upload(t, 10)
		other[r] = must(m.dev.NewStream(0))
		ok(t, m.dev.Record(m.ev, m.st))
		ok(t, m.dev.Wait(other[r], m.ev))
	}
	parallel(t, ms, func(r int, m *member) error {
		return errors.Join(
			m.comm.AllReduce(ps[r], 1, ir.FP32, schedule.ReduceSum, 0, m.st),
			subs[r].AllReduce(qs[r], 1, ir.FP32, schedule.ReduceSum, 0, other[r]))
	})
	time.Sleep(20 * time.Millisecond) // both collectives are running
	done := make(chan error, 1)
	go func() { done <- ms[0].comm.Abort() }()
	select {
	case err := <-done:
		t.Fatalf("Abort returned while another communicator's collective hung: %v (device: %v)", err, ms[0].dev.Errors())
	case <-time.After(50 * time.Millisecond):
	}
	if err := subs[0].Abort(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFabricAbortDuringCall: an Abort while the owner is inside a
// blocking call on the communicator frees it under the call, which the
// device records.
func TestFabricAbortDuringCall(t *testing.T) {
	ms := join(t, NewFabric(), 2)
	p := ms[0].upload(t, 1)
	done := make(chan error, 1)
	go func() { done <- ms[0].comm.AllReduce(p, 1, ir.FP32, schedule.ReduceSum, 0, ms[0].st) }()
	for ms[0].comm.(*Comm).CallsInside() == 0 { // inside its first collective, waiting for the peer
		time.Sleep(time.Millisecond)
	}
	ok(t, ms[0].comm.Abort())
	if err := <-done; !errors.Is(err, ErrAborted) {
		t.Errorf("the call under the Abort returned %v, want ErrAborted", err)
	}
	errs := ms[0].dev.Errors()
	if len(errs) == 0 || !errors.Is(errs[0], ErrAbortInCall) || !strings.Contains(errs[0].Error(), "while AllReduce was inside it") {
		t.Errorf("the device saw %v, want the use after free", errs)
	}
}
