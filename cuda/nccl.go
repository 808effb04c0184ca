//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
	"gorgonia.org/cu"
)

// Comm is one rank's NCCL communicator on a Device. Where NCCL has
// ncclCommInitRankConfig (2.14) it is non-blocking (config.blocking = 0,
// which ncclCommSplit's children inherit): a call that would wait for the
// peers returns gpu.ErrInProgress and Poll follows it, so that Abort is
// safe at any time (NCCL's fault tolerance; gpu.Guard polls).
type Comm struct {
	dev          *Device
	lib          *ncclLib
	comm         atomic.Pointer[byte] // the ncclComm_t; nil once aborted or closed
	nranks, rank int
	nonBlocking  bool

	mu sync.Mutex
	// shaped: nranks and rank are known (a Split's child learns them
	// when it is ready).
	shaped bool
	// ops are PreMulSum operators of calls still in progress, destroyed
	// once Poll reports them finished.
	ops []int
}

var (
	_ gpu.Comm   = (*Comm)(nil)
	_ gpu.Poller = (*Comm)(nil)
)

// UniqueID makes the id that rank 0 hands every member of a new group
// (ncclGetUniqueId), loading NCCL from lib if it is not loaded yet (see
// LoadNCCL: "" means $FSDPC_NCCL, else DefaultNCCL).
func UniqueID(lib string) ([128]byte, error) {
	l, err := loadNCCL(lib)
	if err != nil {
		return [128]byte{}, err
	}
	return l.uniqueID()
}

// NewComm joins the group id names as rank of nranks, on dev, loading
// NCCL from lib as UniqueID does. It returns once every member has
// joined, or fails after timeout (0: none), aborting the communicator:
// a non-blocking one is polled outside the device's mutex, so the device
// serves other calls meanwhile.
func NewComm(dev *Device, lib string, id [128]byte, nranks, rank int, timeout time.Duration) (gpu.Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("cuda: NCCL rank %d of %d", rank, nranks)
	}
	l, err := loadNCCL(lib)
	if err != nil {
		return nil, err
	}
	c := &Comm{dev: dev, lib: l, nranks: nranks, rank: rank, shaped: true}
	err = dev.do(func(*state) error {
		comm, nonBlocking, err := l.initRank(&id, nranks, rank)
		if comm != nil && (err == nil || errors.Is(err, gpu.ErrInProgress)) {
			c.comm.Store((*byte)(comm))
			c.nonBlocking = nonBlocking
		}
		return err
	})
	if errors.Is(err, gpu.ErrInProgress) {
		err = c.await(timeout)
	}
	if err != nil {
		return nil, errors.Join(err, c.Abort())
	}
	return c, nil
}

// await polls until the call in progress has finished, or timeout (0:
// none) has passed.
func (c *Comm) await(timeout time.Duration) error {
	start := time.Now()
	for gap := time.Microsecond; ; gap = min(2*gap, time.Millisecond) {
		err := c.Poll()
		if !errors.Is(err, gpu.ErrInProgress) {
			return err
		}
		if timeout > 0 && time.Since(start) > timeout {
			return fmt.Errorf("cuda: ncclCommInitRankConfig (rank %d of %d): the members have not all joined within %v", c.rank, c.nranks, timeout)
		}
		time.Sleep(gap)
	}
}

// Poll is ncclCommGetAsyncError: gpu.ErrInProgress while a non-blocking
// call is under way, then nil or the communicator's error. A Split's
// child learns its size and rank when it is first found ready, and
// PreMulSum operators of finished calls are destroyed.
func (c *Comm) Poll() error {
	comm := unsafe.Pointer(c.comm.Load())
	if comm == nil {
		return errCommClosed
	}
	if err := c.lib.asyncErrorOf(comm); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, op := range c.ops {
		errs = append(errs, c.lib.destroyOp(comm, op))
	}
	c.ops = nil
	if !c.shaped {
		n, r, err := c.lib.shape(comm)
		if err != nil {
			return err
		}
		c.nranks, c.rank, c.shaped = n, r, true
	}
	return errors.Join(errs...)
}

// Size and Rank: see gpu.Comm; a Split's child knows them once polled
// ready.
func (c *Comm) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nranks
}

func (c *Comm) Rank() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rank
}

// errCommClosed is returned by collectives on an aborted or closed Comm.
var errCommClosed = errors.New("cuda: the NCCL communicator is aborted or closed")

// onStream runs f on the device (Device.do) with the communicator and
// s's handle.
func (c *Comm) onStream(s gpu.Stream, f func(st *state, comm unsafe.Pointer, cs cu.Stream) error) error {
	return c.dev.do(func(st *state) error {
		comm := unsafe.Pointer(c.comm.Load())
		if comm == nil {
			return errCommClosed
		}
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		return f(st, comm, cs)
	})
}

// AllGather gathers bytes from every member into recv, in member order.
func (c *Comm) AllGather(send, recv gpu.Ptr, bytes int64, s gpu.Stream) error {
	if bytes < 0 {
		return fmt.Errorf("cuda: ncclAllGather of %d bytes", bytes)
	}
	return c.onStream(s, func(_ *state, comm unsafe.Pointer, cs cu.Stream) error {
		return c.lib.allGatherOn(comm, uint64(send), uint64(recv), bytes, cs)
	})
}

// ReduceScatter: see gpu.Comm. Without ncclAvg (NCCL < 2.10) or
// ncclRedOpCreatePreMulSum (< 2.11), Avg and PremulSum divide send in
// place by the divisor (n, or 1/factor) with the divide kernel and then
// sum: send is changed, and each input is rounded once more than
// NCCL's own operators would.
func (c *Comm) ReduceScatter(send, recv gpu.Ptr, n int64, dt ir.DType, op schedule.ReduceOp, factor float64, s gpu.Stream) error {
	return c.reduce("ncclReduceScatter", c.lib.reduceScatter, send, recv, n, int64(c.Size())*n, dt, op, factor, s)
}

// AllReduce: see gpu.Comm, and ReduceScatter for old NCCLs.
func (c *Comm) AllReduce(buf gpu.Ptr, n int64, dt ir.DType, op schedule.ReduceOp, factor float64, s gpu.Stream) error {
	return c.reduce("ncclAllReduce", c.lib.allReduce, buf, buf, n, n, dt, op, factor, s)
}

// reduce runs a reducing collective of count elements whose input has
// sendN elements.
func (c *Comm) reduce(call string, f unsafe.Pointer, send, recv gpu.Ptr, count, sendN int64, dt ir.DType, op schedule.ReduceOp, factor float64, s gpu.Stream) error {
	if count < 0 {
		return fmt.Errorf("cuda: %s of %d elements", call, count)
	}
	ndt, err := ncclDType(dt)
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", call, err)
	}
	l := c.lib
	return c.onStream(s, func(st *state, comm unsafe.Pointer, cs cu.Stream) error {
		var divisor float64 // of the fallback
		nop, premul := ncclSum, false
		switch op {
		case schedule.ReduceSum:
		case schedule.ReduceAvg:
			if l.hasAvg() {
				nop = ncclAvg
			} else {
				divisor = float64(c.Size())
			}
		case schedule.ReducePremulSum:
			if !(factor > 0) {
				return fmt.Errorf("cuda: %s: premul-sum with factor %v", call, factor)
			}
			if l.preMulSum != nil {
				scalar := make([]byte, dt.Size())
				executor.StoreElement(dt, scalar, 0, factor) // rounded as the host rounds it
				if nop, err = l.premulSum(comm, scalar, ndt); err != nil {
					return err
				}
				premul = true
			} else {
				divisor = 1 / factor
			}
		default:
			return fmt.Errorf("cuda: %s: reduce op %s", call, op)
		}
		if divisor != 0 && sendN > 0 {
			code, _ := dtypeCode(dt)
			if err := st.launch(kDivide, st.blocks(kDivide, sendN), threadsPerBlock, cs, uint64(send), uint64(code), uint64(sendN), f64bits(divisor)); err != nil {
				return err
			}
		}
		err := l.reduceOn(call, f, comm, uint64(send), uint64(recv), count, ndt, nop, cs)
		switch {
		case premul && errors.Is(err, gpu.ErrInProgress):
			// The call is not over until Poll says so, which destroys
			// the operator then.
			c.mu.Lock()
			c.ops = append(c.ops, nop)
			c.mu.Unlock()
		case premul:
			// NCCL allows destroying an operator once the calls given it
			// have returned.
			err = errors.Join(err, l.destroyOp(comm, nop))
		}
		return err
	})
}

func ncclDType(dt ir.DType) (int, error) {
	switch dt {
	case ir.FP64:
		return ncclFloat64, nil
	case ir.FP32:
		return ncclFloat32, nil
	case ir.BF16:
		return ncclBfloat16, nil
	case ir.FP16:
		return ncclFloat16, nil
	}
	return 0, fmt.Errorf("reduction of %s: only fp64, fp32, bf16 and fp16 are reduced", dt)
}

// Split makes the communicator of the members that pass color, ranked by
// key (ncclCommSplit, NCCL 2.18), with c's configuration. On a
// non-blocking c it returns the new communicator with gpu.ErrInProgress:
// poll it (gpu.Guard does) before any other use. A blocking c holds the
// device until every member of c has called it.
func (c *Comm) Split(color, key int) (gpu.Comm, error) {
	if color < 0 {
		return nil, fmt.Errorf("cuda: ncclCommSplit: color %d (every member joins a group here)", color)
	}
	sub := &Comm{dev: c.dev, lib: c.lib, nonBlocking: c.nonBlocking}
	err := c.dev.do(func(*state) error {
		comm := unsafe.Pointer(c.comm.Load())
		if comm == nil {
			return errCommClosed
		}
		p, err := c.lib.split(comm, color, key)
		if p != nil && (err == nil || errors.Is(err, gpu.ErrInProgress)) {
			sub.comm.Store((*byte)(p))
		}
		return err
	})
	switch {
	case errors.Is(err, gpu.ErrInProgress):
		return sub, err
	case err != nil:
		return nil, errors.Join(err, sub.Abort())
	}
	if err := sub.Poll(); err != nil { // ready: learn its shape
		return nil, errors.Join(err, sub.Abort())
	}
	return sub, nil
}

// Abort stops the communicator's outstanding work (ncclCommAbort). It
// runs on the caller's thread without the device's mutex, because it is
// what unblocks a hung collective a call holding the mutex may be stuck
// behind; NCCL
// selects the communicator's device itself. The communicator is unusable
// after it.
func (c *Comm) Abort() error {
	comm := unsafe.Pointer(c.comm.Swap(nil))
	if comm == nil {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return c.lib.abort(comm)
}

// AsyncError is the communicator's asynchronous error
// (ncclCommGetAsyncError): a watchdog polls it while waiting on a
// collective, and Aborts when it is set. It is nil where this NCCL cannot
// tell, and after Abort or Close.
func (c *Comm) AsyncError() error {
	comm := unsafe.Pointer(c.comm.Load())
	if comm == nil {
		return nil
	}
	if err := c.lib.asyncErrorOf(comm); !errors.Is(err, gpu.ErrInProgress) {
		return err
	}
	return nil
}

// Close destroys the communicator (ncclCommDestroy) on the device
// (Device.do). Close communicators before their Device.
func (c *Comm) Close() error {
	comm := unsafe.Pointer(c.comm.Swap(nil))
	if comm == nil {
		return nil
	}
	return c.dev.do(func(*state) error { return c.lib.destroy(comm) })
}
