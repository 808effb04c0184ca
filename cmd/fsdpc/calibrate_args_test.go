package main

import (
	"testing"

	"github.com/fsdpc/fsdpc/calibrate"
)

// TestParseCalibrateArgs: calibrate's command line, parsed apart from the
// fit.
func TestParseCalibrateArgs(t *testing.T) {
	def := calibrateArgs{measured: []string{"runs.csv"}, fit: calibrate.DefaultFit}
	with := func(f func(a *calibrateArgs)) calibrateArgs { a := def; f(&a); return a }
	dir := t.TempDir()
	checkParse(t, parseCalibrateArgs, nil, map[string]parseCase[calibrateArgs]{
		"a CSV": {args: []string{"runs.csv"}, want: def},
		"a CSV and a log": {args: []string{"runs.csv", "m.toml=train.log"},
			want: with(func(a *calibrateArgs) { a.measured = []string{"runs.csv", "m.toml=train.log"} })},
		"presets and parameters": {args: []string{"-gpu", "a100-80gb,a100-40gb", "runs.csv", "-fit", "max_efficiency,overlap"},
			want: with(func(a *calibrateArgs) {
				a.gpu, a.fit = []string{"a100-80gb", "a100-40gb"}, []string{"max_efficiency", "overlap"}
			})},
		"a directory":         {args: []string{"-o", dir, "runs.csv"}, want: with(func(a *calibrateArgs) { a.out = dir })},
		"a directory to make": {args: []string{"-o", dir + "/new", "runs.csv"}, want: with(func(a *calibrateArgs) { a.out = dir + "/new" })},

		"help":             {args: []string{"-h"}, code: 0, err: "usage: fsdpc calibrate"},
		"nothing measured": {args: []string{"-o", dir}, code: 2, err: "usage: fsdpc calibrate"},
		"unknown flag":     {args: []string{"-gpus", "a100-80gb", "runs.csv"}, code: 2, err: "did you mean -gpu"},
		"-o a file":        {args: []string{"-o", "calibrate_args_test.go", "runs.csv"}, code: 1, err: "calibrate_args_test.go is not a directory"},
	})
}
