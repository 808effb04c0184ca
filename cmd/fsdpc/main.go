// Command fsdpc compiles FSDP training setups into checked execution plans.
package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/internal/buildinfo"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/schedule"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand: run returns the process exit code.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// troubleCode is a command's exit code for an error where it is not 1:
// diff exits 1 for "different" and reshard for "not loadable", so their
// errors exit 2.
var troubleCode = map[string]int{"diff": 2, "reshard": 2}

var commands map[string]command

func init() {
	commands = map[string]command{
		"inspect":    {"summarise a model: parameters, FLOPs, activations per module", runInspect},
		"import":     {"import a model from another format (import hf config.json)", runImport},
		"zoo":        {"list the built-in models", runZoo},
		"plan":       {"compile a model into an FSDP plan (plan.bin)", runPlan},
		"fit":        {"will it fit? the largest micro-batch and longest sequence per checkpointing mode", runFit},
		"show":       {"print a plan.bin as canonical text or JSON", runShow},
		"devices":    {"list the local NVIDIA GPUs (NVML)", runDevices},
		"sim":        {"simulate a plan: step time, exposed communication, memory, Chrome trace", runSim},
		"report":     {"write a self-contained HTML report of a plan (or two, with their diff)", runReport},
		"verify":     {"prove a plan's schedule safe and within its memory budget", runVerify},
		"diff":       {"compare two plans (or models) for review: exit 0 same, 1 different, 2 error", runDiff},
		"textconv":   {"print a plan.bin as text for git diff (git's textconv driver)", runTextconv},
		"run":        {"run a plan for real on the host and check it against an unsharded reference", runRun},
		"export":     {"write a plan as JSON for fsdpc's Python package (apply_plan, verify_first_step)", runExport},
		"emit":       {"emit PyTorch code: the model as an nn.Module, the plan as apply_plan (emit torch)", runEmit},
		"completion": {"print a shell completion script (completion bash|zsh|fish)", runCompletion},
		"calibrate":  {"fit the cost model to measured runs (CSV) and write hardware profiles", runCalibrate},
		"checkpoint": {"a plan's distributed checkpoint: size per rank, save and load time", runCheckpoint},
		"reshard":    {"the reads that load one plan's checkpoint under another: exit 0 loadable, 1 not, 2 error", runReshard},
	}
}

// run runs the command args name and returns the exit code. Every write
// to stdout and stderr is checked: when one fails (a full disk, a closed
// file), the exit code says so even if the command finished, because its
// output is incomplete. Both are terminal-safe (safetext.Writer): no
// string a command prints, from a plan, a model or a file name, reaches
// them with a control character or escape sequence, and an argument with
// one is printed quoted.
func run(args []string, stdout, stderr io.Writer) int {
	out := &checkedWriter{w: &safetext.Writer{W: stdout, Quote: args}}
	errOut := &checkedWriter{w: &safetext.Writer{W: stderr, Quote: args}}
	code := dispatch(args, out, errOut)
	out.flush()
	errOut.flush()
	trouble := 1
	if len(args) > 0 && troubleCode[args[0]] != 0 {
		trouble = troubleCode[args[0]]
	}
	if err := out.Err(); err != nil {
		fmt.Fprintf(errOut, "fsdpc: writing standard output: %v\n", err)
		code = max(code, trouble)
	}
	if errOut.Err() != nil {
		code = max(code, trouble)
	}
	if detailedExitcode(args) {
		// diff's codes in terraform's order: an error 1, different 2.
		switch code {
		case 1:
			code = 2
		case 2:
			code = 1
		}
	}
	return code
}

// detailedExitcode reports whether args are a diff asking for terraform
// plan's exit codes (-detailed-exitcode): 0 the same, 1 an error, 2
// different. diff computes its own codes (1 different, 2 an error) and
// run swaps them last, so every path to an exit status, a failed write
// included, is mapped alike.
func detailedExitcode(args []string) bool {
	if len(args) == 0 || args[0] != "diff" {
		return false
	}
	on := false
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "detailed-exitcode" {
			continue
		}
		v, err := strconv.ParseBool(value)
		on = !hasValue || err == nil && v
	}
	return on
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		printVersion(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fsdpc: unknown command %q%s\n\n", args[0], didYouMean(args[0], commandNames()))
		usage(stderr)
		return 2
	}
	defer limitReaderMemory(args[0])()
	return cmd.run(args[1:], stdout, stderr)
}

// printVersion names the build (buildinfo.Version: the module version, or
// the VCS revision go build stamped; what plans record), the plan.bin
// format it writes and the FSDP semantics its schedules model.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "fsdpc %s\nplan format %d\nsemantics %s\n", buildinfo.Version(), schedule.FormatVersion, schedule.Semantics)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: fsdpc <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A model argument is a TOML file or the name of a built-in model (fsdpc zoo).")
	fmt.Fprintln(w, "Run 'fsdpc <command> -h' for a command's flags, 'fsdpc --version' for the version.")
}

// reportErr prints an error, one problem a line, and returns exit code 1.
// A file name in it with a line break or control character (one the
// command derived, which stderr's writer does not know) is printed quoted.
func reportErr(stderr io.Writer, err error) int {
	msg := strings.TrimRight(err.Error(), "\n")
	for _, p := range errorPaths(err, nil) {
		if !safetext.Printable(p) {
			msg = strings.ReplaceAll(msg, p, safetext.Term(p))
		}
	}
	fmt.Fprintln(stderr, msg)
	return 1
}

// errorPaths are the file names of the os errors in err's tree.
func errorPaths(err error, paths []string) []string {
	switch e := err.(type) {
	case *fs.PathError:
		paths = append(paths, e.Path)
	case *os.LinkError:
		paths = append(paths, e.Old, e.New)
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			paths = errorPaths(e, paths)
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			paths = errorPaths(e, paths)
		}
	}
	return paths
}
