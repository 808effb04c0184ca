package main

import (
	"testing"
)

// TestParseDiffArgs: diff's command line, parsed apart from the work.
func TestParseDiffArgs(t *testing.T) {
	def := diffArgs{old: "a.bin", new: "b.bin", format: "text", color: "auto"}
	with := func(f func(a *diffArgs)) diffArgs { a := def; f(&a); return a }
	checkParse(t, parseDiffArgs, func(a *diffArgs) *[]gate { return &a.gates }, map[string]parseCase[diffArgs]{
		"two plans": {args: []string{"a.bin", "b.bin"}, want: def},
		"markdown, never colour": {args: []string{"-format", "markdown", "a.bin", "-color", "never", "b.bin"},
			want: with(func(a *diffArgs) { a.format, a.color = "markdown", "never" })},
		"json quiet detailed": {args: []string{"--format", "json", "--quiet", "--detailed-exitcode", "a.bin", "b.bin"},
			want: with(func(a *diffArgs) { a.format, a.quiet, a.detailed = "json", true, true })},
		"relative and absolute gates": {args: []string{"a.bin", "b.bin", "-fail-if", "step>+5%", "-fail-if", "reserved>70GiB"},
			want: def, gates: []string{"step>+5%", "reserved>70GiB"}},

		"help":          {args: []string{"-h"}, code: 0, err: "usage: fsdpc diff"},
		"one plan":      {args: []string{"a.bin"}, code: 2, err: "usage: fsdpc diff"},
		"three plans":   {args: []string{"a.bin", "b.bin", "c.bin"}, code: 2, err: "usage: fsdpc diff"},
		"bad format":    {args: []string{"-format", "html", "a.bin", "b.bin"}, code: 2, err: "the formats are text, markdown and json"},
		"bad colour":    {args: []string{"-color", "sometimes", "a.bin", "b.bin"}, code: 2, err: "usage: fsdpc diff"},
		"bad gate":      {args: []string{"-fail-if", "stp>+5%", "a.bin", "b.bin"}, code: 2, err: `no metric "stp"`},
		"unknown flags": {args: []string{"-formatt", "json", "a.bin", "b.bin"}, code: 2, err: "formatt"},
	})
}
