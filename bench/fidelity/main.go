// Command fidelity checks fsdpc's predictions against measured training
// runs: it turns each row of a calibration CSV (the format of
// ../shared/calibration/published-runs.csv; calibrate/published-runs.csv
// is the committed copy) into a model file, plans it, and prints predicted
// against measured tokens/s per GPU and peak memory per row, with the
// mean absolute percentage error overall, per GPU type and for single-
// and multi-node runs.
//
//	go run ./bench/fidelity [-v] [file.csv]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fsdpc/fsdpc/calibrate"
)

func main() {
	verbose := flag.Bool("v", false, "print each row's model file")
	flag.Parse()
	path := "calibrate/published-runs.csv"
	if flag.NArg() > 0 {
		path = flag.Arg(0)
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
	defer f.Close()
	var v io.Writer
	if *verbose {
		v = os.Stdout
	}
	set, err := calibrate.Load(path, f, v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
	results, err := set.Predict(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
	calibrate.WriteTable(os.Stdout, results, set.Skipped)
}
