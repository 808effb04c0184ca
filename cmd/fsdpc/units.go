package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// tokenSuffixes are the multipliers a token count may end in: thousands,
// millions, billions (B, as in "300B tokens", or G) and trillions.
var tokenSuffixes = map[string]float64{"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}

// parseTokens reads a token count such as "15T", "300B", "2.5e12".
func parseTokens(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSpace(strings.TrimSuffix(t, "tokens"))
	num, suffix := splitCount(t)
	mult, ok := tokenSuffixes[suffix]
	if !ok {
		return 0, fmt.Errorf("-train-tokens %q: unknown suffix %q; write a count such as 15T, 300B, 2M or 2.5e12", s, suffix)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("-train-tokens %q: not a positive number of tokens; write a count such as 15T, 300B, 2M or 2.5e12", s)
	}
	if v*mult > maxTrainTokens {
		return 0, fmt.Errorf("-train-tokens %q: more than %g tokens; give a count a training run could see", s, maxTrainTokens)
	}
	return v * mult, nil
}

// splitCount splits a count into its number and the letters it ends in,
// a suffix of tokenSuffixes if it is one.
func splitCount(t string) (num, suffix string) {
	end := len(t)
	for end > 0 && (t[end-1] >= 'A' && t[end-1] <= 'Z' || t[end-1] == 'k') {
		end--
	}
	return t[:end], t[end:]
}

// maxTrainTokens bounds -train-tokens so the time and GPU-hours printed
// stay within an int64 of seconds: 10¹⁸ tokens is some 10⁵ times the
// largest published pretraining runs (tens of trillions of tokens).
const maxTrainTokens = 1e18

// modelFor finds the model a plan file was made from, for MFU: the file
// -model names (checked against the plan's input hash), else the built-in
// model with that hash. nil when neither is there.
func modelFor(p *schedule.Plan, path string) (*ir.Model, error) {
	if path != "" {
		m, err := loadModel(path)
		if err != nil {
			return nil, err
		}
		if m.SourceHash != p.Header.InputSHA256 {
			return nil, fmt.Errorf("-model %s: the plan was made from another file (input SHA-256 %.12s…, this file's %.12s…)", path, p.Header.InputSHA256, m.SourceHash)
		}
		return m, nil
	}
	for _, name := range plans.Names() {
		src, file, _ := plans.Source(name)
		sum := sha256.Sum256(src)
		if hex.EncodeToString(sum[:]) == p.Header.InputSHA256 {
			return ir.Load(file, src)
		}
	}
	return nil, nil
}

// flopsPerToken is the model's FLOPs per token by MFU's convention: what
// the plan carries (format 8 on), else the model's; 0 when neither is
// known (an older plan whose model fsdpc cannot find).
func flopsPerToken(p *schedule.Plan, m *ir.Model) float64 {
	if p.Train.ModelFLOPsPerToken > 0 {
		return p.Train.ModelFLOPsPerToken
	}
	if m == nil {
		return 0
	}
	return m.FLOPsPerToken()
}

// mfuUnknown says why MFU is not known and what gives it.
const mfuUnknown = "MFU needs the model's FLOPs per token, which plans before format 8 do not carry: re-plan, or give the model file it was made from (sim -model model.toml; diff and report take the model in place of the plan)"

// printBreakdown prints the step as the sum of its parts.
func printBreakdown(w io.Writer, indent string, sim *schedule.Simulation) {
	fmt.Fprintf(w, "%sstep %s = ", indent, seconds(sim.StepTime))
	var parts []string
	for _, part := range sim.Breakdown.Parts() {
		// Parts under a microsecond print as 0 µs: leave them out.
		if part.Seconds >= 0.5e-6 {
			parts = append(parts, fmt.Sprintf("%s %s", part.Short, seconds(part.Seconds)))
		}
	}
	fmt.Fprintln(w, strings.Join(parts, " + "))
}

// printThroughput prints the step in a training log's units, and the time
// to train on trainTokens (0: not asked).
func printThroughput(w io.Writer, indent string, p *schedule.Plan, step float64, t schedule.Throughput, trainTokens float64) {
	fmt.Fprintf(w, "%sthroughput: %s tokens/s per GPU; %s tokens per step (%s per GPU)\n", indent,
		ir.FormatCount(int64(math.Round(t.TokensPerSecondPerGPU))), ir.FormatCount(t.TokensPerStep), ir.FormatCount(t.TokensPerStepPerGPU))
	peak := fmt.Sprintf("of the %s dense %s peak", t.PeakDType, tflops(t.PeakFLOPS))
	if t.ModelFLOPsPerToken > 0 {
		fmt.Fprintf(w, "%sMFU %.1f%% (%s per GPU, %s per token), HFU %.1f%% (%s executed), %s\n", indent,
			100*t.MFU, tflops(t.ModelFLOPS), ir.FormatFLOP(t.ModelFLOPsPerToken), 100*t.HFU, tflops(t.HardwareFLOPS), peak)
	} else {
		fmt.Fprintf(w, "%sHFU %.1f%% (%s executed) %s; %s\n", indent,
			100*t.HFU, tflops(t.HardwareFLOPS), peak, mfuUnknown)
	}
	if trainTokens > 0 {
		d := t.TrainTime(trainTokens, step)
		fmt.Fprintf(w, "%straining on %s tokens: %s on %d GPUs (%s GPU-hours)\n", indent, formatCount(trainTokens), humanDuration(d),
			p.Cluster.WorldSize, ir.FormatCount(int64(math.Round(d*float64(p.Cluster.WorldSize)/3600))))
	}
}

// tflops prints a rate in TFLOP/s.
func tflops(f float64) string { return fmt.Sprintf("%.1f TFLOP/s", f/1e12) }

// formatCount prints a large count with the suffix parseTokens reads.
func formatCount(n float64) string {
	for _, s := range []struct {
		suffix string
		v      float64
	}{{"T", 1e12}, {"B", 1e9}, {"M", 1e6}, {"K", 1e3}} {
		if n >= s.v {
			return strconv.FormatFloat(n/s.v, 'g', 4, 64) + s.suffix
		}
	}
	return strconv.FormatFloat(n, 'g', 4, 64)
}

// humanDuration prints a long duration in the largest sensible unit.
func humanDuration(s float64) string {
	switch {
	case s >= 365*86400:
		return fmt.Sprintf("%.1f days (%.1f years)", s/86400, s/(365.25*86400))
	case s >= 2*86400:
		return fmt.Sprintf("%.1f days", s/86400)
	case s >= 2*3600:
		return fmt.Sprintf("%.1f hours", s/3600)
	case s >= 120:
		return fmt.Sprintf("%.1f minutes", s/60)
	}
	return seconds(s)
}
