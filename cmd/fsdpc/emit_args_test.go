package main

import (
	"testing"

	"github.com/fsdpc/fsdpc/torchgen"
)

// TestParseEmitTorchArgs: emit torch's command line, parsed apart from
// the generation.
func TestParseEmitTorchArgs(t *testing.T) {
	def := emitTorchArgs{model: "m.toml", scale: 1}
	with := func(f func(a *emitTorchArgs)) emitTorchArgs { a := def; f(&a); return a }
	checkParse(t, parseEmitTorchArgs, nil, map[string]parseCase[emitTorchArgs]{
		"model alone": {args: []string{"torch", "--model", "m.toml"}, want: def},
		"model scaled to a file": {args: []string{"torch", "--model", "m.toml", "--scale", "8", "-o", "m.py"},
			want: with(func(a *emitTorchArgs) { a.scale, a.out = 8, "m.py" })},
		"a plan with torchtitan": {args: []string{"torch", "plan.bin", "--model", "m.toml", "--torchtitan", "job.toml", "--torchtitan-config", "cfg.py"},
			want: with(func(a *emitTorchArgs) { a.plan, a.titan, a.titanConfig = "plan.bin", "job.toml", "cfg.py" })},

		"help":                  {args: []string{"-h"}, code: 0, err: "usage: fsdpc emit torch"},
		"no target":             {args: nil, code: 2, err: "usage: fsdpc emit torch"},
		"unknown target":        {args: []string{"torhc", "--model", "m.toml"}, code: 2, err: `unknown target "torhc"`},
		"no model":              {args: []string{"torch", "plan.bin"}, code: 2, err: "usage: fsdpc emit torch"},
		"two plans":             {args: []string{"torch", "--model", "m.toml", "a.bin", "b.bin"}, code: 2, err: "usage: fsdpc emit torch"},
		"scale 0":               {args: []string{"torch", "--model", "m.toml", "--scale", "0"}, code: 2, err: "--scale must be from 1"},
		"torchtitan, no plan":   {args: []string{"torch", "--model", "m.toml", "--torchtitan", "job.toml"}, code: 2, err: "need a plan"},
		"outputs the same":      {args: []string{"torch", "plan.bin", "--model", "m.toml", "-o", "x", "--torchtitan", "x"}, code: 2, err: "name the same file"},
		"output is the model":   {args: []string{"torch", "--model", "testdata/json/tiny.toml", "-o", "testdata/json/tiny.toml"}, code: 1, err: "tiny.toml"},
		"unknown flag of torch": {args: []string{"torch", "--modle", "m.toml"}, code: 2, err: "modle"},
	})
}

// TestParseEmitAccelerateArgs: emit accelerate's command line, parsed
// apart from the generation.
func TestParseEmitAccelerateArgs(t *testing.T) {
	def := emitAccelerateArgs{plan: "plan.bin", model: "m.toml"}
	with := func(f func(a *emitAccelerateArgs)) emitAccelerateArgs { a := def; f(&a); return a }
	checkParse(t, parseEmitAccelerateArgs, nil, map[string]parseCase[emitAccelerateArgs]{
		"plan and model": {args: []string{"plan.bin", "--model", "m.toml"}, want: def},
		"hf, to a file": {args: []string{"--model", "m.toml", "plan.bin", "--hf", "config.json", "-o", "a.yaml"},
			want: with(func(a *emitAccelerateArgs) { a.hf, a.out = "config.json", "a.yaml" })},
		"to stdout by name": {args: []string{"plan.bin", "--model", "m.toml", "-o", "-"}, want: with(func(a *emitAccelerateArgs) { a.out = "-" })},

		"help":                {args: []string{"-h"}, code: 0, err: "usage: fsdpc emit accelerate"},
		"no model":            {args: []string{"plan.bin"}, code: 2, err: "want one plan and --model FILE, got 1 arguments"},
		"no plan":             {args: []string{"--model", "m.toml"}, code: 2, err: "got 0 arguments"},
		"two plans":           {args: []string{"a.bin", "b.bin", "--model", "m.toml"}, code: 2, err: "got 2 arguments"},
		"unknown flag":        {args: []string{"plan.bin", "--modle", "m.toml"}, code: 2, err: "flag provided but not defined: -modle"},
		"output is the model": {args: []string{"plan.bin", "--model", "testdata/json/tiny.toml", "-o", "testdata/json/tiny.toml"}, code: 1, err: "tiny.toml"},
	})
}

// TestParseEmitLaunchArgs: emit launch's command line, parsed apart from
// the generation.
func TestParseEmitLaunchArgs(t *testing.T) {
	def := emitLaunchArgs{plan: "run/p.bin",
		job: torchgen.LaunchJob{Engine: "torchrun", Script: "train.py", Source: "run/p.bin", PlanExport: "run/p.json", Port: 29500, Args: []string{}}}
	with := func(f func(a *emitLaunchArgs)) emitLaunchArgs { a := def; f(&a); return a }
	checkParse(t, parseEmitLaunchArgs, nil, map[string]parseCase[emitLaunchArgs]{
		"torchrun": {args: []string{"--engine", "torchrun", "run/p.bin", "--script", "train.py"}, want: def},
		"the program's arguments": {args: []string{"--engine", "torchrun", "run/p.bin", "--script", "train.py", "-o", "run.sh", "--", "--lr", "3e-4"},
			want: with(func(a *emitLaunchArgs) { a.out, a.job.Args = "run.sh", []string{"--lr", "3e-4"} })},
		"slurm, named, its port": {args: []string{"run/p.bin", "--engine", "slurm", "--script", "train.py", "--name", "job", "--port", "1234", "--plan-json", "/shared/p.json"},
			want: with(func(a *emitLaunchArgs) {
				a.job.Engine, a.job.Name, a.job.Port, a.job.PlanExport = "slurm", "job", 1234, "/shared/p.json"
			})},
		"kubernetes with its image": {args: []string{"--engine", "kubernetes", "--image", "img:1", "run/p.bin", "--script", "train.py"},
			want: with(func(a *emitLaunchArgs) { a.job.Engine, a.job.Image = "kubernetes", "img:1" })},
		"torchrun's rendezvous": {args: []string{"--engine", "torchrun", "--endpoint", "h:29400", "--max-restarts", "3", "run/p.bin", "--script", "train.py"},
			want: with(func(a *emitLaunchArgs) { a.job.Endpoint, a.job.MaxRestarts = "h:29400", 3 })},

		"help":                  {args: []string{"-h"}, code: 0, err: "usage: fsdpc emit launch"},
		"no plan":               {args: []string{"--engine", "torchrun", "--script", "t.py"}, code: 2, err: "usage: fsdpc emit launch"},
		"no engine":             {args: []string{"p.bin", "--script", "t.py"}, code: 2, err: "usage: fsdpc emit launch"},
		"no script":             {args: []string{"--engine", "torchrun", "p.bin"}, code: 2, err: "usage: fsdpc emit launch"},
		"unknown engine":        {args: []string{"--engine", "mpi", "p.bin", "--script", "t.py"}, code: 2, err: `--engine "mpi": want one of`},
		"kubernetes, no image":  {args: []string{"--engine", "kubernetes", "p.bin", "--script", "t.py"}, code: 2, err: "a TrainJob needs --image"},
		"unknown flag":          {args: []string{"--engin", "slurm", "p.bin", "--script", "t.py"}, code: 2, err: "did you mean --engine"},
		"a port that is a word": {args: []string{"--engine", "slurm", "--port", "high", "p.bin", "--script", "t.py"}, code: 2, err: "high"},
	})
}
