package main

import (
	"testing"

	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestParsePlanArgs: plan's command line, parsed apart from the work.
// Each case is the arguments and either what they mean or the exit code
// and the message on stderr.
func TestParsePlanArgs(t *testing.T) {
	def := planArgs{model: "m.toml", out: "plan.bin"}
	with := func(f func(a *planArgs)) planArgs { a := def; f(&a); return a }
	checkParse(t, parsePlanArgs, func(a *planArgs) *[]gate { return &a.gates }, map[string]parseCase[planArgs]{
		"model alone":       {args: []string{"m.toml"}, want: def},
		"flags after model": {args: []string{"m.toml", "-o", "x.bin", "-json"}, want: with(func(a *planArgs) { a.out, a.json = "x.bin", true })},
		"double dashes":     {args: []string{"--check", "--train-tokens", "15T", "m.toml"}, want: with(func(a *planArgs) { a.check, a.trainTokens = true, 15e12 })},
		"tune with headroom": {args: []string{"-tune", "-headroom", "20", "-fsdpc-knobs", "m.toml"},
			want: with(func(a *planArgs) { a.tune, a.fsdpcKnobs, a.margin = true, true, 0.2 })},
		"tune's default headroom": {args: []string{"-tune", "m.toml"}, want: with(func(a *planArgs) { a.tune, a.margin = true, planner.DefaultHeadroom })},
		"headroom without tune":   {args: []string{"-headroom", "200", "m.toml"}, want: def}, // only -tune reads it
		"gates": {args: []string{"m.toml", "-fail-if", "reserved>70GiB", "-fail-if", "mfu<35%"}, want: def,
			gates: []string{"reserved>70GiB", "mfu<35%"}},
		"dump a pass":             {args: []string{"-d", "emit", "m.toml"}, want: with(func(a *planArgs) { a.dump = "emit" })},
		"dump all":                {args: []string{"-d", "all", "m.toml"}, want: with(func(a *planArgs) { a.dump = "all" })},
		"dump help, no model":     {args: []string{"-d", "help"}, want: planArgs{out: "plan.bin", dump: "help"}},
		"the semantics it models": {args: []string{"-semantics", schedule.Semantics, "m.toml"}, want: def},

		"help":              {args: []string{"-h"}, code: 0, err: "usage: fsdpc plan"},
		"no model":          {args: nil, code: 2, err: "usage: fsdpc plan"},
		"two models":        {args: []string{"a.toml", "b.toml"}, code: 2, err: "usage: fsdpc plan"},
		"unknown flag":      {args: []string{"-x", "m.toml"}, code: 2, err: "-x"},
		"bad gate":          {args: []string{"-fail-if", "stp>1s", "m.toml"}, code: 2, err: `no metric "stp"`},
		"relative gate":     {args: []string{"-fail-if", "step>+5%", "m.toml"}, code: 2, err: "step>+5%"},
		"other semantics":   {args: []string{"-semantics", "torch-fsdp2/1.0", "m.toml"}, code: 2, err: "this fsdpc models"},
		"dump with json":    {args: []string{"-d", "all", "-json", "m.toml"}, code: 2, err: "drop -d"},
		"dump with gates":   {args: []string{"-d", "all", "-fail-if", "step>1s", "m.toml"}, code: 2, err: "drop -d"},
		"no such pass":      {args: []string{"-d", "emitt", "m.toml"}, code: 2, err: `no pass "emitt"`},
		"bad train tokens":  {args: []string{"-train-tokens", "lots", "m.toml"}, code: 1, err: `-train-tokens "lots"`},
		"headroom over 100": {args: []string{"-tune", "-headroom", "100", "m.toml"}, code: 1, err: "-headroom 100: give a percentage"},
		"negative headroom": {args: []string{"-tune", "-headroom", "-5", "m.toml"}, code: 1, err: "-headroom -5"},
	})
}
