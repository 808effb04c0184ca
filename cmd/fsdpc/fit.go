package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
)

func runFit(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("fit", flag.ContinueOnError)
	fl.SetOutput(stderr)
	modes := fl.String("checkpointing", "none,selective-op,selective-layer,full", "the checkpointing modes to try, comma-separated")
	maxBatch := fl.Int64("max-micro-batch", 4096, "the largest micro-batch to try")
	maxSeq := fl.Int64("max-seq", 4<<20, "the longest sequence to try, in tokens")
	seqStep := fl.Int64("seq-step", 128, "sequence lengths tried are multiples of this")
	asJSON := fl.Bool("json", false, "print the answer as JSON (docs/json.md)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc fit [-checkpointing MODES] [-max-micro-batch N] [-max-seq N] [-seq-step N] [-json] model.toml|zoo-name")
		fmt.Fprintln(stderr, "\nWill it fit? For each checkpointing mode, the largest micro-batch that fits the memory budget at the")
		fmt.Fprintln(stderr, "model's sequence length and the longest sequence at its micro-batch, with the tokens/s of each (docs/tuning.md).")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	var opts planner.FitOptions
	for _, name := range strings.Split(*modes, ",") {
		mode, ok := ir.CheckpointingModes[strings.TrimSpace(name)]
		if !ok {
			fmt.Fprintf(stderr, "fsdpc fit: -checkpointing: unknown mode %q (none, selective-op, selective-layer, full)\n", name)
			return 2
		}
		opts.Modes = append(opts.Modes, mode)
	}
	for _, b := range []struct {
		flag string
		v    int64
	}{{"-max-micro-batch", *maxBatch}, {"-max-seq", *maxSeq}, {"-seq-step", *seqStep}} {
		if b.v < 1 || b.v > 1<<24 {
			fmt.Fprintf(stderr, "fsdpc fit: %s %d: give 1 to 16,777,216\n", b.flag, b.v)
			return 2
		}
	}
	opts.MaxMicroBatch, opts.MaxSeqLen, opts.SeqStep = *maxBatch, *maxSeq, *seqStep
	m, err := loadModel(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	r, err := planner.Fit(m, opts)
	if err != nil {
		return reportErr(stderr, err)
	}
	render := renderFitText
	if *asJSON {
		render = renderFitJSON
	}
	if err := render(stdout, r); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// renderFitText prints fit's table per checkpointing mode.
func renderFitText(w io.Writer, r *planner.FitReport) error {
	planner.WriteFit(w, r)
	return nil
}

// renderFitJSON prints fit's document (docs/json.md).
func renderFitJSON(w io.Writer, r *planner.FitReport) error { return writeJSON(w, newFitDoc(r)) }

type fitDoc struct {
	Schema     string       `json:"schema"`
	Command    string       `json:"command"`
	Model      string       `json:"model"`
	Budget     int64        `json:"memory_budget"`
	MicroBatch int64        `json:"micro_batch"`
	SeqLen     int64        `json:"seq_len"`
	Modes      []fitModeDoc `json:"modes"`
}

type fitModeDoc struct {
	Checkpointing string      `json:"checkpointing"`
	MaxMicroBatch fitPointDoc `json:"largest_micro_batch"`
	MaxSeqLen     fitPointDoc `json:"longest_seq_len"`
}

type fitPointDoc struct {
	Value        int64   `json:"value"` // 0: does not fit at all
	Capped       bool    `json:"capped"`
	TokensPerGPU float64 `json:"tokens_per_second_per_gpu"`
	StepTime     float64 `json:"step_time"`
	PeakReserved int64   `json:"peak_reserved"`
}

func newFitDoc(r *planner.FitReport) fitDoc {
	d := fitDoc{Schema: "fsdpc/v1", Command: "fit", Model: r.Model, Budget: r.Budget, MicroBatch: r.MicroBatch, SeqLen: r.SeqLen}
	for _, res := range r.Results {
		d.Modes = append(d.Modes, fitModeDoc{Checkpointing: res.Mode.String(),
			MaxMicroBatch: fitPointDoc{res.MicroBatch, res.BatchCapped, res.AtBatch.TokensPerGPU, res.AtBatch.StepTime, res.AtBatch.PeakReserved},
			MaxSeqLen:     fitPointDoc{res.SeqLen, res.SeqCapped, res.AtSeq.TokensPerGPU, res.AtSeq.StepTime, res.AtSeq.PeakReserved}})
	}
	return d
}
