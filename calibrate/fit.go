package calibrate

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/internal/safetext"
)

// Parameter is a physical constant of the cost model that a fit may
// adjust, within bounds that keep it physical (hardware.ProfileKey.Fit,
// which cites them). Relative bounds are multiples of the GPU's built-in
// (sourced) value: an attention kernel's efficiency differs by chip, and a
// fit may move it only as far as the published measurements of that
// kernel spread.
type Parameter struct {
	Name     string
	Lo, Hi   float64
	Relative bool
	get      func(*hardware.Calibration) float64
	set      func(*hardware.Calibration, float64)
}

// fitted is the parameter that fits profile key name, within its range.
func fitted(name string) Parameter {
	k, ok := hardware.LookupProfileKey(name)
	if !ok || !k.Fit.Fitted() {
		panic(fmt.Sprintf("calibrate: %q is not a profile key a fit adjusts (hardware.ProfileKeys)", name))
	}
	return Parameter{name, k.Fit.Lo, k.Fit.Hi, k.Fit.Relative, func(c *hardware.Calibration) float64 { return *k.Field(c) },
		func(c *hardware.Calibration, v float64) { *k.Field(c) = v }}
}

// bounds are p's limits for a fit starting from start.
func (p Parameter) bounds(start *hardware.Calibration) (lo, hi float64) {
	if p.Relative {
		v := p.get(start)
		return p.Lo * v, p.Hi * v
	}
	return p.Lo, p.Hi
}

// Parameters are the constants `fsdpc calibrate` can fit: every profile
// key with a fit range (hardware.ProfileKeys, which holds the ranges and
// their sources), in the order a profile file lists them, and attention,
// the forward attention efficiency with the backward one kept in
// proportion (FlashAttention's backward is slower than its forward on
// every GPU) within attention_forward's range; attention_forward and
// attention_backward move one alone.
var Parameters = []Parameter{
	fitted(hardware.KeyMaxEfficiency),
	attention(fitted(hardware.KeyAttentionForward)),
	fitted(hardware.KeyAttentionForward),
	fitted(hardware.KeyAttentionBackward),
	fitted(hardware.KeyNICEfficiency),
	fitted(hardware.KeyMemoryEfficiency),
	fitted(hardware.KeyElementwise),
	fitted(hardware.KeyOverlap),
}

// attention is the compound "attention" parameter, within fwd's range.
func attention(fwd Parameter) Parameter {
	fwd.Name = "attention"
	fwd.set = func(c *hardware.Calibration, v float64) {
		if c.AttentionForward > 0 {
			c.AttentionBackward *= v / c.AttentionForward
		}
		c.AttentionForward = v
	}
	return fwd
}

// DefaultFit is what `fsdpc calibrate` fits unless told otherwise: the
// GEMM and attention efficiencies and the NICs' share of line rate.
var DefaultFit = []string{"max_efficiency", "attention", "nic_efficiency"}

// Residual is one run's throughput before and after the fit.
type Residual struct {
	ID                      string
	Measured, Before, After float64 // tokens/s per GPU
}

// Fit is a fitted profile for one GPU.
type Fit struct {
	GPU        string
	Parameters []string
	Start, Cal hardware.Calibration
	Residuals  []Residual
	// MAPE before and after, over the runs fitted.
	Before, After float64
	// The fit's own objective, mean squared log error, before and after:
	// the search never raises it (MAPE can rise a little where the two
	// disagree).
	LossBefore, LossAfter float64
	Evaluations           int
	// AtBound names the parameters the search pushed to a limit of their
	// physical range: the runs disagree with the model somewhere else,
	// and the fit is not a measurement of them. `calibrate -o` writes no
	// profile then.
	AtBound []string
}

// ErrNotConverged is returned when the search runs out of evaluations.
var ErrNotConverged = fmt.Errorf("the fit did not converge")

// maxEvaluations bounds the search; tolerance is the step, as a fraction
// of a parameter's range, at which it stops.
var maxEvaluations = 2000 // a variable so a test can starve the search

const tolerance = 1e-3

// Fit adjusts the named parameters of gpu's calibration to minimise the
// mean squared log error of predicted against measured tokens/s per GPU
// over the set's runs on that GPU that ran and are predicted to fit. It is
// a bounded pattern search: each parameter in turn moves by ± a step while
// that lowers the error, and the step halves when none does, until it is
// below tolerance of the parameter's range. Memory does not depend on
// these parameters and is not fitted.
func (s *Set) Fit(gpus []string, names []string) (*Fit, error) {
	gpu := strings.Join(gpus, "+")
	var params []Parameter
	for _, n := range names {
		i := paramIndex(Parameters, n)
		if i < 0 {
			known := make([]string, len(Parameters))
			for j, p := range Parameters {
				known[j] = p.Name
			}
			return nil, fmt.Errorf("unknown parameter %q (parameters: %s)", n, strings.Join(known, ", "))
		}
		params = append(params, Parameters[i])
	}
	var runs []*Planned
	for i := range s.Runs {
		r := &s.Runs[i]
		if contains(gpus, r.gpu) && !r.oom && r.tokensPerGPU > 0 && r.fits() {
			runs = append(runs, r)
		}
	}
	if len(runs) <= len(params) {
		return nil, fmt.Errorf("%s: %d runs that ran and fit, not enough to fit %d parameters (need more runs than parameters)", gpu, len(runs), len(params))
	}
	start := builtIn(gpus[0])
	for _, g := range gpus[1:] {
		if builtIn(g) != start {
			return nil, fmt.Errorf("%s: the GPUs start from different profiles; fit them one at a time", gpu)
		}
	}
	f := &Fit{GPU: gpu, Parameters: names, Start: start}
	predictAll := func(c hardware.Calibration) ([]float64, error) {
		out := make([]float64, len(runs))
		for i, r := range runs {
			res, err := r.predict(func(string) hardware.Calibration { return c })
			if err != nil {
				return nil, err
			}
			out[i] = res.predTPS
		}
		f.Evaluations++
		return out, nil
	}
	loss := func(c hardware.Calibration) (float64, error) {
		pred, err := predictAll(c)
		if err != nil {
			return 0, err
		}
		sum := 0.0
		for i, r := range runs {
			d := math.Log(pred[i] / r.tokensPerGPU)
			sum += d * d
		}
		return sum / float64(len(runs)), nil
	}
	cur := start
	best, err := loss(cur)
	if err != nil {
		return nil, err
	}
	f.LossBefore = best
	steps := make([]float64, len(params))
	lo, hi := make([]float64, len(params)), make([]float64, len(params))
	for i, p := range params {
		lo[i], hi[i] = p.bounds(&start)
		steps[i] = 0.1 * (hi[i] - lo[i])
	}
	for {
		done := true
		for i := range params {
			if steps[i] >= tolerance*(hi[i]-lo[i]) {
				done = false
			}
		}
		if done {
			break
		}
		if f.Evaluations >= maxEvaluations {
			return nil, fmt.Errorf("%s: %w within %d evaluations", gpu, ErrNotConverged, maxEvaluations)
		}
		for i, p := range params {
			if steps[i] < tolerance*(hi[i]-lo[i]) {
				continue
			}
			improved := false
			for _, dir := range []float64{1, -1} {
				next := cur
				p.set(&next, math.Min(hi[i], math.Max(lo[i], p.get(&next)+dir*steps[i])))
				l, err := loss(next)
				if err != nil {
					return nil, err
				}
				if l < best-1e-12 {
					cur, best, improved = next, l, true
					break
				}
			}
			if !improved {
				steps[i] /= 2
			}
		}
	}
	f.Cal, f.LossAfter = cur, best
	for i, p := range params {
		if v := p.get(&cur); v <= lo[i]+2*tolerance*(hi[i]-lo[i]) || v >= hi[i]-2*tolerance*(hi[i]-lo[i]) {
			f.AtBound = append(f.AtBound, fmt.Sprintf("%s %.4g (physical range %.4g–%.4g)", p.Name, v, lo[i], hi[i]))
		}
	}
	before, err := predictAll(start)
	if err != nil {
		return nil, err
	}
	after, err := predictAll(cur)
	if err != nil {
		return nil, err
	}
	for i, r := range runs {
		f.Residuals = append(f.Residuals, Residual{ID: r.id, Measured: r.tokensPerGPU, Before: before[i], After: after[i]})
		f.Before += math.Abs(before[i]/r.tokensPerGPU - 1)
		f.After += math.Abs(after[i]/r.tokensPerGPU - 1)
	}
	f.Before *= 100 / float64(len(runs))
	f.After *= 100 / float64(len(runs))
	return f, nil
}

func paramIndex(ps []Parameter, name string) int {
	for i, p := range ps {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// Families groups the GPU presets the set's runs use by their chip's
// profile (hardware.GPU.Profile): one die has one set of physical
// constants, so H100 and H200 (GH100) are fitted together, as are the
// A100s (GA100).
func (s *Set) Families() [][]string {
	seen := map[string]bool{}
	byChip := map[string][]string{}
	for _, r := range s.Runs {
		if !seen[r.gpu] {
			seen[r.gpu] = true
			chip := r.gpu
			if g, ok := hardware.Preset(r.gpu); ok && g.Profile != "" {
				chip = g.Profile
			}
			byChip[chip] = append(byChip[chip], r.gpu)
		}
	}
	var out [][]string
	for _, g := range byChip {
		sort.Strings(g)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// builtIn is the built-in calibration of GPU preset gpu, the one a plan
// for it starts from (DefaultCalibration for a name that is no preset).
func builtIn(gpu string) hardware.Calibration {
	g, _ := hardware.Preset(gpu)
	return hardware.CalibrationFor(g.Device)
}

// WriteFit prints the fitted values and the residuals.
func WriteFit(w io.Writer, f *Fit) {
	fmt.Fprintf(w, "%s: %d runs, %d evaluations; throughput MAPE %.1f%% -> %.1f%%\n", f.GPU, len(f.Residuals), f.Evaluations, f.Before, f.After)
	for _, n := range f.Parameters {
		p := Parameters[paramIndex(Parameters, n)]
		start, cal := f.Start, f.Cal
		fmt.Fprintf(w, "  %-20s %.4f -> %.4f\n", n, p.get(&start), p.get(&cal))
	}
	for _, b := range f.AtBound {
		fmt.Fprintf(w, "  at the edge of its physical range: %s; the runs disagree with the model elsewhere, so this is not a measurement of it\n", b)
	}
	fmt.Fprintf(w, "  %-22s %10s %10s %8s %10s %8s\n", "row", "measured", "before", "error", "after", "error")
	for _, r := range f.Residuals {
		fmt.Fprintf(w, "  %-22s %10.0f %10.0f %+7.1f%% %10.0f %+7.1f%%\n", r.ID, r.Measured, r.Before, 100*(r.Before/r.Measured-1), r.After, 100*(r.After/r.Measured-1))
	}
}

// WriteProfile writes the fitted constants as a hardware profile file.
// source names the inputs for the first comment line; the caller quotes
// file names in it (safetext.TOML), and it is escaped to stay on the line.
func WriteProfile(w io.Writer, f *Fit, source string) error {
	fmt.Fprintf(w, "# fsdpc hardware profile for %s, fitted by `fsdpc calibrate` to %d measured runs of %s\n",
		safetext.TOMLComment(f.GPU), len(f.Residuals), safetext.TOMLComment(source))
	fmt.Fprintf(w, "# (throughput MAPE %.1f%% before, %.1f%% after). Name it in [cluster] as profile = \"<this file>\".\n", f.Before, f.After)
	var gpus []string
	for _, g := range strings.Split(f.GPU, "+") {
		gpus = append(gpus, safetext.TOML(g))
	}
	fmt.Fprintf(w, "[profile]\ngpus = [%s]\n", strings.Join(gpus, ", "))
	cal := f.Cal
	for _, p := range Parameters {
		if p.Name != "attention" {
			fmt.Fprintf(w, "%s = %.6g\n", p.Name, p.get(&cal))
		}
	}
	return nil
}
