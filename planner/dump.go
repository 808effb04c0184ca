package planner

import (
	"fmt"
	"strings"

	"github.com/fsdpc/fsdpc/schedule"
)

// dump prints the planning state: the units before groups exist, the plan
// text after.
func (s *state) dump() string {
	var b strings.Builder
	if s.plan == nil {
		for _, u := range s.units {
			var mods []string
			for _, m := range u.modules {
				mods = append(mods, quoteUnit(s.m.Modules[m].Name))
			}
			fmt.Fprintf(&b, "unit %s: %d parameters\n", strings.Join(mods, " + "), len(u.params))
			for _, p := range u.params {
				fmt.Fprintf(&b, "  %s\n", s.m.Params[p].Name)
			}
		}
		return b.String()
	}
	saved := s.plan.Warnings
	s.plan.Warnings = append(append([]string(nil), saved...), s.warningTexts()...)
	schedule.WriteText(&b, s.plan)
	s.plan.Warnings = saved
	return b.String()
}
