//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"
)

// PCIBusID is the device's PCI address in NVML's busId form,
// "00000000:65:00.0". NVML numbers the machine's GPUs in its own order
// and ignores CUDA_VISIBLE_DEVICES, so this ordinal's NVML index may name
// another board; the bus id names the same one in both (devices.Sampler
// opens it). gorgonia.org/cu does not wrap cuDeviceGetPCIBusId, so the id
// is built from the three attributes that function formats.
func (d *Device) PCIBusID() (string, error) {
	var id string
	err := d.do(func(st *state) error {
		a, err := st.dev.Attributes(cu.PciDomainID, cu.PciBusID, cu.PciDeviceID)
		if err != nil {
			return fmt.Errorf("cuda: cuDeviceGetAttribute(PCI domain, bus, device) on device %d: %w", d.ordinal, err)
		}
		// A GPU is function 0 of its PCI device.
		id = fmt.Sprintf("%08x:%02x:%02x.0", a[0], a[1], a[2])
		return nil
	})
	return id, err
}
