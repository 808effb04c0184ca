package hardware

import "strings"

// Recognize returns the GPU preset of a GPU known by a reported or
// published name, or "" where fsdpc has none. name is what NVML or
// nvidia-smi prints ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"),
// what rocm-smi prints ("AMD Instinct MI300X"), a preset's device name,
// or a paper's label ("A100 80G", "H100 (DGX-H100)"); memGiB, when not 0,
// is the card's memory, which tells the 40 GB A100 from the 80 GB one when
// the name does not. The 40 GB A100 and the PCIe H100 are presets of
// their own: their memory (and the PCIe card's clocks and links) decide
// what fits. It is the one place fsdpc maps a GPU's name to a preset
// (`fsdpc devices`, the calibration set's rows).
//
// The part must start the name after the vendor: a GB200 superchip is
// not a B200 preset, nor a GH200 an H200.
func Recognize(name string, memGiB float64) string {
	g := strings.ToUpper(strings.TrimSpace(name))
	for _, vendor := range []string{"NVIDIA ", "AMD INSTINCT ", "AMD "} {
		g = strings.TrimPrefix(g, vendor)
	}
	switch {
	case strings.HasPrefix(g, "A100") && (strings.Contains(g, "40G") || memGiB > 0 && memGiB < 60):
		return "a100-40gb"
	case strings.HasPrefix(g, "A100"):
		return "a100-80gb"
	case strings.HasPrefix(g, "H200"):
		return "h200"
	case strings.HasPrefix(g, "H100") && strings.Contains(g, "PCIE"):
		return "h100-pcie"
	case strings.HasPrefix(g, "H100"):
		return "h100-sxm"
	case strings.HasPrefix(g, "B200"):
		return "b200"
	case strings.HasPrefix(g, "L40S"):
		return "l40s"
	case strings.HasPrefix(g, "MI300X"):
		return "mi300x"
	}
	return ""
}
