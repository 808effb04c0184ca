package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
)

// printAdvice says what the model file pins and what changing each
// choice would give (planner.Advise).
func printAdvice(w io.Writer, t *planner.Tuning, adv *planner.Advice) {
	if adv == nil || len(adv.Pins) == 0 {
		return
	}
	fmt.Fprintln(w, "pinned by the file (the tuner keeps these): each alternative is the file with that one change, tuned again")
	fmt.Fprintf(w, "from the decisions above (%d candidates); tokens/s against the tuned plan; fits: within the same %s usable; -> suggested:\n",
		adv.Evaluated, ir.FormatBytes(t.Usable))
	same := strings.Join(t.Best.Decisions, "; ")
	for i := range adv.Pins {
		p := &adv.Pins[i]
		fmt.Fprintf(w, "  [%s] %s\n", p.Section, safetext.Escape(strings.Join(p.File, ", ")))
		if len(p.Alternatives) == 0 {
			fmt.Fprintln(w, "    no other value the tuner tries")
			continue
		}
		suggested := p.Suggested()
		for j := range p.Alternatives {
			a := &p.Alternatives[j]
			mark := "   "
			if j == suggested {
				mark = "-> "
			}
			fmt.Fprintf(w, "  %s%s", mark, safetext.Escape(strings.Join(a.Change, ", ")))
			if a.Note != "" {
				fmt.Fprintf(w, " (%s)", safetext.Escape(a.Note))
			}
			if !a.Planned() {
				fmt.Fprintf(w, ": no plan: %s\n", safetext.Escape(a.Why))
				continue
			}
			gain := fmt.Sprintf("%+.1f%% tokens/s", 100*a.Gain)
			if a.Gain > 0 && !a.Significant() {
				gain += fmt.Sprintf(" (within the model's ±%.0f%%)", 100*planner.Uncertainty)
			}
			delta := a.PeakReserved - t.Best.PeakReserved
			sign := "+"
			if delta < 0 {
				sign, delta = "-", -delta
			}
			if !a.Fits {
				fmt.Fprintf(w, ": does not fit: peak %s reserved, would be %s\n", ir.FormatBytes(a.PeakReserved), gain)
				continue
			}
			fmt.Fprintf(w, ": %s, step %s, peak %s reserved (%s%s)", gain, seconds(a.StepTime), ir.FormatBytes(a.PeakReserved), sign, ir.FormatBytes(delta))
			if d := strings.Join(a.Decisions, "; "); d != same {
				if d == "" {
					d = "none"
				}
				fmt.Fprintf(w, "; decisions: %s", safetext.Escape(d))
			}
			fmt.Fprintln(w)
		}
	}
}

// pinDoc is one pinned choice in plan -tune's JSON.
type pinDoc struct {
	Setting      string           `json:"setting"`
	Section      string           `json:"section"`
	File         []string         `json:"file"`
	Alternatives []alternativeDoc `json:"alternatives"`
}

// alternativeDoc is one pinned choice changed and tuned.
type alternativeDoc struct {
	Change  []string `json:"change"`
	Note    string   `json:"note"`
	Planned bool     `json:"planned"`
	Why     string   `json:"why"`
	Step    float64  `json:"step"`
	// Reserved is the peak reserved memory per rank.
	Reserved              int64    `json:"reserved"`
	Fits                  bool     `json:"fits"`
	TokensPerStepPerGPU   int64    `json:"tokens_per_step_per_gpu"`
	TokensPerSecondPerGPU float64  `json:"tokens_per_second_per_gpu"`
	ThroughputChange      float64  `json:"throughput_change"`
	Significant           bool     `json:"significant"`
	Suggested             bool     `json:"suggested"`
	Decisions             []string `json:"decisions"`
}

func newPinDocs(adv *planner.Advice) []pinDoc {
	out := []pinDoc{}
	if adv == nil {
		return out
	}
	for _, p := range adv.Pins {
		d := pinDoc{Setting: p.Setting, Section: p.Section, File: append([]string{}, p.File...), Alternatives: []alternativeDoc{}}
		suggested := p.Suggested()
		for j, a := range p.Alternatives {
			ad := alternativeDoc{Change: append([]string{}, a.Change...), Note: a.Note, Planned: a.Planned(), Why: a.Why,
				Step: a.StepTime, Reserved: a.PeakReserved, Fits: a.Fits, TokensPerStepPerGPU: a.TokensPerStep,
				ThroughputChange: a.Gain, Significant: a.Significant(), Suggested: j == suggested, Decisions: append([]string{}, a.Decisions...)}
			if a.StepTime > 0 {
				ad.TokensPerSecondPerGPU = float64(a.TokensPerStep) / a.StepTime
			}
			d.Alternatives = append(d.Alternatives, ad)
		}
		out = append(out, d)
	}
	return out
}
