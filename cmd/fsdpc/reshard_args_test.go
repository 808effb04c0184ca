package main

import (
	"testing"

	"github.com/fsdpc/fsdpc/checkpoint"
)

// TestParseReshardArgs: reshard's command line, parsed apart from the work.
func TestParseReshardArgs(t *testing.T) {
	nvme, err := checkpoint.ParseStorage("nvme", "")
	if err != nil {
		t.Fatal(err)
	}
	shared, err := checkpoint.ParseStorage("shared", "100GB/s")
	if err != nil {
		t.Fatal(err)
	}
	def := reshardArgs{old: "a.bin", new: "b.bin", format: "text", storage: nvme}
	with := func(f func(a *reshardArgs)) reshardArgs { a := def; f(&a); return a }
	checkParse(t, parseReshardArgs, nil, map[string]parseCase[reshardArgs]{
		"two plans": {args: []string{"a.bin", "b.bin"}, want: def},
		"json reads after the plans": {args: []string{"a.bin", "b.bin", "-format", "json", "-reads"},
			want: with(func(a *reshardArgs) { a.format, a.reads = "json", true })},
		"shared storage, capped": {args: []string{"--storage", "shared", "--aggregate", "100GB/s", "a.bin", "b.bin"},
			want: with(func(a *reshardArgs) { a.storage = shared })},
		"markdown": {args: []string{"-format", "markdown", "a.bin", "b.bin"}, want: with(func(a *reshardArgs) { a.format = "markdown" })},

		"help":          {args: []string{"-h"}, code: 0, err: "usage: fsdpc reshard"},
		"one plan":      {args: []string{"a.bin"}, code: 2, err: "usage: fsdpc reshard"},
		"three plans":   {args: []string{"a.bin", "b.bin", "c.bin"}, code: 2, err: "usage: fsdpc reshard"},
		"bad format":    {args: []string{"-format", "xml", "a.bin", "b.bin"}, code: 2, err: "-format xml: the formats are text, markdown and json"},
		"bad storage":   {args: []string{"--storage", "tape", "a.bin", "b.bin"}, code: 2, err: `--storage "tape"`},
		"unknown flags": {args: []string{"-read", "a.bin", "b.bin"}, code: 2, err: "did you mean -reads"},
	})
}
