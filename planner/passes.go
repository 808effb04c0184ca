package planner

// pass is one planner stage. Every pass is required: the plan is not
// complete without any of them. The table is the order they run in.
type pass struct {
	name     string
	fn       func(*state) error
	required bool
	doc      string
}

var passes = []pass{
	{"units", groupUnits, true, "choose the FSDP units and collect each unit's parameters in FSDP2's order"},
	{"ties", resolveTies, true, "reject or merge units that share tied parameters"},
	{"layout", buildGroups, true, "order the groups and lay out their shards, all-gather and reduce-scatter buffers"},
	{"policy", resolvePolicies, true, "resolve reshard, prefetch, mixed precision, divide factors and offload per group"},
	{"deferred", markDeferred, true, "find groups whose reduce-scatter FSDP2 defers to the end of backward"},
	{"emit", emitSchedule, true, "emit the per-rank program: streams, events, buffers, collectives, compute"},
	{"verify", verifyPlan, true, "prove the program safe: happens-before order of every buffer use, collectives per layout"},
	{"predict", predict, true, "simulate the step: time, exposed communication, memory; refuse a plan over budget"},
}

// passOrder states why each pass must come before another. A test checks
// the table against it, so reordering passes fails go test, not a user's
// run.
var passOrder = []struct{ before, after, reason string }{
	{"units", "ties", "ties are found between units"},
	{"ties", "layout", "merged units are laid out as one group"},
	{"layout", "policy", "mixed precision reads the group's parameter dtypes"},
	{"policy", "deferred", "the deferred-reduce warning names the reduce dtype's bytes"},
	{"layout", "deferred", "deferred reduction is decided per group"},
	{"deferred", "emit", "deferred groups reduce in the final callback"},
	{"policy", "emit", "emission follows each group's policy"},
	{"emit", "verify", "the verifier reads the emitted program"},
	{"verify", "predict", "only a safe program is worth simulating"},
}

// PassNames lists the passes in order, for `fsdpc plan -d help`.
func PassNames() []string {
	out := make([]string, len(passes))
	for i, p := range passes {
		out[i] = p.name
	}
	return out
}

// PassDoc describes a pass.
func PassDoc(name string) string {
	for _, p := range passes {
		if p.name == name {
			return p.doc
		}
	}
	return ""
}
