package hardware

import "testing"

// TestProfilesNamePresets: every profile is some preset's, and every
// preset's profile exists (a misspelt name would leave its chip on the
// defaults without a word).
func TestProfilesNamePresets(t *testing.T) {
	used := map[string]bool{}
	for _, name := range PresetNames() {
		g, _ := Preset(name)
		if _, ok := profiles[g.Profile]; !ok {
			t.Errorf("preset %s names profile %q, which does not exist", name, g.Profile)
		}
		used[g.Profile] = true
	}
	for name := range profiles {
		if !used[name] {
			t.Errorf("profile %q is no preset's", name)
		}
	}
}

// TestCalibrationFor: each preset gets its chip's constants, measured or
// fitted (docs/cost-model.md, "GPU profiles"); a GPU given as figures
// the defaults.
func TestCalibrationFor(t *testing.T) {
	for _, c := range []struct {
		gpu                  string
		emax, fwd, bwd, elem float64
	}{
		{"NVIDIA A100 SXM4 80GB", 0.869, 0.6, 0.45, 0.519},
		{"NVIDIA H100 SXM5 80GB", 0.690, 0.35, 0.30, 0.539},
		{"NVIDIA H200 SXM 141GB", 0.690, 0.35, 0.30, 0.539},
		{"NVIDIA B200 180GB", 0.776, 0.167, 0.137, 0.8},
		{"AMD Instinct MI300X 192GB", 0.511, 0.35, 0.30, 0.8},
		{"NVIDIA L40S 48GB", 0.743, 0.35, 0.30, 0.8},
		{"NVIDIA H100 PCIe 80GB", 0.656, 0.35, 0.30, 0.8},
		{"my accelerator", 0.75, 0.35, 0.30, 0.8},
	} {
		cal := CalibrationFor(c.gpu)
		if cal.MaxEfficiency != c.emax || cal.AttentionForward != c.fwd || cal.AttentionBackward != c.bwd || cal.ElementwiseEfficiency != c.elem {
			t.Errorf("%s: E_max %g, attention %g/%g, element-wise %g; want %g, %g/%g, %g", c.gpu, cal.MaxEfficiency, cal.AttentionForward, cal.AttentionBackward, cal.ElementwiseEfficiency, c.emax, c.fwd, c.bwd, c.elem)
		}
	}
}
