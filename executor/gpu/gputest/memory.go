package gputest

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/fsdpc/fsdpc/executor/gpu"
)

// Where allocations go: device memory from deviceBase, pinned host memory
// from hostBase, each at increasing addresses, never reused.
const (
	deviceBase gpu.Ptr = 0x10_0000_0000
	hostBase   gpu.Ptr = 0x7000_0000_0000
	alignment          = 256 // every allocation starts on such a boundary
	guard              = 256 // and at least this many bytes follow it unused
)

// alloc is one allocation.
type alloc struct {
	base    gpu.Ptr
	size    int64
	host    bool
	mem     []byte // nil once freed
	freeing bool   // a Free is waiting for the queued work on it
	// pins are the accesses of queued or running work: Free waits for
	// none, Upload and Download for none overlapping theirs.
	pins map[*pin]struct{}
	sh   *shadow // the race detector's state (race detection)
}

// pin is one access of queued work to bytes [lo, hi) of an allocation.
type pin struct {
	stream gpu.Stream // 0: the host
	lo, hi int64
}

func (a *alloc) end() gpu.Ptr { return a.base + gpu.Ptr(a.size) }

// queued returns the first (by stream, then offset) pin of a stream's
// queued work that overlaps bytes [lo, hi), or nil.
func (a *alloc) queued(lo, hi int64) *pin {
	var first *pin
	for q := range a.pins {
		if q.stream == 0 || q.hi <= lo || hi <= q.lo {
			continue
		}
		if first == nil || q.stream < first.stream || q.stream == first.stream && q.lo < first.lo {
			first = q
		}
	}
	return first
}

func (a *alloc) String() string {
	kind := "device"
	if a.host {
		kind = "host"
	}
	return fmt.Sprintf("%s allocation %#x (%d bytes)", kind, uint64(a.base), a.size)
}

type region struct {
	next   gpu.Ptr
	allocs []*alloc // by base, increasing
}

type memory struct {
	device, host region
}

func (m *memory) init() {
	m.device.next = deviceBase
	m.host.next = hostBase
}

func (m *memory) region(host bool) *region {
	if host {
		return &m.host
	}
	return &m.device
}

// find returns the allocation, live or freed, whose base is the greatest
// not above p, or nil.
func (m *memory) find(p gpu.Ptr) *alloc {
	r := m.region(p >= hostBase)
	i := sort.Search(len(r.allocs), func(i int) bool { return r.allocs[i].base > p })
	if i == 0 {
		return nil
	}
	return r.allocs[i-1]
}

// release drops every allocation's bytes (Close).
func (m *memory) release() {
	for _, r := range []*region{&m.device, &m.host} {
		for _, a := range r.allocs {
			a.mem, a.sh = nil, nil
		}
	}
}

// resolve finds the live allocation holding bytes [p, p+n), n > 0, and
// the offset of p in it. d.mu is held.
func (d *Device) resolve(p gpu.Ptr, n int64) (*alloc, int64, error) {
	a := d.mem.find(p)
	switch {
	case a == nil || p >= a.end() && p-a.end() >= guard:
		return nil, 0, fmt.Errorf("address %#x is in no allocation: %w", uint64(p), ErrInvalidAddress)
	case p >= a.end():
		return nil, 0, fmt.Errorf("address %#x is %d bytes past the end of %s: %w", uint64(p), p-a.end(), a, ErrInvalidAddress)
	case a.mem == nil || a.freeing:
		return nil, 0, fmt.Errorf("bytes [%#x, +%d) are in %s, which was freed: %w", uint64(p), n, a, ErrInvalidAddress)
	}
	off := int64(p - a.base)
	if n > a.size-off {
		return nil, 0, fmt.Errorf("bytes [%#x, +%d) run %d bytes past the end of %s: %w", uint64(p), n, n-(a.size-off), a, ErrInvalidAddress)
	}
	return a, off, nil
}

// Alloc takes device memory.
func (d *Device) Alloc(bytes int64) (gpu.Ptr, error) { return d.alloc("Alloc", bytes, false) }

// AllocHost takes pinned host memory; the capacity does not limit it.
func (d *Device) AllocHost(bytes int64) (gpu.Ptr, error) { return d.alloc("AllocHost", bytes, true) }

func (d *Device) alloc(call string, bytes int64, host bool) (gpu.Ptr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("gputest: %s(%d): %w: the size must be positive", call, bytes, ErrInvalidValue)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(call); err != nil {
		return 0, err
	}
	st := &d.stats
	if !host && bytes > d.cfg.capacity-st.LiveBytes {
		return 0, fmt.Errorf("gputest: %s(%d): %w: %d of %d bytes in use", call, bytes, ErrOutOfMemory, st.LiveBytes, d.cfg.capacity)
	}
	r := d.mem.region(host)
	a := &alloc{base: r.next, size: bytes, host: host, mem: make([]byte, bytes), pins: map[*pin]struct{}{}}
	fill(a.mem, 0xff) // poison: NaN in every float format
	if d.cfg.race {
		a.sh = newShadow(bytes)
	}
	r.allocs = append(r.allocs, a)
	r.next = (a.end() + guard + alignment - 1) / alignment * alignment
	if host {
		st.LiveHostBytes += bytes
		st.PeakHostBytes = max(st.PeakHostBytes, st.LiveHostBytes)
	} else {
		st.LiveBytes += bytes
		st.PeakBytes = max(st.PeakBytes, st.LiveBytes)
	}
	st.Allocs++
	return a.base, nil
}

// fill sets every byte of b to v.
func fill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// Free returns an allocation. Like cuMemFree it first waits for the
// queued work that uses it; its addresses are never handed out again.
func (d *Device) Free(p gpu.Ptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open("Free"); err != nil {
		return err
	}
	a := d.mem.find(p)
	switch {
	case a == nil || a.base != p:
		return fmt.Errorf("gputest: Free(%#x): not the start of an allocation: %w", uint64(p), ErrInvalidAddress)
	case a.mem == nil || a.freeing:
		return fmt.Errorf("gputest: Free(%#x): %s was already freed: %w", uint64(p), a, ErrInvalidAddress)
	}
	for _, st := range d.streams {
		if c := st.cap; c != nil {
			// cuMemFree synchronises the device, an implicit dependency on
			// the capturing streams that invalidates the capture.
			err := fmt.Errorf("gputest: Free(%#x) while stream %d is capturing: cuMemFree synchronises the device: %w", uint64(p), c.origin.id, ErrCapture)
			c.invalidate(err)
			return err
		}
	}
	a.freeing = true
	for len(a.pins) > 0 && !d.closed {
		d.cond.Wait()
	}
	if err := d.open("Free"); err != nil {
		return err
	}
	a.mem, a.sh, a.freeing = nil, nil, false
	if a.host {
		d.stats.LiveHostBytes -= a.size
	} else {
		d.stats.LiveBytes -= a.size
	}
	d.stats.Frees++
	return nil
}

// MemInfo reports the capacity and what live device allocations leave
// of it.
func (d *Device) MemInfo() (free, total int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open("MemInfo"); err != nil {
		return 0, 0, err
	}
	return d.cfg.capacity - d.stats.LiveBytes, d.cfg.capacity, nil
}

// Upload copies data to dst in s's order, as cuMemcpyHtoDAsync from
// pageable memory does: data is taken at once, the bytes land when s
// reaches the copy, and only work ordered after it on s sees them.
func (d *Device) Upload(dst gpu.Ptr, data []byte, s gpu.Stream) error {
	buf := bytes.Clone(data)
	n := int64(len(buf))
	return d.launch(s, &kernel{kind: KindUpload, acc: []access{{dst, n, true}}, uploaded: n,
		body: func(b [][]byte) { copy(b[0], buf) }})
}

// Download copies from src to dst, synchronously.
func (d *Device) Download(dst []byte, src gpu.Ptr) error {
	call := fmt.Sprintf("Download(%d bytes, %#x)", len(dst), uint64(src))
	return d.hostCopy(call, src, int64(len(dst)), func(b []byte) { copy(dst, b) })
}

// hostCopy runs a Download of bytes [p, p+n) on the
// host: it fails on the sticky error, a bad address, queued work on the
// bytes, or (race detection) an access the host is not ordered after.
func (d *Device) hostCopy(call string, p gpu.Ptr, n int64, move func([]byte)) error {
	d.mu.Lock()
	if err := d.open(call); err != nil {
		d.mu.Unlock()
		return err
	}
	if err := d.sticky(call); err != nil {
		d.mu.Unlock()
		return err
	}
	if n == 0 {
		d.mu.Unlock()
		return nil
	}
	a, off, err := d.resolve(p, n)
	if err != nil {
		d.mu.Unlock()
		return fmt.Errorf("gputest: %s: %w", call, err)
	}
	if d.cfg.race {
		d.host = d.host.tick(0)
		if err := hazard(a, a.sh, off, n, false, 0, d.host, liveName); err != nil {
			d.mu.Unlock()
			return fmt.Errorf("gputest: %s: %w", call, err)
		}
	}
	if q := a.queued(off, off+n); q != nil {
		d.mu.Unlock()
		return fmt.Errorf("gputest: %s: stream %d has queued work on bytes [%#x, %#x) of %s: %w",
			call, q.stream, uint64(a.base)+uint64(max(q.lo, off)), uint64(a.base)+uint64(min(q.hi, off+n)), a, ErrHazard)
	}
	q := &pin{lo: off, hi: off + n}
	a.pins[q] = struct{}{}
	b := a.mem[off : off+n]
	d.mu.Unlock()

	d.memMu.Lock()
	move(b)
	d.memMu.Unlock()

	d.mu.Lock()
	defer d.mu.Unlock()
	delete(a.pins, q)
	d.stats.BytesDownloaded += n
	d.cond.Broadcast()
	return nil
}
