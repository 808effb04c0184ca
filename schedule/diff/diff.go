// Package diff compares two plans semantically, the way a reviewer reads a
// Terraform plan: which groups were added, removed, split or merged
// (matched by name, never by position), what changed in each group's
// policy and layout, how the schedule changed phase by phase, and how the
// predicted step time, exposed communication and memory moved, with the
// changes that caused it. Computing the difference (this file) is kept
// apart from rendering it (render.go), so the text, markdown and JSON views
// show the same facts.
package diff

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Result is the semantic difference between two plans. Its JSON form is
// documented in docs/diff.md; fields are added, never renamed or removed.
type Result struct {
	Old, New   Side          `json:"-"`
	Identical  bool          `json:"identical"`
	Provenance []Change      `json:"provenance"`
	Cluster    []Change      `json:"cluster"`
	Train      []Change      `json:"train"`
	Groups     GroupChanges  `json:"groups"`
	Schedule   []PhaseChange `json:"schedule"`
	// Program is every difference in the program op by op (program.go):
	// waits, records, frees, micro-batch labels, buffers and events by
	// name, folded over groups.
	Program []OpEdit `json:"program"`
	// Params are the differences in each group's parameters (names,
	// shapes, dtypes, requires_grad, aliases); Buffers in the buffers by
	// name, folded over groups; Warnings the planner's warnings on one
	// side only.
	Params   []Change     `json:"parameters"`
	Buffers  []FoldedEdit `json:"buffers"`
	Warnings []Change     `json:"warnings"`
	// Other is every other field that differs, by its path
	// ("Cluster.HBMBandwidth", "group layers.3.Policy.CastForwardInputs"),
	// so two plans that differ anywhere never compare identical.
	Other      []Change `json:"other"`
	Prediction []Change `json:"prediction"`
	// Memory compares what is live at each plan's memory peak, by kind of
	// buffer.
	Memory []Change `json:"memory_at_peak"`
	// Causes lists the changes most likely behind the prediction's deltas.
	Causes []string `json:"causes"`
	// Checkpoint is set when the new plan cannot load the old plan's
	// checkpoint, or loads it resharded.
	Checkpoint *CheckpointChange `json:"checkpoint,omitempty"`
}

// Side names one input.
type Side struct {
	Name string
	Plan *schedule.Plan
}

// Change is one value that differs. Old, New and Delta are for people:
// display strings, and the signed relative change where the values are
// numbers ("" otherwise). The JSON form carries the values themselves:
// numbers in Unit (seconds, bytes, bytes per second, or none for counts),
// names as strings, and the relative change as a fraction.
type Change struct {
	What     string   `json:"what"`
	Old      string   `json:"-"`
	New      string   `json:"-"`
	Delta    string   `json:"-"`
	OldValue any      `json:"old"`
	NewValue any      `json:"new"`
	Unit     string   `json:"unit,omitempty"`
	Relative *float64 `json:"relative_change,omitempty"`
}

// The units of Change.Unit.
const (
	UnitSeconds   = "s"
	UnitBytes     = "bytes"
	UnitBandwidth = "bytes/s"
	UnitFLOP      = "FLOP"
)

// GroupChanges describes the groups.
type GroupChanges struct {
	OldCount int          `json:"old_count"`
	NewCount int          `json:"new_count"`
	Added    []string     `json:"added"`
	Removed  []string     `json:"removed"`
	Split    []Regroup    `json:"split"`
	Merged   []Regroup    `json:"merged"`
	Policy   []FoldedEdit `json:"policy"`
	Layout   []FoldedEdit `json:"layout"`
}

// Regroup is one group becoming several (split) or several becoming one
// (merged).
type Regroup struct {
	From []string `json:"from"`
	To   []string `json:"to"`
}

// FoldedEdit is one change applied identically to several groups, folded
// into ranges: "reshard_after_forward true → false on layers.{0–31}".
type FoldedEdit struct {
	Change
	Groups []string `json:"groups"`
	Folded string   `json:"folded"`
}

// PhaseChange counts one kind of operation, in one phase, that changed:
// "backward: all-gather of layers.{3–31}: 29 → 0".
type PhaseChange struct {
	Phase  string   `json:"phase"`
	Kind   string   `json:"kind"`
	Old    int      `json:"old"`
	New    int      `json:"new"`
	Groups []string `json:"groups"`
	Folded string   `json:"folded"`
}

// Compare computes the difference between two plans.
func Compare(oldName string, old *schedule.Plan, newName string, new *schedule.Plan) *Result {
	r := &Result{Old: Side{oldName, old}, New: Side{newName, new}}
	r.provenance()
	r.cluster()
	r.train()
	r.groups()
	r.schedule()
	r.program()
	r.params()
	r.buffers()
	r.warnings()
	r.fields()
	r.prediction()
	r.checkpoint()
	r.Identical = r.none()
	if r.Identical {
		r.predictionRest()
		r.Identical = r.none()
	}
	if !r.Identical {
		r.causes()
	}
	r.nonNil()
	return r
}

// none reports whether no section found a difference.
func (r *Result) none() bool {
	return len(r.Provenance) == 0 && len(r.Cluster) == 0 && len(r.Train) == 0 &&
		len(r.Groups.Added)+len(r.Groups.Removed)+len(r.Groups.Split)+len(r.Groups.Merged)+len(r.Groups.Policy)+len(r.Groups.Layout) == 0 &&
		len(r.Schedule) == 0 && len(r.Program) == 0 && len(r.Params) == 0 && len(r.Buffers) == 0 && len(r.Warnings) == 0 && len(r.Other) == 0 &&
		len(r.Prediction) == 0
}

// nonNil makes empty lists empty rather than null in the JSON form.
func (r *Result) nonNil() {
	for _, cs := range []*[]Change{&r.Provenance, &r.Cluster, &r.Train, &r.Prediction, &r.Memory, &r.Params, &r.Warnings, &r.Other} {
		if *cs == nil {
			*cs = []Change{}
		}
	}
	for _, ss := range []*[]string{&r.Causes, &r.Groups.Added, &r.Groups.Removed} {
		if *ss == nil {
			*ss = []string{}
		}
	}
	for _, rg := range []*[]Regroup{&r.Groups.Split, &r.Groups.Merged} {
		if *rg == nil {
			*rg = []Regroup{}
		}
	}
	for _, fe := range []*[]FoldedEdit{&r.Groups.Policy, &r.Groups.Layout, &r.Buffers} {
		if *fe == nil {
			*fe = []FoldedEdit{}
		}
	}
	if r.Schedule == nil {
		r.Schedule = []PhaseChange{}
	}
	if r.Program == nil {
		r.Program = []OpEdit{}
	}
}

func add(list *[]Change, what, old, new string) {
	if old != new {
		*list = append(*list, Change{What: what, Old: old, New: new, OldValue: old, NewValue: new})
	}
}

// addShown adds a change shown one way and valued another (a hash shown
// short, a size shown with its unit).
func addShown(list *[]Change, what, old, new string, oldValue, newValue any, unit string) {
	if old != new {
		*list = append(*list, Change{What: what, Old: old, New: new, OldValue: oldValue, NewValue: newValue, Unit: unit})
	}
}

// addInt adds a change of a count.
func addInt(list *[]Change, what string, old, new int64) {
	addShown(list, what, i64(old), i64(new), old, new, "")
}

func addNum(list *[]Change, what string, old, new float64, format func(float64) string, unit string) {
	// Sums of floating-point costs may differ in the last bits for the same
	// schedule; a change below a part per billion is no change.
	if old == new || old != 0 && abs(new-old) <= 1e-9*abs(old) {
		return
	}
	c := Change{What: what, Old: format(old), New: format(new), OldValue: old, NewValue: new, Unit: unit}
	if unit == UnitBytes {
		c.OldValue, c.NewValue = int64(old), int64(new)
	}
	if old != 0 {
		rel := (new - old) / old
		c.Delta = fmt.Sprintf("%+.1f%%", 100*rel)
		c.Relative = &rel
	}
	*list = append(*list, c)
}

func (r *Result) provenance() {
	o, n := r.Old.Plan.Header, r.New.Plan.Header
	add(&r.Provenance, "model", o.Model, n.Model)
	so, sn := short(o.InputSHA256), short(n.InputSHA256)
	if so == sn { // differing past the prefix: show them whole
		so, sn = o.InputSHA256, n.InputSHA256
	}
	addShown(&r.Provenance, "input sha256", so, sn, o.InputSHA256, n.InputSHA256, "")
	add(&r.Provenance, "fsdpc version", o.FsdpcVersion, n.FsdpcVersion)
	add(&r.Provenance, "semantics", o.Semantics, n.Semantics)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func (r *Result) cluster() {
	o, n := r.Old.Plan.Cluster, r.New.Plan.Cluster
	add(&r.Cluster, "gpu", o.GPU, n.GPU)
	addInt(&r.Cluster, "world size", int64(o.WorldSize), int64(n.WorldSize))
	addInt(&r.Cluster, "gpus per node", int64(o.GPUsPerNode), int64(n.GPUsPerNode))
	type mesh struct {
		Replicate int `json:"replicate"`
		Shard     int `json:"shard"`
	}
	addShown(&r.Cluster, "mesh (replicate × shard)", fmt.Sprintf("%d × %d", o.Replicate, o.Shard), fmt.Sprintf("%d × %d", n.Replicate, n.Shard),
		mesh{o.Replicate, o.Shard}, mesh{n.Replicate, n.Shard}, "")
	addShown(&r.Cluster, "intra-node bandwidth", gbps(o.IntraNodeBandwidth), gbps(n.IntraNodeBandwidth), o.IntraNodeBandwidth, n.IntraNodeBandwidth, UnitBandwidth)
	addShown(&r.Cluster, "inter-node bandwidth", gbps(o.InterNodeBandwidth), gbps(n.InterNodeBandwidth), o.InterNodeBandwidth, n.InterNodeBandwidth, UnitBandwidth)
	addShown(&r.Cluster, "memory budget", ir.FormatBytes(o.MemoryBudget), ir.FormatBytes(n.MemoryBudget), o.MemoryBudget, n.MemoryBudget, UnitBytes)
}

func (r *Result) train() {
	o, n := r.Old.Plan.Train, r.New.Plan.Train
	addInt(&r.Train, "micro_batch", o.MicroBatch, n.MicroBatch)
	addInt(&r.Train, "seq_len", o.SeqLen, n.SeqLen)
	addInt(&r.Train, "grad_accum", o.GradAccum, n.GradAccum)
	add(&r.Train, "accumulate", accum(o.AccumulateUnsharded), accum(n.AccumulateUnsharded))
	add(&r.Train, "checkpointing", o.Checkpointing, n.Checkpointing)
	add(&r.Train, "optimizer", o.Optimizer, n.Optimizer)
	add(&r.Train, "optimizer_implementation", implementation(o.OptimizerImplementation), implementation(n.OptimizerImplementation))
	add(&r.Train, "max_grad_norm", clipping(o.MaxGradNorm), clipping(n.MaxGradNorm))
}

// clipping shows a plan's clipping threshold; 0 is none.
func clipping(f float64) string {
	if f == 0 {
		return "none"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// implementation shows a plan's optimizer implementation; plans before
// format 10, and optimizers other than AdamW, record none.
func implementation(s string) string {
	if s == "" {
		return "(not recorded)"
	}
	return s
}

func accum(unsharded bool) string {
	if unsharded {
		return "unsharded"
	}
	return "sharded"
}

func itoa(n int) string     { return strconv.Itoa(n) }
func i64(n int64) string    { return strconv.FormatInt(n, 10) }
func gbps(b float64) string { return strconv.FormatFloat(b/1e9, 'f', -1, 64) + " GB/s" }

func (r *Result) groups() {
	op, np := r.Old.Plan, r.New.Plan
	gc := &r.Groups
	gc.OldCount, gc.NewCount = len(op.Groups), len(np.Groups)
	oldByName, newByName := map[string]int{}, map[string]int{}
	for i := range op.Groups {
		oldByName[op.Groups[i].Label()] = i
	}
	for i := range np.Groups {
		newByName[np.Groups[i].Label()] = i
	}
	// Where each parameter lives on each side tells splits from merges.
	oldOwner, newOwner := map[string]string{}, map[string]string{}
	for i := range op.Groups {
		for _, p := range op.Groups[i].Params {
			oldOwner[p.Name] = op.Groups[i].Label()
		}
	}
	for i := range np.Groups {
		for _, p := range np.Groups[i].Params {
			newOwner[p.Name] = np.Groups[i].Label()
		}
	}
	flows := map[string]map[string]bool{}  // old group -> new groups its parameters went to
	inflow := map[string]map[string]bool{} // new group -> old groups its parameters came from
	for p, og := range oldOwner {
		ng, ok := newOwner[p]
		if !ok {
			continue
		}
		if flows[og] == nil {
			flows[og] = map[string]bool{}
		}
		flows[og][ng] = true
		if inflow[ng] == nil {
			inflow[ng] = map[string]bool{}
		}
		inflow[ng][og] = true
	}
	regrouped := map[string]bool{}
	for _, og := range sortedKeys(flows) {
		if to := flows[og]; len(to) > 1 {
			gc.Split = append(gc.Split, Regroup{From: []string{og}, To: sortedKeys(to)})
			regrouped[og] = true
		}
	}
	for _, ng := range sortedKeys(inflow) {
		if from := inflow[ng]; len(from) > 1 {
			gc.Merged = append(gc.Merged, Regroup{From: sortedKeys(from), To: []string{ng}})
			for f := range from {
				regrouped[f] = true
			}
		}
	}
	for _, name := range sortedKeys(oldByName) {
		if _, ok := newByName[name]; !ok && !regrouped[name] {
			gc.Removed = append(gc.Removed, name)
		}
	}
	for _, name := range sortedKeys(newByName) {
		if _, ok := oldByName[name]; !ok && len(inflow[name]) <= 1 {
			gc.Added = append(gc.Added, name)
		}
	}
	sortNatural(gc.Added)
	sortNatural(gc.Removed)

	// Policy and layout of the groups on both sides, folded across groups.
	policy, layout := newFolder(), newFolder()
	for oi := range op.Groups {
		og := &op.Groups[oi]
		ni, ok := newByName[(og).Label()]
		if !ok {
			continue
		}
		ng := &np.Groups[ni]
		name := (og).Label()
		o, n := og.Policy, ng.Policy
		policy.add(name, "reshard_after_forward", reshard(o), reshard(n))
		policy.add(name, "prefetch forward", prefetch(o.PrefetchForward), prefetch(n.PrefetchForward))
		policy.add(name, "prefetch backward", prefetch(o.PrefetchBackward), prefetch(n.PrefetchBackward))
		policy.add(name, "param dtype", o.Param.String(), n.Param.String())
		policy.add(name, "reduce dtype", o.Reduce.String(), n.Reduce.String())
		policy.add(name, "output dtype", o.Output.String(), n.Output.String())
		policy.add(name, "offload", strconv.FormatBool(o.Offload), strconv.FormatBool(n.Offload))
		policy.add(name, "reduce-scatter op", reduceText(o.ReduceScatterOp, o.PremulFactor), reduceText(n.ReduceScatterOp, n.PremulFactor))
		policy.add(name, "divide before/after", fmt.Sprintf("%g/%g", o.PreDivide, o.PostDivide), fmt.Sprintf("%g/%g", n.PreDivide, n.PostDivide))
		policy.add(name, "deferred reduce-scatter", strconv.FormatBool(og.DeferredReduce), strconv.FormatBool(ng.DeferredReduce))
		layout.addValued(name, "shard elements per rank", i64(og.ShardNumel), i64(ng.ShardNumel), og.ShardNumel, ng.ShardNumel, "")
		layout.addValued(name, "gradient elements per rank", i64(og.GradShardNumel), i64(ng.GradShardNumel), og.GradShardNumel, ng.GradShardNumel, "")
		layout.addValued(name, "all-gather bytes per rank", ir.FormatBytes(og.ShardBytes), ir.FormatBytes(ng.ShardBytes), og.ShardBytes, ng.ShardBytes, UnitBytes)
		po, pn := padded(og, op.Cluster.Shard), padded(ng, np.Cluster.Shard)
		layout.addValued(name, "padded parameters", itoa(po), itoa(pn), po, pn, "")
		layout.addValued(name, "parameters", itoa(len(og.Params)), itoa(len(ng.Params)), len(og.Params), len(ng.Params), "")
	}
	gc.Policy, gc.Layout = policy.edits(), layout.edits()
}

func padded(g *schedule.Group, w int) int {
	n := 0
	for _, p := range g.Params {
		if p.Shape[p.ShardDim]%int64(w) != 0 {
			n++
		}
	}
	return n
}

func reshard(p schedule.GroupPolicy) string {
	if p.Reshard == schedule.ReshardTo {
		return itoa(p.ReshardTo)
	}
	return p.Reshard.String()
}

func prefetch(k int) string {
	if k == 0 {
		return "implicit"
	}
	return itoa(k)
}

func reduceText(op schedule.ReduceOp, f float64) string {
	if op == schedule.ReducePremulSum {
		return fmt.Sprintf("premul-sum ×%g", f)
	}
	return op.String()
}

// folder gathers per-group edits and folds identical ones.
type folder struct {
	byEdit map[[3]string][]string
	change map[[3]string]Change
	order  [][3]string
}

func newFolder() *folder {
	return &folder{byEdit: map[[3]string][]string{}, change: map[[3]string]Change{}}
}

// add records a change of a name or setting, valued as shown.
func (f *folder) add(group, what, old, new string) {
	f.addValued(group, what, old, new, old, new, "")
}

// addValued records a change shown one way and valued another.
func (f *folder) addValued(group, what, old, new string, oldValue, newValue any, unit string) {
	if old == new {
		return
	}
	k := [3]string{what, old, new}
	if _, ok := f.byEdit[k]; !ok {
		f.order = append(f.order, k)
		f.change[k] = Change{What: what, Old: old, New: new, OldValue: oldValue, NewValue: newValue, Unit: unit}
	}
	if gs := f.byEdit[k]; len(gs) > 0 && gs[len(gs)-1] == group || slices.Contains(gs, group) {
		return // several buffers of a group: the group once
	}
	f.byEdit[k] = append(f.byEdit[k], group)
}

func (f *folder) edits() []FoldedEdit {
	var out []FoldedEdit
	for _, k := range f.order {
		groups := f.byEdit[k]
		out = append(out, FoldedEdit{Change: f.change[k], Groups: groups, Folded: Fold(groups)})
	}
	return out
}

var indexed = regexp.MustCompile(`^(.*)\.([0-9]+)$`)

// Fold writes group names compactly: numbered instances of one module
// become ranges, "layers.{0–3,5}", and runs at a stride their first two and
// last, "layers.{0,2,…,30}"; other names are listed.
func Fold(names []string) string {
	byPrefix := map[string][]int{}
	var prefixes, plain []string
	for _, n := range names {
		if m := indexed.FindStringSubmatch(n); m != nil {
			i, _ := strconv.Atoi(m[2])
			if _, ok := byPrefix[m[1]]; !ok {
				prefixes = append(prefixes, m[1])
			}
			byPrefix[m[1]] = append(byPrefix[m[1]], i)
			continue
		}
		plain = append(plain, n)
	}
	var parts []string
	parts = append(parts, plain...)
	for _, p := range prefixes {
		idx := byPrefix[p]
		if len(idx) == 1 {
			parts = append(parts, fmt.Sprintf("%s.%d", p, idx[0]))
			continue
		}
		sort.Ints(idx)
		var ranges []string
		for i := 0; i < len(idx); {
			// The longest arithmetic run from i: consecutive instances
			// print as a range, four or more at a stride as its first
			// two and last ("0,2,…,30", every other layer a unit).
			j := i
			if i+1 < len(idx) {
				stride := idx[i+1] - idx[i]
				for j+1 < len(idx) && idx[j+1]-idx[j] == stride {
					j++
				}
				if stride > 1 && j-i < 3 {
					j = i // two or three at a stride: list them
				}
			}
			switch {
			case j == i:
				ranges = append(ranges, strconv.Itoa(idx[i]))
			case idx[i+1]-idx[i] == 1:
				ranges = append(ranges, fmt.Sprintf("%d–%d", idx[i], idx[j]))
			default:
				ranges = append(ranges, fmt.Sprintf("%d,%d,…,%d", idx[i], idx[i+1], idx[j]))
			}
			i = j + 1
		}
		parts = append(parts, fmt.Sprintf("%s.{%s}", p, strings.Join(ranges, ",")))
	}
	return strings.Join(parts, ", ")
}

// schedule compares operation counts per phase, kind and group.
func (r *Result) schedule() {
	type key struct {
		phase, kind, group string
	}
	count := func(p *schedule.Plan) map[key]int {
		out := map[key]int{}
		for _, o := range p.Ops {
			switch o.Kind {
			case schedule.OpAlloc, schedule.OpFree, schedule.OpRecord, schedule.OpWait:
				continue // bookkeeping follows the operations it serves
			}
			g := ""
			if o.Group >= 0 {
				g = p.Groups[o.Group].Label()
			}
			out[key{o.Phase.String(), o.Kind.String(), g}]++
		}
		return out
	}
	oc, nc := count(r.Old.Plan), count(r.New.Plan)
	type edit struct {
		phase, kind string
		old, new    int
	}
	byEdit := map[edit][]string{}
	var order []edit
	keys := map[key]bool{}
	for k := range oc {
		keys[k] = true
	}
	for k := range nc {
		keys[k] = true
	}
	sorted := make([]key, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.phase != b.phase {
			return phaseRank(a.phase) < phaseRank(b.phase)
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		return naturalLess(a.group, b.group)
	})
	for _, k := range sorted {
		if oc[k] == nc[k] {
			continue
		}
		e := edit{k.phase, k.kind, oc[k], nc[k]}
		if _, ok := byEdit[e]; !ok {
			order = append(order, e)
		}
		byEdit[e] = append(byEdit[e], k.group)
	}
	for _, e := range order {
		groups := byEdit[e]
		r.Schedule = append(r.Schedule, PhaseChange{Phase: e.phase, Kind: e.kind, Old: e.old, New: e.new, Groups: groups, Folded: Fold(groups)})
	}
}

func phaseRank(p string) int {
	switch p {
	case "forward":
		return 0
	case "backward":
		return 1
	}
	return 2
}

func (r *Result) prediction() {
	o, n := r.Old.Plan.Prediction, r.New.Plan.Prediction
	addNum(&r.Prediction, "step time", o.StepTime, n.StepTime, Seconds, UnitSeconds)
	addNum(&r.Prediction, "compute time", o.ComputeTime, n.ComputeTime, Seconds, UnitSeconds)
	addNum(&r.Prediction, "exposed communication", o.ExposedComm, n.ExposedComm, Seconds, UnitSeconds)
	addNum(&r.Prediction, "peak memory allocated", float64(o.PeakAllocated), float64(n.PeakAllocated), bytesF, UnitBytes)
	addNum(&r.Prediction, "peak memory reserved", float64(o.PeakReserved), float64(n.PeakReserved), bytesF, UnitBytes)
	// MFU's count per token, which the plans carry from format 8 on (0
	// before: not known, so not a change).
	if of, nf := r.Old.Plan.Train.ModelFLOPsPerToken, r.New.Plan.Train.ModelFLOPsPerToken; of > 0 && nf > 0 {
		addNum(&r.Prediction, "model FLOPs per token", of, nf, ir.FormatFLOP, UnitFLOP)
	}
	if len(r.Prediction) == 0 {
		return
	}
	ok, nk := liveByKind(r.Old.Plan), liveByKind(r.New.Plan)
	kinds := map[string]bool{}
	for k := range ok {
		kinds[k] = true
	}
	for k := range nk {
		kinds[k] = true
	}
	for _, k := range sortedKeys(kinds) {
		addNum(&r.Memory, k, float64(ok[k]), float64(nk[k]), bytesF, UnitBytes)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func bytesF(b float64) string { return ir.FormatBytes(int64(b)) }

// Seconds prints a duration with a unit that suits it.
func Seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}

func liveByKind(p *schedule.Plan) map[string]int64 {
	out := map[string]int64{}
	if p.Prediction.StepTime == 0 {
		return out
	}
	for _, b := range schedule.LiveAt(p, p.Prediction.PeakOp) {
		out[p.Buffers[b].Kind.String()] += p.Buffers[b].Bytes
	}
	return out
}

// causes names the changes most likely behind the deltas, most specific
// first: what changed in the cluster or training, then policies, then
// regrouping.
func (r *Result) causes() {
	for _, c := range r.Cluster {
		r.Causes = append(r.Causes, fmt.Sprintf("%s %s → %s", c.What, c.Old, c.New))
	}
	for _, c := range r.Train {
		r.Causes = append(r.Causes, fmt.Sprintf("%s %s → %s", c.What, c.Old, c.New))
	}
	for _, e := range r.Groups.Policy {
		r.Causes = append(r.Causes, fmt.Sprintf("%s %s → %s on %s", e.What, e.Old, e.New, e.Folded))
	}
	if n := len(r.Groups.Split) + len(r.Groups.Merged) + len(r.Groups.Added) + len(r.Groups.Removed); n > 0 {
		r.Causes = append(r.Causes, fmt.Sprintf("the groups changed: %d added, %d removed, %d split, %d merged",
			len(r.Groups.Added), len(r.Groups.Removed), len(r.Groups.Split), len(r.Groups.Merged)))
	}
	if len(r.Causes) == 0 && len(r.Groups.Layout) > 0 {
		r.Causes = append(r.Causes, "the model's parameters changed")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortNatural(out)
	return out
}

func sortNatural(xs []string) {
	sort.Slice(xs, func(i, j int) bool { return naturalLess(xs[i], xs[j]) })
}

// naturalLess orders "layers.2" before "layers.10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' && n < 9 {
		n++
	}
	return n
}
