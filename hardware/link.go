package hardware

// links are per-GPU, per-direction bandwidths in bytes per second.
var links = map[string]float64{
	"nvlink3":     300e9, // A100: 600 GB/s bidirectional
	"nvlink4":     450e9, // H100/H200: 900 GB/s bidirectional
	"nvlink5":     900e9, // B200: 1.8 TB/s bidirectional
	"xgmi":        448e9, // MI300X: 7 Infinity Fabric links × 64 GB/s
	"pcie4":       32e9,  // x16
	"pcie5":       64e9,  // x16
	"ndr400":      50e9,  // InfiniBand NDR, 400 Gb/s per GPU
	"hdr200":      25e9,  // InfiniBand HDR, 200 Gb/s per GPU
	"roce400":     50e9,  // 400 GbE RoCE v2 per GPU
	"roce200":     25e9,  // 200 GbE RoCE v2 per GPU
	"ethernet100": 12.5e9,
}

// Link returns the bandwidth of the link preset named name, per GPU and
// per direction in bytes/s, and whether it exists.
func Link(name string) (float64, bool) {
	bw, ok := links[name]
	return bw, ok
}

// LinkNames lists the link presets in name order.
func LinkNames() []string { return sortedKeys(links) }
