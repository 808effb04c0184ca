package calibrate

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
)

// HeldOut is one source's throughput error twice over: predicted with the
// built-in profiles (fitted over every source, this one included: the
// in-sample error) and predicted with max_efficiency refitted per chip
// over the other sources only (the held-out error, what a source fsdpc
// has never seen can expect).
type HeldOut struct {
	Source            string
	Rows              int
	InSample, HeldOut float64 // throughput MAPE, %
	// Fitted is the refitted max_efficiency of each chip the source's
	// rows run on, beside the built-in value; Unfitted names a chip no
	// other source measures, predicted with DefaultCalibration's.
	Fitted   []ChipFit
	Unfitted []string
}

// ChipFit is one chip's max_efficiency fitted without a source.
type ChipFit struct {
	GPUs           []string
	BuiltIn, Fit   float64
	RunsFittedOver int
}

// LeaveOneSourceOut computes HeldOut for every source with a row that
// ran: for each, the GEMM efficiency (the only fitted constant of the
// built-in profiles, hardware/profiles.go) is refitted for each chip its
// rows use, over the rows of every other source on that chip, and its
// rows are predicted with that fit. Rows that ran out of memory or were
// predicted not to fit keep their in-sample figures' treatment: a run
// that trained but is predicted not to fit counts 100%.
func (s *Set) LeaveOneSourceOut() ([]HeldOut, error) {
	inSample, err := s.Predict(nil)
	if err != nil {
		return nil, err
	}
	var sources []string
	for _, r := range s.Runs {
		if !r.oom && r.tokensPerGPU > 0 && !slices.Contains(sources, r.source) {
			sources = append(sources, r.source)
		}
	}
	sort.Strings(sources)
	families := s.Families()
	var out []HeldOut
	for _, src := range sources {
		h := HeldOut{Source: src}
		rest := &Set{}
		for _, r := range s.Runs {
			if r.source != src {
				rest.Runs = append(rest.Runs, r)
			}
		}
		cal := map[string]hardware.Calibration{}
		for _, fam := range families {
			if !s.sourceUses(src, fam) {
				continue
			}
			start := builtIn(fam[0])
			fit, err := rest.Fit(fam, []string{"max_efficiency"})
			var c hardware.Calibration
			switch {
			case err == nil:
				c = fit.Cal
				h.Fitted = append(h.Fitted, ChipFit{GPUs: fam, BuiltIn: start.MaxEfficiency, Fit: c.MaxEfficiency, RunsFittedOver: len(fit.Residuals)})
			case strings.Contains(err.Error(), "not enough"):
				// No other source measured this chip: the prior every
				// unfitted GPU gets.
				c = start
				c.MaxEfficiency = hardware.DefaultCalibration.MaxEfficiency
				h.Unfitted = append(h.Unfitted, strings.Join(fam, "+"))
			default:
				return nil, fmt.Errorf("source %s: %w", src, err)
			}
			for _, g := range fam {
				cal[g] = c
			}
		}
		var in, held float64
		for i := range s.Runs {
			r := &s.Runs[i]
			if r.source != src || r.oom || r.tokensPerGPU == 0 {
				continue
			}
			res, err := r.predict(func(gpu string) hardware.Calibration {
				if c, ok := cal[gpu]; ok {
					return c
				}
				return builtIn(gpu)
			})
			if err != nil {
				return nil, err
			}
			h.Rows++
			in += absErr(inSample[i])
			held += absErr(res)
		}
		h.InSample, h.HeldOut = in/float64(h.Rows), held/float64(h.Rows)
		out = append(out, h)
	}
	return out, nil
}

// absErr is a row's absolute throughput error in %, 100 for a run that
// trained but is predicted not to fit.
func absErr(r Result) float64 {
	if !r.fits {
		return 100
	}
	return math.Abs(pctErr(r.predTPS, r.tokensPerGPU))
}

// sourceUses reports whether a source has a row that ran on one of gpus.
func (s *Set) sourceUses(src string, gpus []string) bool {
	for _, r := range s.Runs {
		if r.source == src && !r.oom && r.tokensPerGPU > 0 && slices.Contains(gpus, r.gpu) {
			return true
		}
	}
	return false
}

// WriteHeldOut prints the leave-one-source-out table.
func WriteHeldOut(w io.Writer, hs []HeldOut) {
	fmt.Fprintln(w, "| source | rows | in-sample MAPE | held-out MAPE | max_efficiency without it (built-in) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | --- |")
	var in, held float64
	n := 0
	for _, h := range hs {
		var fits []string
		for _, f := range h.Fitted {
			fits = append(fits, fmt.Sprintf("%s %.3f (%.3f, %d runs)", strings.Join(f.GPUs, "+"), f.Fit, f.BuiltIn, f.RunsFittedOver))
		}
		for _, u := range h.Unfitted {
			fits = append(fits, fmt.Sprintf("%s: no other source, default %.2f", u, hardware.DefaultCalibration.MaxEfficiency))
		}
		fmt.Fprintf(w, "| %s | %d | %.1f%% | %.1f%% | %s |\n", h.Source, h.Rows, h.InSample, h.HeldOut, strings.Join(fits, "; "))
		in += h.InSample * float64(h.Rows)
		held += h.HeldOut * float64(h.Rows)
		n += h.Rows
	}
	if n > 0 {
		fmt.Fprintf(w, "| all | %d | %.1f%% | %.1f%% | |\n", n, in/float64(n), held/float64(n))
	}
}
