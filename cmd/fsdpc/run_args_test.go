package main

import (
	"testing"
	"time"
)

// TestParseRunArgs: run's command line, parsed apart from the work. Each
// case is the arguments and either what they mean or the exit code and
// the message on stderr; every usage problem stops before any work.
func TestParseRunArgs(t *testing.T) {
	var def runArgs
	def.target, def.backend, def.scale, def.steps, def.timeout = "plan.bin", "host", 1, 1, 10*time.Second
	def.cuda.nnodes, def.cuda.watchdog, def.cuda.standIn = 1, 10*time.Minute, "spin"
	with := func(f func(a *runArgs)) runArgs { a := def; f(&a); return a }
	checkParse(t, parseRunArgs, nil, map[string]parseCase[runArgs]{
		"plan alone": {args: []string{"plan.bin"}, want: def},
		"host flags": {args: []string{"plan.bin", "--scale", "16", "--steps", "3", "--ranks", "8", "--timeout", "1m"},
			want: with(func(a *runArgs) { a.scale, a.steps, a.ranks, a.timeout = 16, 3, 8, time.Minute })},
		"checkpoint and load": {args: []string{"--checkpoint", "ck", "--load-under", "new.bin", "plan.bin"},
			want: with(func(a *runArgs) { a.checkpoint, a.loadUnder = "ck", "new.bin" })},
		"cuda": {args: []string{"--backend", "cuda", "--nproc-per-node", "4", "--virtual", "plan.bin", "--stand-in", "burn"},
			want: with(func(a *runArgs) { a.backend, a.cuda.nproc, a.cuda.virtual, a.cuda.standIn = "cuda", 4, true, "burn" })},
		"torch": {args: []string{"--backend", "torch", "--model", "m.toml", "--scale", "8", "plan.bin"},
			want: with(func(a *runArgs) { a.backend, a.model, a.scale = "torch", "m.toml", 8 })},
		"accelerate": {args: []string{"--backend", "torch", "--accelerate", "a.yaml", "--hf", "config.json", "--model", "m.toml", "plan.bin"},
			want: with(func(a *runArgs) { a.backend, a.accelerate, a.hf, a.model = "torch", "a.yaml", "config.json", "m.toml" })},

		"help":                    {args: []string{"-h"}, code: 0, err: "usage: fsdpc run"},
		"no plan":                 {args: nil, code: 2, err: "usage: fsdpc run"},
		"two plans":               {args: []string{"a.bin", "b.bin"}, code: 2, err: "usage: fsdpc run"},
		"scale 0":                 {args: []string{"--scale", "0", "plan.bin"}, code: 2, err: "--scale must be from 1"},
		"no steps":                {args: []string{"--steps", "0", "plan.bin"}, code: 2, err: "--steps at least 1"},
		"negative ranks":          {args: []string{"--ranks", "-1", "plan.bin"}, code: 2, err: "--ranks not negative"},
		"zero timeout":            {args: []string{"--timeout", "0s", "plan.bin"}, code: 2, err: "--timeout positive"},
		"accelerate on host":      {args: []string{"--accelerate", "a.yaml", "plan.bin"}, code: 2, err: "--accelerate is for --backend torch"},
		"hf without accelerate":   {args: []string{"--backend", "torch", "--hf", "c.json", "plan.bin"}, code: 2, err: "--hf needs --accelerate"},
		"load-under without ckpt": {args: []string{"--load-under", "new.bin", "plan.bin"}, code: 2, err: "--load-under needs --checkpoint"},
		"checkpoint on cuda":      {args: []string{"--backend", "cuda", "--checkpoint", "ck", "plan.bin"}, code: 2, err: "--checkpoint needs the host backend"},
		"a cuda flag on host":     {args: []string{"--virtual", "plan.bin"}, code: 2, err: "--virtual is for --backend cuda only"},
		"cuda flags on host":      {args: []string{"--nnodes", "2", "--virtual", "plan.bin"}, code: 2, err: "are for --backend cuda only"},
		"steps on torch":          {args: []string{"--backend", "torch", "--steps", "2", "plan.bin"}, code: 2, err: "--steps and --ranks are for the host and cuda backends"},
		"scale with accelerate":   {args: []string{"--backend", "torch", "--accelerate", "a.yaml", "--hf", "c.json", "--scale", "2", "plan.bin"}, code: 2, err: "--scale does not apply"},
		"unknown backend":         {args: []string{"--backend", "tpu", "plan.bin"}, code: 2, err: `unknown backend "tpu"`},
		"unknown flag":            {args: []string{"--stepz", "2", "plan.bin"}, code: 2, err: "stepz"},
		"a bad duration":          {args: []string{"--timeout", "soon", "plan.bin"}, code: 2, err: "soon"},
		"scale over the maximum":  {args: []string{"--scale", "100000000", "plan.bin"}, code: 2, err: "--scale must be from 1"},
		"checkpoint on torch":     {args: []string{"--backend", "torch", "--checkpoint", "ck", "plan.bin"}, code: 2, err: "--checkpoint needs the host backend"},
		"ranks on torch":          {args: []string{"--backend", "torch", "--ranks", "2", "plan.bin"}, code: 2, err: "--steps and --ranks"},
		"accelerate without --hf (runAccelerate refuses it)": {args: []string{"--backend", "torch", "--accelerate", "a.yaml", "plan.bin"}, want: with(func(a *runArgs) { a.backend, a.accelerate = "torch", "a.yaml" })},
	})
}
