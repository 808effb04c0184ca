package schedule

// Hardware profiles: the calibration constants that differ by GPU,
// fitted to published measured runs (docs/cost-model.md, "Fidelity"; rerun
// the fit with go run ./bench/fidelity). Keys are the GPU presets' names,
// as plans store them; a GPU given as a table of figures gets
// DefaultCalibration.
var profiles = map[string]func(*Calibration){
	"NVIDIA A100 SXM4 80GB": a100Profile,
	"NVIDIA A100 SXM4 40GB": a100Profile,
}

// a100Profile: FlashAttention-2 reaches 50–73% of the A100's peak in
// forward and about two thirds of that in backward (Dao 2023, arXiv
// 2307.08691, figures 4–7).
func a100Profile(c *Calibration) {
	c.AttentionForward, c.AttentionBackward = 0.6, 0.45
}

// CalibrationFor returns the calibration for a GPU by its preset name.
func CalibrationFor(gpu string) Calibration {
	c := DefaultCalibration
	if f, ok := profiles[gpu]; ok {
		f(&c)
	}
	return c
}
