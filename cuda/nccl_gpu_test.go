//go:build cuda

package cuda

// GPU checks of what the CPU fake cannot show: the moves table read on a
// stream other than its first user's (issue 29, N1), and every NCCL entry
// point fsdpc calls, on a one-rank communicator, which is legal on one
// GPU (N3: no GPU run had executed an NCCL collective; a world_size = 1
// plan sends its collectives to the backend's self path). .ci/gpu-acceptance
// runs them first, memcheck and initcheck included.

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestMovesTableCrossStream: stream a is held behind a spin when it first
// uses a table; stream b then runs the same runs. An upload ordered on a
// alone would leave b reading the table before it lands (missing copies,
// or a fault from stale offsets: the table's block held other bytes).
func TestMovesTableCrossStream(t *testing.T) {
	d, a := openDevice(t)
	b, err := d.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	src, _ := d.Alloc(n)
	dstA, _ := d.Alloc(n)
	dstB, _ := d.Alloc(n)
	data := make([]byte, n)
	rand.New(rand.NewSource(1)).Read(data)
	if err := d.Upload(src, data, b); err != nil {
		t.Fatal(err)
	}
	// Freed memory that held other bytes, where the table may land.
	junk, _ := d.Alloc(64 << 20)
	if err := d.Memset(junk, 0xab, 64<<20, b); err != nil {
		t.Fatal(err)
	}
	if err := d.Memset(dstB, 0, n, b); err != nil {
		t.Fatal(err)
	}
	syncStream(t, d, b)
	if err := d.Free(junk); err != nil {
		t.Fatal(err)
	}
	runs := []gpu.Run{{DstDType: ir.FP32, SrcDType: ir.FP32, N: n / 4}}
	if err := d.Spin(50*time.Millisecond, a); err != nil {
		t.Fatal(err)
	}
	if err := d.Moves(dstA, src, runs, a); err != nil { // first use
		t.Fatal(err)
	}
	if err := d.Moves(dstB, src, runs, b); err != nil { // the same table, on b
		t.Fatal(err)
	}
	syncStream(t, d, b)
	syncStream(t, d, a)
	got := make([]byte, n)
	if err := d.Download(got, dstB); err != nil {
		t.Fatalf("download (a fault from a stale table shows here): %v", err)
	}
	if !bytes.Equal(got, data) {
		bad := 0
		for i := range got {
			if got[i] != data[i] {
				bad++
			}
		}
		t.Errorf("stream b's moves read the table before it was written: %d of %d bytes wrong", bad, n)
	}
}

// oneRank makes a one-rank communicator, skipping without NCCL.
func oneRank(t *testing.T, d *Device) *Comm {
	t.Helper()
	if _, err := LoadNCCL(""); err != nil {
		t.Skipf("no NCCL: %v", err)
	}
	id, err := UniqueID("")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewComm(d, "", id, 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*Comm)
}

// TestNCCLOneRank runs every collective fsdpc calls, in every dtype and
// reduce op it uses, through the guard that polls a non-blocking
// communicator, and checks the bytes: on one rank a reduce-scatter and an
// all-reduce are the op applied to the input, an all-gather a copy.
func TestNCCLOneRank(t *testing.T) {
	d, s := openDevice(t)
	raw := oneRank(t, d)
	t.Logf("NCCL version code %d, non-blocking %v", raw.lib.version, raw.nonBlocking)
	if raw.lib.commInitRankConfig != nil && !raw.nonBlocking {
		t.Error("this NCCL has ncclCommInitRankConfig, but the communicator is blocking")
	}
	c := gpu.Guard(raw, time.Second)
	r := rand.New(rand.NewSource(2))
	const elems = 4096 + 3
	for _, dt := range []ir.DType{ir.FP32, ir.BF16, ir.FP16} {
		for _, op := range []schedule.ReduceOp{schedule.ReduceSum, schedule.ReduceAvg, schedule.ReducePremulSum} {
			in := make([]byte, elems*dt.Size())
			for i := range int64(elems) {
				executor.StoreElement(dt, in, i, float64(r.Intn(128)-64)/64)
			}
			buf, _ := d.Alloc(int64(len(in)))
			out, _ := d.Alloc(int64(len(in)))
			if err := d.Upload(buf, in, s); err != nil {
				t.Fatal(err)
			}
			if err := c.ReduceScatter(buf, out, elems, dt, op, 0.5, s); err != nil {
				t.Fatalf("%s %s reduce-scatter: %v", dt, op, err)
			}
			if err := c.AllReduce(out, elems, dt, op, 0.5, s); err != nil {
				t.Fatalf("%s %s all-reduce: %v", dt, op, err)
			}
			if err := c.AllGather(out, buf, int64(len(in)), s); err != nil {
				t.Fatalf("%s all-gather: %v", dt, err)
			}
			syncStream(t, d, s)
			got := make([]byte, len(in))
			if err := d.Download(got, buf); err != nil {
				t.Fatal(err)
			}
			f := 1.0
			if op == schedule.ReducePremulSum {
				f = 0.25 // 0.5, twice
			}
			want := make([]byte, len(in))
			for i := range int64(elems) {
				executor.StoreElement(dt, want, i, executor.LoadElement(dt, in, i)*f)
			}
			sameElems(t, dt.String()+" "+op.String(), dt, got, want)
			if err := raw.AsyncError(); err != nil {
				t.Errorf("%s %s: ncclCommGetAsyncError: %v", dt, op, err)
			}
			if err := raw.Poll(); err != nil {
				t.Errorf("%s %s: poll after the calls: %v", dt, op, err)
			}
			d.Free(buf)
			d.Free(out)
		}
	}
	sub, err := c.Split(0, 0)
	if err != nil {
		t.Fatalf("ncclCommSplit: %v", err)
	}
	defer sub.Close()
	if sub.Size() != 1 || sub.Rank() != 0 {
		t.Errorf("split: size %d, rank %d, want 1 and 0", sub.Size(), sub.Rank())
	}
	buf, _ := d.Alloc(4 << 20)
	if err := sub.AllReduce(buf, 1<<20, ir.FP32, schedule.ReduceSum, 0, s); err != nil {
		t.Fatalf("all-reduce on the split communicator: %v", err)
	}
	syncStream(t, d, s)
}

// TestNCCLAbortQueued: ncclCommAbort with a collective queued behind a
// spin returns promptly, and the stream drains (the spin ends; the
// collective is aborted or done): what the watchdog relies on.
func TestNCCLAbortQueued(t *testing.T) {
	d, s := openDevice(t)
	c := gpu.Guard(oneRank(t, d), time.Second)
	buf, _ := d.Alloc(4 << 20)
	if err := d.Spin(300*time.Millisecond, s); err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(buf, 1<<20, ir.FP32, schedule.ReduceSum, 0, s); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Abort() }()
	select {
	case err := <-done:
		t.Logf("ncclCommAbort after %v: %v", time.Since(start), err)
		if err != nil && !errors.Is(err, gpu.ErrAbortDeferred) {
			t.Errorf("abort: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ncclCommAbort did not return within 10 s")
	}
	e, _ := d.NewEvent()
	if err := d.Record(e, s); err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- d.SyncEvent(e) }()
	select {
	case err := <-drained:
		t.Logf("the stream drained: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not drain within 10 s of the abort")
	}
}
