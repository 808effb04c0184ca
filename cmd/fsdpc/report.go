package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/report"
)

func runReport(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("report", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "report.html", "write the HTML report to this file")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc report [-o report.html] plan.bin|model.toml|zoo-name [other-plan]")
		fmt.Fprintln(stderr, "\nWrites one self-contained HTML page: the simulated step's timeline per stream, memory over GPU time by buffer kind with the peak explained, compute/communication/exposed time per group, the plan's decisions and warnings; with two plans, both and their difference.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if fl.NArg() < 1 || fl.NArg() > 2 || *out == "" {
		fl.Usage()
		return 2
	}
	// Refused before the work, as when writing.
	if err := checkOutput(*out, fl.Args()...); err != nil {
		return reportErr(stderr, err)
	}
	var inputs []report.Input
	for _, arg := range fl.Args() {
		p, m, err := loadPlanModel(arg, "")
		if err != nil {
			return reportErr(stderr, err)
		}
		inputs = append(inputs, report.Input{Name: arg, Plan: p, FLOPsPerToken: flopsPerToken(p, m)})
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, inputs...); err != nil {
		return reportErr(stderr, err)
	}
	if err := writeOutput(*out, buf.Bytes(), fl.Args()); err != nil {
		return reportErr(stderr, fmt.Errorf("writing %s: %w", *out, err))
	}
	fmt.Fprintf(stdout, "report: %s (%d KiB, self-contained; open it in a browser)\n", *out, (buf.Len()+1023)/1024)
	return 0
}
