package schedule

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
)

// strings holds every string of a plan to the rule of the model format it
// came from (ir.ValidPath for module and parameter names, ir.ValidLabel for
// the model's and GPU's names) or to the set the planner writes, so a
// forged plan.bin cannot carry code, markup, extra lines or terminal escapes
// into show, textconv, diff, report, emit or a torchtitan config. Problems
// quote the string with %q. It runs first: the other checks name groups and
// parameters in their messages.
func (c *checker) strings() {
	p := c.p
	bad := func(what string, err error) { c.errorf("%s: %v", what, err) }
	label := func(what, s string) {
		if err := ir.ValidLabel(s); err != nil {
			bad(what, err)
		}
	}
	path := func(what, s string) {
		if err := ir.ValidPath(s); err != nil {
			bad(what, err)
		}
	}
	h := &p.Header
	label("header fsdpc version", h.FsdpcVersion)
	label("header model name", h.Model)
	label("header semantics", h.Semantics)
	if strings.Trim(h.InputSHA256, "0123456789abcdef") != "" || len(h.InputSHA256) > 64 {
		c.errorf("header input sha256 %q is not a hex SHA-256", h.InputSHA256)
	}
	label("cluster GPU", p.Cluster.GPU)
	if _, ok := ir.CheckpointingModes[p.Train.Checkpointing]; !ok && p.Train.Checkpointing != "" {
		c.errorf("train checkpointing %q is not a mode the model format has", p.Train.Checkpointing)
	}
	if !slices.Contains(ir.Optimizers(), p.Train.Optimizer) && p.Train.Optimizer != "" {
		c.errorf("train optimizer %q is not one the model format has", p.Train.Optimizer)
	}
	for gi := range p.Groups {
		g := &p.Groups[gi]
		path(fmt.Sprintf("group %d name", gi), g.Name)
		for _, m := range g.Modules {
			path(fmt.Sprintf("group %d module", gi), m)
		}
		for _, gp := range g.Params {
			path(fmt.Sprintf("group %d parameter", gi), gp.Name)
			for _, a := range gp.Aliases {
				path(fmt.Sprintf("group %d parameter alias", gi), a)
			}
		}
	}
	for i, m := range p.Modules {
		// A compute segment is one module, or "first … last" (planner's
		// segmentName).
		first, last, two := strings.Cut(m, " … ")
		path(fmt.Sprintf("module %d", i), first)
		if two {
			path(fmt.Sprintf("module %d", i), last)
		}
	}
	// Buffer and event names and warnings are the planner's text around
	// group and parameter names: printable, and of a plausible length.
	text := func(what string, s string, limit int) {
		switch {
		case !safetext.Printable(s):
			c.errorf("%s %q may contain only printable characters (no control characters, line breaks or tabs)", what, s)
		case len(s) > limit:
			c.errorf("%s is %d bytes long, more than %d", what, len(s), limit)
		}
	}
	for i := range p.Buffers {
		text(fmt.Sprintf("buffer %d name", i), p.Buffers[i].Name, maxTextLen)
	}
	for i, e := range p.EventNames {
		text(fmt.Sprintf("event %d name", i), e, maxTextLen)
	}
	for i, w := range p.Warnings {
		text(fmt.Sprintf("warning %d", i), w, maxWarningLen)
	}
}

// Limits on the planner's text: a buffer or event name is a group's name
// (at most a module path) and a few words; a warning a sentence or two
// naming a few.
const (
	maxTextLen    = 4 << 10
	maxWarningLen = 16 << 10
)
