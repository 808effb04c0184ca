//go:build cuda

package cuda

import (
	"regexp"
	"testing"

	"github.com/fsdpc/fsdpc/cuda/devices"
)

// TestPCIBusIDOpensNVML: the bus id has NVML's form and NVML finds the
// board by it; its memory in use grows by at least an allocation made
// through this context (other processes may add more, never less).
func TestPCIBusIDOpensNVML(t *testing.T) {
	d, _ := openDevice(t)
	id, err := d.PCIBusID()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2}\.0$`).MatchString(id) {
		t.Fatalf("bus id %q", id)
	}
	s, err := devices.OpenSampler(id)
	if err != nil {
		t.Fatalf("NVML by bus id %s: %v", id, err)
	}
	defer s.Close()
	before, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 30
	p, err := d.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	after, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %+v, then %+v", id, before, after)
	if after.Total == 0 || after.Used > after.Total || after.Used < before.Used+size*9/10 {
		t.Errorf("NVML saw %d bytes in use, then %d of %d after a 1 GiB allocation", before.Used, after.Used, after.Total)
	}
	if after.HasProcess && after.Process < size {
		t.Errorf("this process uses %d bytes by NVML, after a 1 GiB allocation", after.Process)
	}
}
