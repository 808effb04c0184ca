package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/checkpoint"
)

// Exit codes of reshard: 0 the new plan can load the old checkpoint, 1 it
// cannot (the report names every entry), 2 trouble.
func runReshard(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("reshard", flag.ContinueOnError)
	fl.SetOutput(stderr)
	format := fl.String("format", "text", "text, markdown (a pull-request comment) or json")
	reads := fl.Bool("reads", false, "list every read, not only each rank's totals")
	storage, aggregate := storageFlags(fl)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc reshard [-format text|markdown|json] [-reads] [--storage nvme|shared|BW] [--aggregate BW] OLD NEW")
		fmt.Fprintln(stderr, "\nThe reads each rank of NEW performs to load the checkpoint OLD saved (DCP's load planner):")
		fmt.Fprintln(stderr, "which old rank's file, offsets and lengths; bytes and load time per rank. OLD and NEW are plan.bin")
		fmt.Fprintln(stderr, "files or models (model.toml or a zoo name). Exit status: 0 loadable, 1 not (naming each entry), 2 error.")
		fl.PrintDefaults()
	}
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if *format != "text" && *format != "markdown" && *format != "json" {
		fmt.Fprintf(stderr, "fsdpc reshard: -format %s: the formats are text, markdown and json\n", *format)
		return 2
	}
	if fl.NArg() != 2 {
		fl.Usage()
		return 2
	}
	st, err := checkpoint.ParseStorage(*storage, *aggregate)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var layouts [2]*checkpoint.Layout
	for i := range layouts {
		p, err := loadPlan(fl.Arg(i))
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if layouts[i], err = checkpoint.FromPlan(p); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", fl.Arg(i), err)
			return 2
		}
	}
	rs, err := checkpoint.Plan(layouts[0], layouts[1])
	var ie *checkpoint.IncompatibleError
	if errors.As(err, &ie) {
		if *format == "json" {
			if err := checkpoint.IncompatibleJSON(stdout, ie); err != nil {
				fmt.Fprintln(stderr, err)
				return 2
			}
		} else {
			fmt.Fprintln(stdout, ie.Error())
		}
		return 1
	} else if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	switch *format {
	case "markdown":
		rs.WriteMarkdown(stdout, st, *reads)
	case "json":
		if err := rs.WriteJSON(stdout, st, *reads); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	default:
		rs.WriteText(stdout, st, *reads)
	}
	return 0
}
