package gputest

import (
	"encoding/binary"
	"fmt"

	"github.com/fsdpc/fsdpc/executor/gpu"
)

// The moves kernel's table, as cuda.Device.Moves keeps it: the pieces of
// an op's runs live in device memory, one table per distinct content,
// uploaded on first use and read by every later Moves with the same runs,
// on whatever stream it runs. The table is shared by every stream (in a
// rehearsal every virtual rank has the same runs), so its upload must be
// ordered before every reader: cuda writes it synchronously before it is
// published, and so does this model, a write by the host, which every
// later launch on every stream is ordered after. With race detection a
// table written on its first user's stream instead, as cuda once did
// (issue 29, N1), is read by the other streams unordered: the detector
// reports it.

// tableEntryBytes is one run's entry in the model's table (cuda's
// moveSize: four 8-byte fields).
const tableEntryBytes = 32

// tableKey is the table's content: every field of every run.
func tableKey(runs []gpu.Run) []byte {
	b := make([]byte, 0, tableEntryBytes*len(runs))
	for _, r := range runs {
		b = binary.LittleEndian.AppendUint64(b, uint64(r.DstOff))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.SrcOff))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.N))
		b = binary.LittleEndian.AppendUint64(b, uint64(r.DstDType)|uint64(r.SrcDType)<<8)
	}
	return b
}

// moveTable returns the device address and size of runs' table,
// uploading it on first use: written by the host at once, like cuda's
// cuMemcpyHtoD from pinned memory. Tables are not device allocations the
// caller made: they count in Stats.TableBytes, not LiveBytes, and live
// until Close.
func (d *Device) moveTable(runs []gpu.Run) (gpu.Ptr, int64, error) {
	key := tableKey(runs)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open("Moves"); err != nil {
		return 0, 0, err
	}
	if p, ok := d.tables[string(key)]; ok {
		return p, int64(len(key)), nil
	}
	n := int64(len(key))
	r := &d.mem.device
	a := &alloc{base: r.next, size: n, mem: key, pins: map[*pin]struct{}{}}
	r.allocs = append(r.allocs, a)
	r.next = (a.end() + guard + alignment - 1) / alignment * alignment
	if d.cfg.race {
		a.sh = newShadow(n)
		d.host = d.host.tick(0)
		if err := hazard(a, a.sh, 0, n, true, 0, d.host, liveName); err != nil {
			return 0, 0, fmt.Errorf("gputest: Moves: writing its table: %w", err)
		}
	}
	if d.tables == nil {
		d.tables = map[string]gpu.Ptr{}
	}
	d.tables[string(key)] = a.base
	d.stats.TableBytes += n
	return a.base, n, nil
}
