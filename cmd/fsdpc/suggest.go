package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/internal/inputfile"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
)

// "Did you mean": a mistyped command, flag or zoo name is answered with
// the closest real one, by the rule the model file's errors use
// (ir.Suggest: edit distance, a swap counting once, ties suggesting
// nothing).

// didYouMean is "; did you mean "x"?" for the candidate closest to s, or
// "" when none is close.
func didYouMean(s string, candidates []string) string {
	if c := ir.Suggest(s, candidates); c != "" {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

// commandNames are the subcommands, sorted.
func commandNames() []string { return slices.Sorted(maps.Keys(commands)) }

// noZooModel is the error for a model argument that is neither a file
// nor a built-in model's name.
func noZooModel(arg string) error {
	return fmt.Errorf("%s: no such file, and no built-in model of that name%s (fsdpc zoo lists them)", arg, didYouMean(arg, plans.Names()))
}

// unknownFlag finds the first flag in args that fl does not define and
// that is close to one it does, and says so: the flag package's own
// message ("flag provided but not defined") names no alternative. ok is
// false when it printed the message (the command exits 2).
func unknownFlag(fl *flag.FlagSet, args []string, stderr io.Writer) (ok bool) {
	var names []string
	fl.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return true
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		dashes := a[:len(a)-len(strings.TrimLeft(a, "-"))]
		name, _, hasValue := strings.Cut(a[len(dashes):], "=")
		if name == "h" || name == "help" {
			return true
		}
		if f := fl.Lookup(name); f != nil {
			if !hasValue && takesValue(fl, name) {
				i++ // its value, which may start with "-"
			}
			continue
		}
		if s := ir.Suggest(name, names); s != "" {
			fmt.Fprintf(stderr, "fsdpc %s: flag provided but not defined: %s; did you mean %s%s?\n", fl.Name(), a, dashes, s)
			fmt.Fprintf(stderr, "Run 'fsdpc %s -h' for its flags.\n", fl.Name())
			return false
		}
		return true
	}
	return true
}

// hfConfigHint says what to do with a Hugging Face config.json given
// where a model file belongs; "" when path is not one.
func hfConfigHint(path string) string {
	src, err := inputfile.ReadFile(path, "a model file", ir.MaxFileSize)
	if err != nil {
		return ""
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(src, &doc) != nil {
		return ""
	}
	if _, ok := doc["model_type"]; !ok {
		if _, ok := doc["architectures"]; !ok {
			return ""
		}
	}
	return fmt.Sprintf("%s is a Hugging Face config.json, not an fsdpc model file: turn it into one with `fsdpc import hf %s -o model.toml` (docs/model-format.md, Importing from Hugging Face), then give model.toml", path, path)
}
