package main

import (
	"testing"
)

// TestParseSimArgs: sim's command line, parsed apart from the work.
func TestParseSimArgs(t *testing.T) {
	def := simArgs{target: "plan.bin"}
	with := func(f func(a *simArgs)) simArgs { a := def; f(&a); return a }
	checkParse(t, parseSimArgs, func(a *simArgs) *[]gate { return &a.gates }, map[string]parseCase[simArgs]{
		"plan alone": {args: []string{"plan.bin"}, want: def},
		"trace": {args: []string{"plan.bin", "-trace", "t.json", "-trace-ranks", "0,3"},
			want: with(func(a *simArgs) { a.trace, a.traceRanks = "t.json", "0,3" })},
		"json, tokens, model": {args: []string{"--json", "--train-tokens", "300B", "--model", "m.toml", "plan.bin"},
			want: with(func(a *simArgs) { a.json, a.trainTokens, a.model = true, 300e9, "m.toml" })},
		"gates": {args: []string{"plan.bin", "-fail-if", "step>1.5s"}, want: def, gates: []string{"step>1.5s"}},

		"help":             {args: []string{"-h"}, code: 0, err: "usage: fsdpc sim"},
		"no plan":          {args: nil, code: 2, err: "usage: fsdpc sim"},
		"two plans":        {args: []string{"a.bin", "b.bin"}, code: 2, err: "usage: fsdpc sim"},
		"bad gate":         {args: []string{"-fail-if", "step>", "plan.bin"}, code: 2, err: "step>"},
		"relative gate":    {args: []string{"-fail-if", "step>+5%", "plan.bin"}, code: 2, err: "step>+5%"},
		"bad train tokens": {args: []string{"-train-tokens", "lots", "plan.bin"}, code: 1, err: `-train-tokens "lots"`},
	})
}
