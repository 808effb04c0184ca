package main

import (
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir/hf"
)

// defaultShape is the hf.Options of the shape flags left at their
// defaults.
var defaultShape = hf.Options{GPU: hf.DefaultGPU, GPUsPerNode: hf.DefaultGPUsPerNode, MicroBatch: 1, Checkpointing: hf.DefaultCheckpointing}

// TestParseImportHFArgs: import hf's command line, parsed apart from the
// conversion.
func TestParseImportHFArgs(t *testing.T) {
	def := importHFArgs{config: "config.json", opt: defaultShape, autoWorld: true}
	with := func(f func(a *importHFArgs)) importHFArgs { a := def; f(&a); return a }
	checkParse(t, parseImportHFArgs, nil, map[string]parseCase[importHFArgs]{
		"a config":      {args: []string{"config.json"}, want: def},
		"stdin":         {args: []string{"-"}, want: with(func(a *importHFArgs) { a.config = "-" })},
		"-o after it":   {args: []string{"config.json", "-o", "m.toml"}, want: with(func(a *importHFArgs) { a.out = "m.toml" })},
		"a world given": {args: []string{"--world-size", "16", "config.json"}, want: with(func(a *importHFArgs) { a.opt.WorldSize, a.autoWorld = 16, false })},
		"every defaultShape flag": {args: []string{"config.json", "--seq-len", "512", "--gpu", "a100-80gb", "--gpus-per-node", "4", "--micro-batch", "2", "--checkpointing", "full"},
			want: with(func(a *importHFArgs) {
				a.opt = hf.Options{SeqLen: 512, GPU: "a100-80gb", GPUsPerNode: 4, MicroBatch: 2, Checkpointing: "full"}
			})},

		"help":                   {args: []string{"-h"}, code: 0, err: "usage: fsdpc import hf"},
		"no config":              {args: nil, code: 2, err: "want one config.json, got 0 arguments"},
		"two configs":            {args: []string{"a.json", "b.json"}, code: 2, err: "got 2 arguments"},
		"a zero world":           {args: []string{"--world-size", "0", "config.json"}, code: 2, err: "fsdpc import hf: --seq-len, --world-size, --gpus-per-node and --micro-batch must be positive"},
		"no such gpu":            {args: []string{"--gpu", "tpu", "config.json"}, code: 2, err: "fsdpc import hf: "},
		"bad checkpointing":      {args: []string{"--checkpointing", "sometimes", "config.json"}, code: 2, err: "sometimes"},
		"unknown flag":           {args: []string{"--wold-size", "8", "config.json"}, code: 2, err: "did you mean --world-size"},
		"a flag's value missing": {args: []string{"config.json", "--world-size"}, code: 2, err: "flag needs an argument"},
	})
}

// TestParseImportTorchArgs: import torch's command line, parsed apart
// from the Python run.
func TestParseImportTorchArgs(t *testing.T) {
	def := importTorchArgs{factory: "mod:build", opt: defaultShape, autoWorld: true, timeout: 10 * time.Minute}
	with := func(f func(a *importTorchArgs)) importTorchArgs { a := def; f(&a); return a }
	checkParse(t, parseImportTorchArgs, nil, map[string]parseCase[importTorchArgs]{
		"a factory": {args: []string{"mod:build"}, want: def},
		"its arguments": {args: []string{"mod:build", "--arg", "layers=3", "--arg", "dim=64", "-o", "m.toml"},
			want: with(func(a *importTorchArgs) { a.kv, a.out = []string{"layers=3", "dim=64"}, "m.toml" })},
		"a config": {args: []string{"--hf", "config.json", "--world-size", "8", "--timeout", "1m"},
			want: with(func(a *importTorchArgs) {
				a.factory, a.hf, a.opt.WorldSize, a.autoWorld, a.timeout = "", "config.json", 8, false, time.Minute
			})},
		"own python, a sequence": {args: []string{"--python", "/usr/bin/python3", "mod:build", "--seq-len", "128"},
			want: with(func(a *importTorchArgs) { a.python, a.opt.SeqLen = "/usr/bin/python3", 128 })},

		"help":                   {args: []string{"-h"}, code: 0, err: "usage: fsdpc import torch"},
		"nothing to build":       {args: nil, code: 2, err: "want one pkg.module:factory or --hf config.json, got 0 arguments"},
		"two factories":          {args: []string{"a:b", "c:d"}, code: 2, err: "got 2 arguments"},
		"a config and factory":   {args: []string{"--hf", "config.json", "mod:build"}, code: 2, err: `--hf takes no factory (got "mod:build")`},
		"arguments for a config": {args: []string{"--hf", "config.json", "--arg", "a=1"}, code: 2, err: "--arg is for a factory"},
		"a negative sequence":    {args: []string{"mod:build", "--seq-len", "-1"}, code: 2, err: "fsdpc import torch: --seq-len, --world-size"},
		"unknown flag":           {args: []string{"--hff", "config.json"}, code: 2, err: "did you mean --hf"},
		"a bad timeout":          {args: []string{"mod:build", "--timeout", "soon"}, code: 2, err: "soon"},
		"output is the config":   {args: []string{"--hf", "testdata/json/tiny.toml", "-o", "testdata/json/tiny.toml"}, code: 1, err: "tiny.toml"},
	})
}

// TestParseImportAccelerateArgs: import accelerate's command line, parsed
// apart from the import.
func TestParseImportAccelerateArgs(t *testing.T) {
	def := importAccelerateArgs{config: "a.yaml", model: "llama3-8b", opt: hf.Options{GPU: hf.DefaultGPU, MicroBatch: 1}}
	with := func(f func(a *importAccelerateArgs)) importAccelerateArgs { a := def; f(&a); return a }
	checkParse(t, parseImportAccelerateArgs, nil, map[string]parseCase[importAccelerateArgs]{
		"a zoo model": {args: []string{"a.yaml", "--model", "llama3-8b"}, want: def},
		"a config.json's defaultShape": {args: []string{"--model", "config.json", "a.yaml", "--seq-len", "64", "--micro-batch", "2", "--gpu", "h100", "-o", "m.toml"},
			want: with(func(a *importAccelerateArgs) {
				a.model, a.opt, a.out = "config.json", hf.Options{SeqLen: 64, GPU: "h100", MicroBatch: 2}, "m.toml"
			})},
		"a factory's arguments": {args: []string{"a.yaml", "--model", "mod:build", "--arg", "layers=2", "--python", "python3"},
			want: with(func(a *importAccelerateArgs) { a.model, a.kv, a.python = "mod:build", []string{"layers=2"}, "python3" })},

		"help":                          {args: []string{"-h"}, code: 0, err: "usage: fsdpc import accelerate"},
		"no model":                      {args: []string{"a.yaml"}, code: 2, err: "got 1 arguments and no --model"},
		"no config":                     {args: []string{"--model", "llama3-8b"}, code: 2, err: "want one accelerate config and --model MODEL, got 0 arguments"},
		"a zero sequence":               {args: []string{"a.yaml", "--model", "c.json", "--seq-len", "0"}, code: 2, err: "--seq-len and --micro-batch must be positive"},
		"defaultShape for a model file": {args: []string{"a.yaml", "--model", "llama3-8b", "--gpu", "h100"}, code: 2, err: "a model file says them itself"},
		"arguments for a file":          {args: []string{"a.yaml", "--model", "c.json", "--arg", "a=1"}, code: 2, err: "--arg and --python are for a PyTorch factory"},
		"unknown flag":                  {args: []string{"a.yaml", "--modle", "x"}, code: 2, err: "did you mean --model"},
		"output is the config":          {args: []string{"testdata/json/tiny.toml", "--model", "llama3-8b", "-o", "testdata/json/tiny.toml"}, code: 1, err: "tiny.toml"},
	})
}
