package schedule

// Hardware profiles: the calibration constants that differ by chip.
// Sourced figures are cited where they are set; fitted ones come from
// `fsdpc calibrate -fit max_efficiency calibrate/published-runs.csv`
// (docs/cost-model.md, "Fidelity"), one value per chip, fitted over every
// measured run on that chip, nothing per run. Keys are the GPU presets'
// names, as plans store them; a GPU given as a table of figures gets
// DefaultCalibration.
var profiles = map[string]func(*Calibration){
	"NVIDIA A100 SXM4 80GB": ga100Profile,
	"NVIDIA A100 SXM4 40GB": ga100Profile,
	"NVIDIA H100 SXM5 80GB": gh100Profile,
	"NVIDIA H200 SXM 141GB": gh100Profile,
}

// ga100Profile: FlashAttention-2 reaches 50–73% of the A100's peak in
// forward and about two thirds of that in backward (Dao 2023, arXiv
// 2307.08691, figures 4–7). Sustained GEMM efficiency fitted to 15
// measured A100 runs (torchtitan, fms-fsdp).
func ga100Profile(c *Calibration) {
	c.AttentionForward, c.AttentionBackward = 0.6, 0.45
	c.MaxEfficiency = 0.803
}

// gh100Profile: H100 and H200 SXM share the GH100 die and its 700 W
// limit. Sustained GEMM efficiency fitted to 11 measured runs on both
// (fms-fsdp on H100, KempnerForge on H200); attention keeps the default,
// FlashAttention-2's 35% of peak on H100.
func gh100Profile(c *Calibration) {
	c.MaxEfficiency = 0.690
}

// CalibrationFor returns the calibration for a GPU by its preset name.
func CalibrationFor(gpu string) Calibration {
	c := DefaultCalibration
	if f, ok := profiles[gpu]; ok {
		f(&c)
	}
	return c
}
