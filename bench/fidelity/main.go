// Command fidelity checks fsdpc's predictions against measured training
// runs: it turns each row of a calibration CSV (the format of
// ../shared/calibration/published-runs.csv; calibrate/published-runs.csv
// is the committed copy) into a model file, plans it, and prints predicted
// against measured tokens/s per GPU and peak memory per row, with the
// mean absolute percentage error overall, per GPU type and for single-
// and multi-node runs, then the mean signed error per GPU for eager and
// compiled runs, and the predicted against the measured gain of
// torch.compile on the pairs of rows that differ only in it. Without a file it prints two sets: the calibration
// set, and calibrate/memory-runs.csv, published peak-memory measurements
// kept apart to check the memory model (each row cites its source). For
// the calibration set it also prints, per source, the error with the
// fitted constant refitted without that source (leave one source out):
// the headline figure, what a run from a source fsdpc has never seen can
// expect. For every set it prints the scaling series (runs that differ
// only in their GPU count): the drop in tokens/s per GPU from adding
// GPUs, measured against predicted. Without a file it ends with
// calibrate/nccl-tests.csv: published nccl-tests bus bandwidths against
// the collective model's.
//
//	go run ./bench/fidelity [-v] [file.csv ...]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fsdpc/fsdpc/calibrate"
)

func main() {
	verbose := flag.Bool("v", false, "print each row's model file")
	flag.Parse()
	paths := flag.Args()
	defaults := len(paths) == 0
	if defaults {
		paths = []string{"calibrate/published-runs.csv", "calibrate/memory-runs.csv"}
	}
	var v io.Writer
	if *verbose {
		v = os.Stdout
	}
	for i, path := range paths {
		if i > 0 {
			fmt.Println()
		}
		if len(paths) > 1 {
			fmt.Printf("## %s\n\n", path)
		}
		if err := report(path, v); err != nil {
			fmt.Fprintln(os.Stderr, "fidelity:", err)
			os.Exit(1)
		}
	}
	if defaults {
		fmt.Printf("\n## %s\n\n", ncclTests)
		if err := reportNCCLTests(); err != nil {
			fmt.Fprintln(os.Stderr, "fidelity:", err)
			os.Exit(1)
		}
	}
}

// ncclTests holds published nccl-tests bus bandwidths, to check the
// collective model alone.
const ncclTests = "calibrate/nccl-tests.csv"

func reportNCCLTests() error {
	f, err := os.Open(ncclTests)
	if err != nil {
		return err
	}
	defer f.Close()
	ts, err := calibrate.LoadNCCLTests(ncclTests, f)
	if err != nil {
		return err
	}
	calibrate.WriteNCCLTests(os.Stdout, ts)
	return nil
}

// fitted is the set the built-in profiles' max_efficiency was fitted to
// (hardware/profiles.go): for it alone the harness also prints the
// leave-one-source-out error. Every other set's rows are already held
// out from that fit.
const fitted = "calibrate/published-runs.csv"

// report plans and simulates every row of one file and prints its table.
func report(path string, verbose io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	set, err := calibrate.Load(path, f, verbose)
	if err != nil {
		return err
	}
	results, err := set.Predict(nil)
	if err != nil {
		return err
	}
	calibrate.WriteTable(os.Stdout, results, set.Skipped)
	fmt.Printf("\nScaling: runs that differ only in their GPU count, each against the series' smallest (tokens/s per GPU):\n\n")
	calibrate.WriteScaling(os.Stdout, calibrate.Scaling(results))
	fmt.Printf("\nSigned throughput error by GPU, eager and compiled (a GPU that leans one way shows here, not in the MAPE):\n\n")
	calibrate.WriteBias(os.Stdout, results)
	if pairs := calibrate.CompilePairs(results); len(pairs) > 0 {
		fmt.Printf("\nRuns that differ only in torch.compile: tokens/s gain of the compiled run, measured and predicted:\n\n")
		calibrate.WriteCompilePairs(os.Stdout, pairs)
	}
	if filepath.Clean(path) != fitted {
		return nil
	}
	held, err := set.LeaveOneSourceOut()
	if err != nil {
		return err
	}
	fmt.Printf("\nLeave one source out (max_efficiency refitted per chip without the source, its rows predicted):\n\n")
	calibrate.WriteHeldOut(os.Stdout, held)
	return nil
}
