package torchgen

import (
	"fmt"

	"github.com/fsdpc/fsdpc/schedule"
)

// Event is one thing an FSDP2 parameter group did, in the order it did it
// on one rank (the harness's patch_param_groups): a hook (pre-forward,
// pre-backward, post-backward), or an unshard that issued an all-gather
// (Prefetch when another group's hook issued it), a copy-out, or a
// reshard that freed the unsharded parameters.
type Event struct {
	Ev       string `json:"ev"`
	Group    int    `json:"group"`
	Phase    string `json:"phase"`
	Micro    int    `json:"micro"`
	Prefetch bool   `json:"prefetch"`
}

// orderEvent is one event of the compared sequence.
type orderEvent struct {
	ev    string
	group int
	phase string
	micro int
}

// planOrder is the plan's sequence of the events FSDP2 records, in program
// order: a copy-in starts an unshard (the all-gather follows it, or is
// the copy-in itself at one rank), a copy-out copies out, and freeing a
// group's unsharded parameters reshards it (after forward, after
// backward, or in the final callback).
func planOrder(p *schedule.Plan) []orderEvent {
	var out []orderEvent
	for _, op := range p.Ops {
		ev := ""
		switch {
		case op.Kind == schedule.OpCopyIn:
			ev = "unshard"
		case op.Kind == schedule.OpCopyOut:
			ev = "copy-out"
		case op.Kind == schedule.OpFree && op.Buffer >= 0 && p.Buffers[op.Buffer].Kind == schedule.BufUnsharded:
			ev = "reshard"
		default:
			continue
		}
		out = append(out, orderEvent{ev: ev, group: int(op.Group), phase: op.Phase.String(), micro: int(op.Micro)})
	}
	return out
}

// compareOrder checks that FSDP2 unshards (prefetches included), copies
// out and reshards the groups in the plan's order. The hooks are what
// cause these events: a pre-forward copies its group out, a pre-backward
// copies out a group resharded after forward and issues the prefetch,
// a post-backward reshards, so a hook fired out of order shows as the
// first event that differs, which is reported with the FSDP2 hook it
// happened in.
func compareOrder(p *schedule.Plan, rank int, rec Record) []string {
	want := planOrder(p)
	var got []Event
	hook := make([]string, 0, len(rec.Events))
	current := "before any hook"
	for _, e := range rec.Events {
		switch e.Ev {
		case "unshard", "copy-out", "reshard":
			got = append(got, e)
			hook = append(hook, current)
		default:
			current = fmt.Sprintf("in FSDP2's %s of %s", e.Ev, groupName(p, e.Group))
		}
	}
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			e := got[i]
			what := e.Ev
			if e.Prefetch {
				what = "unshard (prefetch)"
			}
			g = fmt.Sprintf("%s of %s (%s, micro-batch %d, %s)", what, groupName(p, e.Group), e.Phase, e.Micro, hook[i])
		}
		if i < len(want) {
			e := want[i]
			w = fmt.Sprintf("%s of %s (%s, micro-batch %d)", e.ev, groupName(p, e.group), e.phase, e.micro)
		}
		switch {
		case i >= len(got):
			return []string{fmt.Sprintf("rank %d: FSDP2's group events end after %d; the plan's event %d is %s", rank, len(got), i+1, w)}
		case i >= len(want):
			return []string{fmt.Sprintf("rank %d: the plan's group events end after %d; FSDP2's event %d is %s", rank, len(want), i+1, g)}
		case got[i].Ev != want[i].ev || got[i].Group != want[i].group:
			return []string{fmt.Sprintf("rank %d: group event %d: FSDP2's is %s, the plan's is %s", rank, i+1, g, w)}
		}
	}
	return nil
}

func groupName(p *schedule.Plan, g int) string {
	if g >= 0 && g < len(p.Groups) {
		return "group " + p.Groups[g].Label()
	}
	return "a unit the plan does not have"
}
