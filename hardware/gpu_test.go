package hardware

import "testing"

// TestPresetsConsistent: every preset's default links are link presets,
// its device name maps back to it, and it has the figures the cost model
// divides by.
func TestPresetsConsistent(t *testing.T) {
	for _, name := range PresetNames() {
		g, _ := Preset(name)
		for _, l := range []string{g.HostLink, g.IntraNode, g.InterNode} {
			if _, ok := Link(l); l != "" && !ok {
				t.Errorf("%s: link %q is no link preset", name, l)
			}
		}
		if g.HostLink == "" || g.IntraNode == "" {
			t.Errorf("%s: no host or intra-node link", name)
		}
		if PresetByDevice(g.Device) != name {
			t.Errorf("%s: device %q maps to %q", name, g.Device, PresetByDevice(g.Device))
		}
		if g.HBMBytes <= 0 || g.HBMBandwidth <= 0 || g.Peak.BF16 <= 0 || g.SMs <= 0 {
			t.Errorf("%s: missing figures %+v", name, g)
		}
		if (g.TDPWatts == 0) != (g.IdleWatts == 0) || g.IdleWatts >= g.TDPWatts && g.TDPWatts != 0 {
			t.Errorf("%s: TDP %g W, idle %g W", name, g.TDPWatts, g.IdleWatts)
		}
	}
	if PresetByDevice("NVIDIA H100") != "" {
		t.Error("a device name is matched exactly; NVIDIA H100 is no preset's")
	}
}

// TestRecognize: the names NVML, rocm-smi and the calibration set's
// sources give map to presets; a part that only contains a preset's name
// (GB200, GH200) does not.
func TestRecognize(t *testing.T) {
	for _, c := range []struct {
		name string
		gib  float64
		want string
	}{
		{"NVIDIA A100-SXM4-80GB", 80, "a100-80gb"},
		{"NVIDIA A100-SXM4-40GB", 0, "a100-40gb"},
		{"NVIDIA A100-PCIE-40GB", 40, "a100-40gb"},
		{"A100", 40, "a100-40gb"},
		{"A100 80G", 80, "a100-80gb"},
		{"NVIDIA H100 80GB HBM3", 79.6, "h100-sxm"},
		{"NVIDIA H100 PCIe", 0, "h100-pcie"},
		{"H100 (DGX-H100)", 0, "h100-sxm"},
		{"NVIDIA H200", 140, "h200"},
		{"NVIDIA B200", 0, "b200"},
		{"NVIDIA L40S", 44.4, "l40s"},
		{"AMD Instinct MI300X", 192, "mi300x"},
		{"NVIDIA H100 SXM5 80GB", 0, "h100-sxm"},
		{"GB200 (DGX-GB200)", 0, ""},
		{"NVIDIA GH200 480GB", 0, ""},
		{"NVIDIA GeForce RTX 4090", 24, ""},
	} {
		if got := Recognize(c.name, c.gib); got != c.want {
			t.Errorf("Recognize(%q, %g) = %q, want %q", c.name, c.gib, got, c.want)
		}
	}
	// Every preset's own device name is recognised as it.
	for _, name := range PresetNames() {
		g, _ := Preset(name)
		if got := Recognize(g.Device, float64(g.HBMBytes)/(1<<30)); got != name {
			t.Errorf("Recognize(%q) = %q, want %s", g.Device, got, name)
		}
	}
}
