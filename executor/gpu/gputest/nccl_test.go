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
	if err := m.dev.Upload(p, b); err != nil {
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

func TestFabricCollectives(t *testing.T) {
	f := NewFabric()
	ms := join(t, f, 3)
	var gathered, scattered, reduced [3]gpu.Ptr
	for r, m := range ms {
		x := float64(r + 1)
		gathered[r] = m.upload(t, 0, 0, 0, 0, 0, 0)
		if err := m.dev.Upload(gathered[r]+gpu.Ptr(8*r), m.bytes(x, 10*x)); err != nil {
			t.Fatal(err)
		}
		if err := m.comm.AllGather(gathered[r]+gpu.Ptr(8*r), gathered[r], 8, m.st); err != nil {
			t.Fatal(err)
		}
		in := m.upload(t, x, 2*x, 3*x)
		scattered[r] = m.upload(t, 0)
		if err := m.comm.ReduceScatter(in, scattered[r], 1, ir.FP32, schedule.ReduceAvg, 0, m.st); err != nil {
			t.Fatal(err)
		}
		reduced[r] = m.upload(t, x, -x)
		if err := m.comm.AllReduce(reduced[r], 2, ir.FP32, schedule.ReducePremulSum, 0.5, m.st); err != nil {
			t.Fatal(err)
		}
	}
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
		if err := subs[r].AllReduce(bufs[r], 1, ir.FP32, schedule.ReduceSum, 0, m.st); err != nil {
			t.Fatal(err)
		}
	}
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
	for _, m := range ms {
		p := m.upload(t, 1, 2)
		for range 2 {
			if err := m.comm.AllReduce(p, 2, ir.FP32, schedule.ReduceSum, 0, m.st); err != nil {
				t.Fatal(err)
			}
		}
	}
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

func TestFabricOutOfOrder(t *testing.T) {
	f := NewFabric()
	ms := join(t, f, 2)
	p0, p1 := ms[0].upload(t, 1, 2), ms[1].upload(t, 1, 2, 3, 4)
	ms[0].comm.AllReduce(p0, 2, ir.FP32, schedule.ReduceSum, 0, ms[0].st)
	ms[1].comm.AllGather(p1, p1, 8, ms[1].st)
	errs := []error{ms[0].sync(), ms[1].sync()}
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("mismatched collectives ran: %v", errs)
	}
	if err := errors.Join(errs...); !strings.Contains(err.Error(), "collectives out of order") {
		t.Errorf("the error does not say what went wrong: %v", err)
	}
}
