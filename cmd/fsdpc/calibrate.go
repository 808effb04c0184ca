package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsdpc/fsdpc/calibrate"
	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/internal/inputfile"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
)

func runCalibrate(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	gpu := fl.String("gpu", "", "fit these GPU presets' runs together, comma-separated (default: each chip's GPUs in the file)")
	params := fl.String("fit", strings.Join(calibrate.DefaultFit, ","), "the parameters to fit, comma-separated")
	out := fl.String("o", "", "write each GPU's profile to this directory as GPU.profile.toml (default: print only)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc calibrate [-gpu PRESETS] [-fit a,b] [-o DIR] runs.csv | model.toml=train.log ...")
		fmt.Fprintln(stderr, "\nFits the cost model's physical parameters to measured runs (CSVs in the format of the calibration set,")
		fmt.Fprintln(stderr, "calibrate/published-runs.csv, and torchtitan training logs, each with the model file of its run) and prints")
		fmt.Fprintln(stderr, "the fitted values and each run's residual; with -o, writes a hardware profile per chip.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if fl.NArg() == 0 {
		fl.Usage()
		return 2
	}
	if err := atomicfile.CheckDir(*out); *out != "" && err != nil {
		return reportErr(stderr, err) // before the fit, which is the work
	}
	set := &calibrate.Set{}
	for _, arg := range fl.Args() {
		if err := addMeasured(set, arg); err != nil {
			return reportErr(stderr, err)
		}
	}
	for _, s := range set.Skipped {
		fmt.Fprintf(stderr, "row %s not fitted: %s\n", s.ID, s.Why)
	}
	families := set.Families()
	if *gpu != "" {
		families = [][]string{strings.Split(*gpu, ",")}
	}
	// Fit everything first: a fit that fails writes nothing.
	var fits []*calibrate.Fit
	for _, g := range families {
		fit, err := set.Fit(g, strings.Split(*params, ","))
		if err != nil {
			if errors.Is(err, calibrate.ErrNotConverged) {
				err = fmt.Errorf("%w; no profile written", err)
			}
			return reportErr(stderr, err)
		}
		fits = append(fits, fit)
	}
	// Every file read: CSVs, and each model=log pair's two.
	var inputs []string
	for _, arg := range fl.Args() {
		model, log, ok := strings.Cut(arg, "=")
		if ok {
			inputs = append(inputs, model, log)
		} else {
			inputs = append(inputs, arg)
		}
	}
	profilePath := func(fit *calibrate.Fit) string {
		return filepath.Join(*out, strings.ReplaceAll(fit.GPU, "+", "_")+".profile.toml")
	}
	if *out != "" {
		for _, fit := range fits {
			if err := atomicfile.NotAnInput(profilePath(fit), inputs...); err != nil {
				return reportErr(stderr, err)
			}
		}
	}
	for _, fit := range fits {
		calibrate.WriteFit(stdout, fit)
	}
	if *out == "" {
		return 0
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return reportErr(stderr, err)
	}
	for _, fit := range fits {
		if len(fit.AtBound) > 0 {
			return reportErr(stderr, fmt.Errorf("%s: %s at the edge of the physical range; no profile written (fit fewer parameters, e.g. -fit max_efficiency)", fit.GPU, strings.Join(fit.AtBound, "; ")))
		}
	}
	for _, fit := range fits {
		var b bytes.Buffer
		if err := calibrate.WriteProfile(&b, fit, quotedList(fl.Args())); err != nil {
			return reportErr(stderr, err)
		}
		path := profilePath(fit)
		if err := writeOutput(path, b.Bytes(), inputs); err != nil {
			return reportErr(stderr, err)
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	return 0
}

// addMeasured adds a CSV of runs, or a model file and its torchtitan log
// given as model.toml=train.log, to the set.
func addMeasured(set *calibrate.Set, arg string) error {
	if model, log, ok := strings.Cut(arg, "="); ok {
		src, err := inputfile.ReadFile(model, "a model file", ir.MaxFileSize)
		if err != nil {
			return err
		}
		f, err := inputfile.Open(log, "a training log")
		if err != nil {
			return err
		}
		defer f.Close()
		return set.AddLog(model, src, log, f)
	}
	f, err := inputfile.Open(arg, "a CSV of runs")
	if err != nil {
		return err
	}
	defer f.Close()
	more, err := calibrate.Load(arg, f, nil)
	if err != nil {
		return err
	}
	set.Runs = append(set.Runs, more.Runs...)
	set.Skipped = append(set.Skipped, more.Skipped...)
	return nil
}

// quotedList names the inputs in a profile's comment: each a TOML string,
// so a file name cannot end the comment line and add a constant.
func quotedList(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = safetext.TOML(a)
	}
	return strings.Join(q, ", ")
}
