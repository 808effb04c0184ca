package diff

import (
	"fmt"
	"reflect"

	"github.com/fsdpc/fsdpc/schedule"
)

// covered are the fields the other sections already compare, by path
// (list indices left out): the rest of the plan is compared field by field
// here, so no difference between two plans goes unreported.
var covered = map[string]bool{
	"Cluster.GPU": true, "Cluster.WorldSize": true, "Cluster.GPUsPerNode": true, "Cluster.Replicate": true,
	"Cluster.Shard": true, "Cluster.IntraNodeBandwidth": true, "Cluster.InterNodeBandwidth": true, "Cluster.MemoryBudget": true,
	"Train.MicroBatch": true, "Train.SeqLen": true, "Train.GradAccum": true, "Train.AccumulateUnsharded": true,
	"Train.Checkpointing": true, "Train.Optimizer": true, "Train.OptimizerImplementation": true, "Train.MaxGradNorm": true, "Train.ModelFLOPsPerToken": true,
	"Group.Name": true, "Group.ShardNumel": true, "Group.GradShardNumel": true, "Group.ShardBytes": true, "Group.DeferredReduce": true,
	// Policy.ReshardTo is left to the walker: the policy section shows it
	// only for int reshard.
	"Group.Policy.Reshard": true, "Group.Policy.PrefetchForward": true,
	"Group.Policy.PrefetchBackward": true, "Group.Policy.Param": true, "Group.Policy.Reduce": true,
	"Group.Policy.Output": true, "Group.Policy.Offload": true, "Group.Policy.ReduceScatterOp": true,
	"Group.Policy.PremulFactor": true, "Group.Policy.PreDivide": true, "Group.Policy.PostDivide": true,
	"Group.Params":        true, // params() compares them, and fields() their layout below
	"Prediction.StepTime": true, "Prediction.ComputeTime": true, "Prediction.ExposedComm": true,
	"Prediction.PeakAllocated": true, "Prediction.PeakReserved": true,
}

// fields compares what no other section does: the cluster's cost figures
// and profile, the optimizer's state size, each group's remaining policy,
// modules and layout fields, the module and event name tables, and the
// rest of the stored prediction.
func (r *Result) fields() {
	op, np := r.Old.Plan, r.New.Plan
	w := &walker{out: &r.Other}
	w.walk("Cluster", "Cluster", reflect.ValueOf(op.Cluster), reflect.ValueOf(np.Cluster))
	w.walk("Train", "Train", reflect.ValueOf(op.Train), reflect.ValueOf(np.Train))
	newByName := map[string]int{}
	for i := range np.Groups {
		newByName[np.Groups[i].Label()] = i
	}
	for oi := range op.Groups {
		og := &op.Groups[oi]
		ni, ok := newByName[og.Label()]
		if !ok {
			continue
		}
		ng := &np.Groups[ni]
		w.walk("group "+og.Label(), "Group", reflect.ValueOf(*og), reflect.ValueOf(*ng))
		if og.ShardNumel != ng.ShardNumel || og.GradShardNumel != ng.GradShardNumel || og.ShardBytes != ng.ShardBytes {
			continue // the layout section says so; every parameter moved with it
		}
		for k := range min(len(og.Params), len(ng.Params)) {
			a, b := og.Params[k], ng.Params[k]
			// params() reports what a reader names a parameter by.
			a.Name, a.Shape, a.DType, a.RequiresGrad, a.Aliases, a.ShardDim = "", nil, 0, false, nil, 0
			b.Name, b.Shape, b.DType, b.RequiresGrad, b.Aliases, b.ShardDim = "", nil, 0, false, nil, 0
			w.walk(og.Params[k].Name, "Param", reflect.ValueOf(a), reflect.ValueOf(b))
		}
	}
	// The program names modules and events, so their tables' order
	// matters to no one; a name on one side only is reported (an unused
	// one would show nowhere else).
	usedMods, usedEvents := referenced(op)
	newMods, newEvents := referenced(np)
	names(&r.Other, "unused module", unused(op.Modules, usedMods), unused(np.Modules, newMods))
	names(&r.Other, "unused event", unused(op.EventNames, usedEvents), unused(np.EventNames, newEvents))
}

// referenced says which modules and events the program names.
func referenced(p *schedule.Plan) (mods, events map[int]bool) {
	mods, events = map[int]bool{}, map[int]bool{}
	for i := range p.Ops {
		mods[int(p.Ops[i].Module)] = true
		events[int(p.Ops[i].Event)] = true
	}
	return mods, events
}

func unused(names []string, used map[int]bool) []string {
	var out []string
	for i, n := range names {
		if !used[i] {
			out = append(out, n)
		}
	}
	return out
}

// predictionRest compares the stored prediction's remaining figures (CPU
// time, exposed communication per group, the peak op and pools), which
// follow from everything else: reported only when nothing else differs,
// so that a plan edited only there is not called identical.
func (r *Result) predictionRest() {
	w := &walker{out: &r.Other, all: true} // below the prediction section's tolerance too
	w.walk("Prediction", "Prediction", reflect.ValueOf(r.Old.Plan.Prediction), reflect.ValueOf(r.New.Plan.Prediction))
}

func names(out *[]Change, what string, old, new []string) {
	count := map[string]int{}
	for _, n := range old {
		count[n]++
	}
	for _, n := range new {
		count[n]--
	}
	for _, n := range old {
		if count[n] > 0 {
			add(out, what, n, "")
			count[n]--
		}
	}
	for _, n := range new {
		if count[n] < 0 {
			add(out, what, "", n)
			count[n]++
		}
	}
}

type walker struct {
	out *[]Change
	all bool // ignore covered
}

// walk reports every leaf that differs; label is what the reader sees,
// key the path looked up in covered.
func (w *walker) walk(label, key string, a, b reflect.Value) {
	if covered[key] && !w.all {
		return
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i).Name
			w.walk(label+"."+f, key+"."+f, a.Field(i), b.Field(i))
		}
	case reflect.Slice:
		if a.Len() != b.Len() {
			add(w.out, label, fmt.Sprintf("%d entries", a.Len()), fmt.Sprintf("%d entries", b.Len()))
			return
		}
		for i := range a.Len() {
			w.walk(fmt.Sprintf("%s[%d]", label, i), key, a.Index(i), b.Index(i))
		}
	default:
		addShown(w.out, label, show(a), show(b), value(a), value(b), "")
	}
}

func show(v reflect.Value) string {
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	if v.Kind() == reflect.Float64 {
		return num(v.Float())
	}
	return fmt.Sprint(v.Interface())
}

// value is what the JSON form carries: names for enums, the value
// itself otherwise.
func value(v reflect.Value) any {
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	return v.Interface()
}
