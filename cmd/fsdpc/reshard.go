package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/fsdpc/fsdpc/checkpoint"
)

// Exit codes of reshard: 0 the new plan can load the old checkpoint, 1 it
// cannot (the report names every entry), 2 trouble. It is parse ->
// compare -> render: parseReshardArgs, makeReshard, then the renderer of
// -format (of the reads, or of the entries NEW cannot load).
func runReshard(args []string, stdout, stderr io.Writer) int {
	a, code, ok := parseReshardArgs(args, stderr)
	if !ok {
		return code
	}
	rs, err := makeReshard(a)
	var ie *checkpoint.IncompatibleError
	if errors.As(err, &ie) {
		if err := renderIncompatible(stdout, a, ie); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		return 1
	} else if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := renderReshard(stdout, a, rs); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	return 0
}

// reshardArgs is a parsed `fsdpc reshard` command line.
type reshardArgs struct {
	old, new string // plan files, model files or zoo names
	format   string // text, markdown or json
	reads    bool   // every read, not only each rank's totals
	storage  checkpoint.Storage
}

// parseReshardArgs parses reshard's command line. When ok is false the
// command exits with code, having said why on stderr: 0 for -h, 2 for bad
// usage or a storage it cannot read.
func parseReshardArgs(args []string, stderr io.Writer) (a reshardArgs, code int, ok bool) {
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
		return a, code, false
	}
	if *format != "text" && *format != "markdown" && *format != "json" {
		fmt.Fprintf(stderr, "fsdpc reshard: -format %s: the formats are text, markdown and json\n", *format)
		return a, 2, false
	}
	if fl.NArg() != 2 {
		fl.Usage()
		return a, 2, false
	}
	st, err := checkpoint.ParseStorage(*storage, *aggregate)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return a, 2, false
	}
	return reshardArgs{old: fl.Arg(0), new: fl.Arg(1), format: *format, reads: *reads, storage: st}, 0, true
}

// makeReshard loads (or plans) both sides and plans the reads that load
// OLD's checkpoint under NEW: a *checkpoint.IncompatibleError when NEW
// cannot load it.
func makeReshard(a reshardArgs) (*checkpoint.Reshard, error) {
	var layouts [2]*checkpoint.Layout
	for i, arg := range []string{a.old, a.new} {
		p, err := loadPlan(arg)
		if err != nil {
			return nil, err
		}
		if layouts[i], err = checkpoint.FromPlan(p); err != nil {
			return nil, fmt.Errorf("%s: %v", arg, err)
		}
	}
	return checkpoint.Plan(layouts[0], layouts[1])
}

// renderReshard prints the reads in a's format.
func renderReshard(w io.Writer, a reshardArgs, rs *checkpoint.Reshard) error {
	switch a.format {
	case "markdown":
		return rs.WriteMarkdown(w, a.storage, a.reads)
	case "json":
		return rs.WriteJSON(w, a.storage, a.reads)
	default:
		return rs.WriteText(w, a.storage, a.reads)
	}
}

// renderIncompatible prints what NEW cannot load: the error's text, or
// with -format json its document.
func renderIncompatible(w io.Writer, a reshardArgs, ie *checkpoint.IncompatibleError) error {
	if a.format == "json" {
		return checkpoint.IncompatibleJSON(w, ie)
	}
	fmt.Fprintln(w, ie.Error()) // run's checked writer latches an error
	return nil
}
