package gpu_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// guardedPair makes two fabric members, each on its own device, with
// guarded communicators, and a 4-byte buffer and a stream on each.
func guardedPair(t *testing.T) (devs [2]*gputest.Device, comms [2]gpu.Comm, bufs [2]gpu.Ptr, sts [2]gpu.Stream) {
	t.Helper()
	return guardedPairOn(t, gputest.NewFabric())
}

func guardedPairOn(t *testing.T, f *gputest.Fabric) (devs [2]*gputest.Device, comms [2]gpu.Comm, bufs [2]gpu.Ptr, sts [2]gpu.Stream) {
	t.Helper()
	id := f.UniqueID()
	errs := make(chan error, 2)
	for r := range 2 {
		devs[r] = gputest.New()
		t.Cleanup(func() { devs[r].Close() })
		sts[r], _ = devs[r].NewStream(0)
		bufs[r], _ = devs[r].Alloc(4)
		go func() {
			c, err := f.NewComm(devs[r], id, 2, r)
			if err == nil {
				comms[r] = gpu.Guard(c, 20*time.Millisecond)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return
}

// TestGuardAbortDuringCall: the watchdog aborts while the owner is inside
// its first collective, waiting for the peer. Unguarded, the fabric
// records a use after free (gputest's TestFabricAbortDuringCall); guarded,
// Abort returns ErrAbortDeferred without freeing, and the call, once the
// peer arrives, leaves and aborts the communicator.
func TestGuardAbortDuringCall(t *testing.T) {
	devs, comms, bufs, sts := guardedPair(t)
	done := make(chan error, 1)
	go func() { done <- comms[0].AllReduce(bufs[0], 1, ir.FP32, schedule.ReduceSum, 0, sts[0]) }()
	// Wait until the call is inside (connecting: rank 1 has not come):
	// a fixed sleep was not always enough on a loaded machine.
	for gpu.CallsInside(comms[0]) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := comms[0].Abort(); !errors.Is(err, gpu.ErrAbortDeferred) {
		t.Fatalf("Abort under a call: %v, want ErrAbortDeferred", err)
	}
	if err := comms[0].AllReduce(bufs[0], 1, ir.FP32, schedule.ReduceSum, 0, sts[0]); err == nil {
		t.Error("a call after Abort was admitted")
	}
	if err := comms[1].AllReduce(bufs[1], 1, ir.FP32, schedule.ReduceSum, 0, sts[1]); err != nil {
		t.Fatal(err)
	}
	<-done
	for _, err := range devs[0].Errors() {
		if errors.Is(err, gputest.ErrAbortInCall) {
			t.Errorf("the communicator was freed under the call: %v", err)
		}
	}
	// The last call out aborted it: the second Abort reports that one's
	// outcome, and rank 0's stream drains.
	if err := comms[0].Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	ev, _ := devs[0].NewEvent()
	devs[0].Record(ev, sts[0])
	devs[0].SyncEvent(ev) // returns: aborted or finished, not hung
}

// TestGuardAbortIdle: with no call inside, Abort aborts at once.
func TestGuardAbortIdle(t *testing.T) {
	devs, comms, _, _ := guardedPair(t)
	if err := comms[0].Abort(); err != nil {
		t.Fatal(err)
	}
	if errs := devs[0].Errors(); len(errs) > 0 {
		t.Errorf("the device saw %v", errs)
	}
}

// TestGuardNonBlockingDeadPeer: rank 0 makes its first collective on a
// non-blocking communicator and rank 1 never does. The guard polls the
// call instead of sitting inside it, so the watchdog's Abort aborts at
// once (not deferred) and the call returns with an error. On a blocking
// communicator the Abort is deferred behind a call that never returns
// (issue 29, N2's reproducer).
func TestGuardNonBlockingDeadPeer(t *testing.T) {
	f := gputest.NewFabric()
	f.NonBlocking()
	devs, comms, bufs, sts := guardedPairOn(t, f)
	done := make(chan error, 1)
	go func() { done <- comms[0].AllReduce(bufs[0], 1, ir.FP32, schedule.ReduceSum, 0, sts[0]) }()
	time.Sleep(20 * time.Millisecond) // the call is polling its connection
	if err := comms[0].Abort(); err != nil {
		t.Fatalf("Abort: %v, want it done at once", err)
	}
	select {
	case err := <-done:
		if err == nil || errors.Is(err, gpu.ErrInProgress) {
			t.Errorf("the aborted call returned %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("2 s after Abort the call has not returned")
	}
	for _, err := range devs[0].Errors() {
		if errors.Is(err, gputest.ErrAbortInCall) {
			t.Errorf("the communicator was freed under a call: %v", err)
		}
	}
	// Split on a non-blocking communicator: every member polls the new
	// one; with the peer absent, Abort ends that too.
	g := gputest.NewFabric()
	g.NonBlocking()
	_, comms, _, _ = guardedPairOn(t, g)
	split := make(chan error, 1)
	go func() {
		_, err := comms[0].Split(0, 0)
		split <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := comms[0].Abort(); err != nil {
		t.Fatalf("Abort during Split: %v", err)
	}
	select {
	case err := <-split:
		if err == nil {
			t.Error("the aborted Split succeeded")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("2 s after Abort the Split has not returned")
	}
}

// TestGuardNonBlockingSplit: a non-blocking Split completes when every
// member has called it, and the new communicator works.
func TestGuardNonBlockingSplit(t *testing.T) {
	f := gputest.NewFabric()
	f.NonBlocking()
	_, comms, bufs, sts := guardedPairOn(t, f)
	errs := make(chan error, 2)
	for r := range 2 {
		go func() {
			sub, err := comms[r].Split(0, 1-r)
			if err == nil && (sub.Size() != 2 || sub.Rank() != 1-r) {
				err = fmt.Errorf("rank %d: split into rank %d of %d", r, sub.Rank(), sub.Size())
			}
			if err == nil {
				err = sub.AllReduce(bufs[r], 1, ir.FP32, schedule.ReduceSum, 0, sts[r])
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
