package planner

import (
	"fmt"

	"github.com/fsdpc/fsdpc/ir"
)

// The planner reports what the user must change as ir.Diagnostics, the
// front end's type, placed at the module, parameter or policy entry they
// are about (ir records where each was written). A pass reports every
// independent problem it finds and carries on where it safely can; the
// driver stops after the first pass that found any (Plan). Warnings are
// diagnostics too: the plan keeps their messages (schedule.Plan.Warnings,
// without positions: a plan outlives its model file's line numbers) and
// Compile returns them placed.

// errorAt reports a problem the user must fix, at pos (the zero Pos: the
// file as a whole), with notes pointing at the other places it involves.
func (s *state) errorAt(pos ir.Pos, notes []ir.Note, format string, args ...any) {
	s.diags = append(s.diags, ir.Diagnostic{Severity: ir.Error, File: s.m.File, Pos: pos, Msg: fmt.Sprintf(format, args...), Notes: notes})
}

// warnAt records a warning at pos; its message also goes into the plan.
func (s *state) warnAt(pos ir.Pos, format string, args ...any) {
	s.diags = append(s.diags, ir.Diagnostic{Severity: ir.Warning, File: s.m.File, Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// failed reports whether a problem has been reported.
func (s *state) failed() bool { return s.diags.HasErrors() }

// errors returns the problems reported, ordered for a reader, one per
// place (the instances of a repeated block make one problem).
func (s *state) errors() ir.Diagnostics {
	var out ir.Diagnostics
	for _, d := range s.diags {
		if d.Severity == ir.Error {
			out = append(out, d)
		}
	}
	return out.Collapse()
}

// warnings returns the warnings in source order, every one: unlike
// errors, the instances of a repeated block each keep theirs, as the plan
// does.
func (s *state) warnings() ir.Diagnostics { return s.diags.Warnings().Sorted() }

// warningTexts are the warnings' messages as the plan records them.
func (s *state) warningTexts() []string {
	var out []string
	for _, d := range s.diags {
		if d.Severity == ir.Warning {
			out = append(out, d.Msg)
		}
	}
	return out
}

// groupPos is where group gi's (first) module is declared; the zero Pos
// for the root, which no entry declares. Valid from the layout pass on,
// which puts s.units in group order.
func (s *state) groupPos(gi int) ir.Pos {
	return s.m.Modules[s.units[gi].modules[0]].Pos
}

// unitPos is where the file makes module id a unit: the policy.units
// pattern that names it, or its declaration when the units are implicit
// (blocks, block-children).
func (s *state) unitPos(id ir.ModuleID) ir.Pos {
	if s.m.Policy.UnitsMode == ir.UnitsPatterns {
		name := s.m.Modules[id].Name
		for _, p := range s.m.Policy.Units {
			if p.Glob.Match(name) && p.Pos.Line > 0 {
				return p.Pos
			}
		}
	}
	return s.m.Modules[id].Pos
}

// settingPos is where the file sets policy key (reshard_after_forward,
// shard_dim) for unit u: in the last [[policy.override]] that matches it
// and sets the key, else in [policy]; the zero Pos when neither writes
// it. It follows policyFor's order, later overrides winning.
func (s *state) settingPos(u *unit, key string) ir.Pos {
	m := s.m
	for i := len(m.Policy.Overrides) - 1; i >= 0; i-- {
		o := &m.Policy.Overrides[i]
		for _, mod := range u.modules {
			if o.Match.Glob.Match(m.Modules[mod].Name) {
				if pos := m.KeyPos(fmt.Sprintf("policy.override[%d].%s", i, key)); pos.Line > 0 {
					return pos
				}
				break
			}
		}
	}
	return m.KeyPos("policy." + key)
}

// note builds a note at pos.
func note(pos ir.Pos, format string, args ...any) ir.Note {
	return ir.Note{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}
