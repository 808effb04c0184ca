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

// fsdpc calibrate is parse -> fit -> render: parseCalibrateArgs,
// makeCalibrate (every fit before anything is printed or written: a fit
// that fails writes nothing), then the fits printed and, with -o, the
// profiles written (writeProfiles).
func runCalibrate(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseCalibrateArgs(args, stderr)
	if !ok {
		return code
	}
	fits, err := makeCalibrate(a, stderr)
	if err != nil {
		return reportErr(stderr, err)
	}
	for _, fit := range fits {
		calibrate.WriteFit(stdout, fit)
	}
	if a.out == "" {
		return 0
	}
	if err := writeProfiles(stdout, a, fits); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// calibrateArgs is a parsed `fsdpc calibrate` command line.
type calibrateArgs struct {
	measured []string // CSVs of runs and model.toml=train.log pairs
	gpu      []string // the presets fitted together; nil: each chip's GPUs
	fit      []string // the parameters to fit
	out      string   // the profiles' directory; "": print only
}

// inputs are every file read: the CSVs, and each model=log pair's two.
func (a calibrateArgs) inputs() []string {
	var inputs []string
	for _, arg := range a.measured {
		model, log, ok := strings.Cut(arg, "=")
		if ok {
			inputs = append(inputs, model, log)
		} else {
			inputs = append(inputs, arg)
		}
	}
	return inputs
}

// profilePath is where -o writes fit's profile.
func (a calibrateArgs) profilePath(fit *calibrate.Fit) string {
	return filepath.Join(a.out, strings.ReplaceAll(fit.GPU, "+", "_")+".profile.toml")
}

// parseCalibrateArgs parses calibrate's command line. When ok is false
// the command exits with code, having said why on stderr: 0 for -h, 2 for
// bad usage, 1 for an -o that cannot be a directory (checked before the
// fit, which is the work).
func parseCalibrateArgs(args []string, stderr io.Writer) (a calibrateArgs, code int, ok bool) {
	fl := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	gpu := fl.String("gpu", "", "fit these GPU presets' runs together, comma-separated (default: each chip's GPUs in the file)")
	params := fl.String("fit", strings.Join(calibrate.DefaultFit, ","), "the parameters to fit, comma-separated")
	fl.StringVar(&a.out, "o", "", "write each GPU's profile to this directory as GPU.profile.toml (default: print only)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc calibrate [-gpu PRESETS] [-fit a,b] [-o DIR] runs.csv | model.toml=train.log ...")
		fmt.Fprintln(stderr, "\nFits the cost model's physical parameters to measured runs (CSVs in the format of the calibration set,")
		fmt.Fprintln(stderr, "calibrate/published-runs.csv, and torchtitan training logs, each with the model file of its run) and prints")
		fmt.Fprintln(stderr, "the fitted values and each run's residual; with -o, writes a hardware profile per chip.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return a, code, false
	}
	if fl.NArg() == 0 {
		fl.Usage()
		return a, 2, false
	}
	if err := atomicfile.CheckDir(a.out); a.out != "" && err != nil {
		return a, reportErr(stderr, err), false
	}
	a.measured, a.fit = fl.Args(), strings.Split(*params, ",")
	if *gpu != "" {
		a.gpu = strings.Split(*gpu, ",")
	}
	return a, 0, true
}

// makeCalibrate reads the measured runs (each row not fitted said on
// stderr) and fits each family of GPUs, or -gpu's presets together; with
// -o it checks that no profile would replace an input.
func makeCalibrate(a calibrateArgs, stderr io.Writer) ([]*calibrate.Fit, error) {
	set := &calibrate.Set{}
	for _, arg := range a.measured {
		if err := addMeasured(set, arg); err != nil {
			return nil, err
		}
	}
	for _, s := range set.Skipped {
		fmt.Fprintf(stderr, "row %s not fitted: %s\n", s.ID, s.Why)
	}
	families := set.Families()
	if a.gpu != nil {
		families = [][]string{a.gpu}
	}
	var fits []*calibrate.Fit
	for _, g := range families {
		fit, err := set.Fit(g, a.fit)
		if err != nil {
			if errors.Is(err, calibrate.ErrNotConverged) {
				err = fmt.Errorf("%w; no profile written", err)
			}
			return nil, err
		}
		fits = append(fits, fit)
	}
	if a.out != "" {
		for _, fit := range fits {
			if err := atomicfile.NotAnInput(a.profilePath(fit), a.inputs()...); err != nil {
				return nil, err
			}
		}
	}
	return fits, nil
}

// writeProfiles writes -o's profiles, one a chip, saying each on stdout;
// none when any fit ended at the edge of a parameter's physical range.
func writeProfiles(stdout io.Writer, a calibrateArgs, fits []*calibrate.Fit) error {
	if err := os.MkdirAll(a.out, 0o755); err != nil {
		return err
	}
	for _, fit := range fits {
		if len(fit.AtBound) > 0 {
			return fmt.Errorf("%s: %s at the edge of the physical range; no profile written (fit fewer parameters, e.g. -fit max_efficiency)", fit.GPU, strings.Join(fit.AtBound, "; "))
		}
	}
	for _, fit := range fits {
		var b bytes.Buffer
		if err := calibrate.WriteProfile(&b, fit, quotedList(a.measured)); err != nil {
			return err
		}
		path := a.profilePath(fit)
		if err := writeOutput(path, b.Bytes(), a.inputs()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	return nil
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
