package planner

import (
	"fmt"

	"github.com/fsdpc/fsdpc/schedule"
)

// check verifies the planning state after a pass: what the units and groups
// must satisfy, and the schedule once it exists.
func (s *state) check(after string) error {
	m := s.m
	if len(s.units) == 0 {
		return fmt.Errorf("no units")
	}
	seen := map[int32]bool{}
	for _, u := range s.units {
		if len(u.modules) == 0 {
			return fmt.Errorf("a unit has no module")
		}
		for _, p := range u.params {
			if seen[int32(p)] && after != "units" { // the ties pass resolves sharing
				return fmt.Errorf("parameter %s is in two units", m.Params[p].Name)
			}
			seen[int32(p)] = true
			if m.Params[p].TiedTo != -1 {
				return fmt.Errorf("unit holds alias %s instead of its owner", m.Params[p].Name)
			}
		}
	}
	for i := range m.Params {
		if m.Params[i].TiedTo == -1 && !seen[int32(i)] {
			return fmt.Errorf("parameter %s belongs to no unit", m.Params[i].Name)
		}
	}
	if len(s.unitOf) != len(m.Modules) {
		return fmt.Errorf("unitOf covers %d of %d modules", len(s.unitOf), len(m.Modules))
	}
	for _, u := range s.unitOf {
		if u < 0 || u >= len(s.units) {
			return fmt.Errorf("a module maps to unit %d of %d", u, len(s.units))
		}
	}
	if s.plan == nil {
		return nil
	}
	if len(s.plan.Groups) != len(s.units) {
		return fmt.Errorf("%d groups for %d units", len(s.plan.Groups), len(s.units))
	}
	if len(s.plan.Ops) == 0 {
		return nil // not emitted yet
	}
	return schedule.Check(s.plan)
}
