package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/schedule"
)

func runShow(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("show", flag.ContinueOnError)
	fl.SetOutput(stderr)
	asJSON := fl.Bool("json", false, "print the plan as JSON")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc show [-json] plan.bin|model.toml|zoo-name")
		fmt.Fprintln(stderr, "\nPrints a plan in its canonical text form, then its checkpoint (sizes, files per rank); or the plan as JSON.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if fl.NArg() != 1 {
		fl.Usage()
		return 2
	}
	p, err := loadPlan(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(p); err != nil {
			return reportErr(stderr, err)
		}
		return 0
	}
	if err := schedule.WriteText(stdout, p); err != nil {
		return reportErr(stderr, err)
	}
	// The checkpoint section follows the plan's canonical text (which
	// plans/*.plan.txt pin), derived from it.
	l, err := checkpoint.FromPlan(p)
	if err != nil {
		return reportErr(stderr, fmt.Errorf("%s: checkpoint: %w", fl.Arg(0), err))
	}
	fmt.Fprintln(stdout)
	l.WriteSummary(stdout)
	return 0
}
