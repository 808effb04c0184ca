// Package report renders plans as one self-contained HTML page: the
// per-stream timeline of a simulated step, device memory over GPU time by
// buffer kind with the peak explained, compute, communication and exposed
// communication per FSDP group, the plan's decisions and warnings, and for
// two plans their difference. It is a view of schedule's data (plan,
// simulation, GPU clocks, diff) with nothing of its own to compute, kept
// out of cmd/fsdpc so that it can be tested as a page.
package report

import (
	"fmt"
	"math"
	"sort"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// Input is one plan to show, with the name the user gave it.
type Input struct {
	Name string
	Plan *schedule.Plan
	// FLOPsPerToken is the model's FLOPs per token by MFU's convention
	// (ir.Model.FLOPsPerToken), 0 when the model is not known: then the
	// page takes the plan's (format 8 on), and for an older plan gives
	// HFU alone and says what MFU needs.
	FLOPsPerToken float64
}

// mfuUnknown is the summary's MFU for a plan that does not carry the
// model's FLOPs per token (before format 8) when the model is not given;
// sim's and show's line says the same.
const mfuUnknown = "needs the model's FLOPs per token, which plans before format 8 do not carry: re-plan, or give report the model file in place of the plan"

// Layout of the drawings, in CSS pixels.
const (
	chartWidth = 1100
	laneHeight = 22
	memHeight  = 260
	barWidth   = 520
	leftMargin = 110
)

type kv struct{ K, V string }

type rect struct {
	X, Y, W, H float64
	Fill       string
	Title      string
	Group      int
	// Ops is how many operations the rectangle draws: 1, or more for a
	// fold of operations each narrower than a pixel (foldRects).
	Ops int
}

type lane struct {
	Name string
	Y    float64
}

type tick struct {
	X     float64
	Label string
}

type area struct {
	Kind, Fill, Points string
}

type groupBar struct {
	Name                             string
	Compute, Comm, Exposed           string
	ComputeW, CommW, ExposedW        float64
	ComputeX, CommX, ExposedX, Index int
}

type decision struct {
	Name, Params, Reshard, Prefetch, DTypes, Reduce, Offload string
}

type planView struct {
	ID       string
	Label    string
	Summary  []kv
	Lanes    []lane
	Rects    []rect
	Ticks    []tick
	TLHeight float64

	Areas      []area
	Legend     []kv // kind, colour
	BudgetY    float64
	PeakX      float64
	PeakY      float64
	PeakText   string
	PeakKinds  []kv
	PeakBufs   []kv
	MemTicks   []tick
	MemYTicks  []tick
	GroupBars  []groupBar
	BarsHeight int
	Decisions  []decision
	Warnings   []string
}

type page struct {
	Title string
	Plans []planView
	Diff  *difference
}

var streamNames = []string{"compute", "copy-in", "all-gather", "reduce-scatter", "all-reduce", "host"}

// opColor gives each kind of operation its colour in the timeline.
func opColor(k schedule.OpKind) string {
	switch k {
	case schedule.OpForward:
		return "#4c78a8"
	case schedule.OpBackward:
		return "#7b5ea7"
	case schedule.OpAllGather:
		return "#54a24b"
	case schedule.OpReduceScatter:
		return "#f58518"
	case schedule.OpAllReduce:
		return "#e45756"
	case schedule.OpCopyIn, schedule.OpCopyOut, schedule.OpReshard, schedule.OpReduceCopyIn, schedule.OpCastGrad:
		return "#72b7b2"
	case schedule.OpH2D, schedule.OpD2H:
		return "#b279a2"
	case schedule.OpOptimizer:
		return "#9d755d"
	case schedule.OpWait, schedule.OpSync:
		return "#bab0ac"
	}
	return "#88a"
}

// kindColors colour the memory curve's buffer kinds.
var kindColors = []string{"#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728",
	"#ff9896", "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f"}

func build(in Input, id string) (planView, error) {
	p := in.Plan
	model := schedule.NewModel(p)
	sim, err := schedule.Simulate(p, model)
	if err != nil {
		return planView{}, fmt.Errorf("%s: %w", in.Name, err)
	}
	clk := schedule.GPUClocks(p, model, sim)
	v := planView{ID: id, Label: in.Name}
	step := math.Max(sim.StepTime, 1e-12)
	v.Summary = []kv{
		{"model", p.Header.Model},
		{"cluster", fmt.Sprintf("%s × %s (%s per node)", commas(p.Cluster.WorldSize), p.Cluster.GPU, commas(p.Cluster.GPUsPerNode))},
		{"step time", diff.Seconds(sim.StepTime)},
	}
	// The step as the sum of its parts (schedule.StepBreakdown).
	for _, part := range sim.Breakdown.Parts() {
		v.Summary = append(v.Summary, kv{"  " + part.Label, fmt.Sprintf("%s (%.1f%%)", diff.Seconds(part.Seconds), 100*part.Seconds/step)})
	}
	perToken := in.FLOPsPerToken
	if perToken == 0 {
		perToken = p.Train.ModelFLOPsPerToken
	}
	tp := schedule.NewThroughput(p, sim.StepTime, perToken)
	mfu := mfuUnknown
	if tp.ModelFLOPsPerToken > 0 {
		mfu = fmt.Sprintf("%.1f%% (%.1f TFLOP/s per GPU)", 100*tp.MFU, tp.ModelFLOPS/1e12)
	}
	v.Summary = append(v.Summary, []kv{
		{"compute alone", diff.Seconds(sim.ComputeTime)},
		{"CPU issue", diff.Seconds(sim.CPUTime)},
		{"throughput", fmt.Sprintf("%s tokens/s per GPU, %s tokens per step", number(tp.TokensPerSecondPerGPU, 0), commas(tp.TokensPerStep))},
		{"MFU", mfu},
		{"HFU", fmt.Sprintf("%.1f%% of the %s peak", 100*tp.HFU, tp.PeakDType)},
		{"peak allocated", ir.FormatBytes(sim.PeakAllocated)},
		{"peak reserved", fmt.Sprintf("%s of a %s budget", ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(p.Cluster.MemoryBudget))},
		{"groups, ops", fmt.Sprintf("%s groups, %s ops", commas(len(p.Groups)), commas(len(p.Ops)))},
	}...)
	x := func(t float64) float64 { return leftMargin + t/step*chartWidth }
	v.Ticks = timeTicks(step, x)

	// Timeline: one lane per stream, a rectangle per operation that takes
	// time; stalls on events are drawn as waits.
	for s, name := range streamNames {
		v.Lanes = append(v.Lanes, lane{name, float64(s * laneHeight)})
	}
	v.TLHeight = float64(len(streamNames)*laneHeight) + 24
	folds := newFolder(len(streamNames))
	for i := range p.Ops {
		o := &p.Ops[i]
		tm := sim.Ops[i]
		if tm.End <= tm.Start {
			continue
		}
		switch o.Kind {
		case schedule.OpAlloc, schedule.OpFree, schedule.OpRecord:
			continue
		}
		r := rect{X: x(tm.Start), Y: float64(int(o.Stream)*laneHeight) + 2, W: math.Max((tm.End-tm.Start)/step*chartWidth, 0.3),
			H: laneHeight - 4, Fill: opColor(o.Kind), Group: int(o.Group), Ops: 1}
		if folds.add(&v.Rects, int(o.Stream), r, o.Kind, tm.Start, tm.End) {
			continue
		}
		label := o.Kind.String()
		if o.Group >= 0 {
			label += " " + p.Groups[o.Group].Label()
		}
		v.Rects[len(v.Rects)-1].Title = fmt.Sprintf("%s: %s, %s to %s (op %s, %s)", label, diff.Seconds(tm.End-tm.Start), diff.Seconds(tm.Start), diff.Seconds(tm.End), commas(i), o.Phase)
	}
	folds.finish(v.Rects)

	// Memory over GPU time, stacked by buffer kind.
	peak := clk.PeakPoint.Total
	top, memTicks, memLabels := byteAxis(float64(max(peak, p.Cluster.MemoryBudget, sim.PeakReserved, 1)))
	y := func(b float64) float64 { return memHeight - b/top*memHeight }
	v.BudgetY = y(float64(p.Cluster.MemoryBudget))
	present := make([]bool, schedule.NumBufferKinds)
	for _, pt := range clk.MemoryPoints() {
		for k, b := range pt.Bytes {
			if b != 0 {
				present[k] = true
			}
		}
	}
	base := make([]float64, len(clk.Memory))
	for k := 0; k < schedule.NumBufferKinds; k++ {
		if !present[k] {
			continue
		}
		var lower, upper outline
		prevTop, prevBase := 0.0, 0.0
		for i, pt := range clk.MemoryPoints() {
			t := x(pt.Time) - leftMargin
			newTop := base[i] + float64(pt.Bytes[k])
			if i > 0 {
				upper.add(t, y(prevTop))
				lower.add(t, y(prevBase))
			}
			upper.add(t, y(newTop))
			lower.add(t, y(base[i]))
			prevTop, prevBase = newTop, base[i]
			base[i] = newTop
		}
		end := x(step) - leftMargin
		upper.add(end, y(prevTop))
		lower.add(end, y(prevBase))
		low := lower.points()
		for i, j := 0, len(low)-1; i < j; i, j = i+1, j-1 {
			low[i], low[j] = low[j], low[i]
		}
		color := kindColors[k%len(kindColors)]
		name := schedule.BufferKind(k).String()
		v.Areas = append(v.Areas, area{name, color, pointsString(append(upper.points(), low...))})
		v.Legend = append(v.Legend, kv{name, color})
	}
	pk := clk.PeakPoint
	v.PeakX, v.PeakY = x(pk.Time)-leftMargin, y(float64(pk.Total))
	v.MemTicks = v.Ticks
	for i, b := range memTicks {
		v.MemYTicks = append(v.MemYTicks, tick{y(b), memLabels[i]})
	}
	v.PeakText = peakText(p, sim, clk)
	type kb struct {
		k string
		b int64
	}
	var kinds []kb
	for k, b := range pk.Bytes {
		if b > 0 {
			kinds = append(kinds, kb{schedule.BufferKind(k).String(), b})
		}
	}
	sort.SliceStable(kinds, func(i, j int) bool { return kinds[i].b > kinds[j].b })
	for _, e := range kinds {
		v.PeakKinds = append(v.PeakKinds, kv{e.k, fmt.Sprintf("%s (%.0f%%)", ir.FormatBytes(e.b), 100*float64(e.b)/float64(max(pk.Total, 1)))})
	}
	live := schedule.LiveAt(p, sim.PeakOp)
	// LiveAt's order is a map's: order by size, then index, so the page is
	// the same every time.
	sort.Slice(live, func(i, j int) bool {
		bi, bj := p.Buffers[live[i]].Bytes, p.Buffers[live[j]].Bytes
		return bi > bj || bi == bj && live[i] < live[j]
	})
	for i, b := range live {
		if i == 8 {
			v.PeakBufs = append(v.PeakBufs, kv{fmt.Sprintf("… %s more", commas(len(live)-8)), ""})
			break
		}
		buf := &p.Buffers[b]
		v.PeakBufs = append(v.PeakBufs, kv{fmt.Sprintf("%s (%s)", buf.Name, buf.Kind), ir.FormatBytes(buf.Bytes)})
	}

	// Per group: compute, communication and exposed communication.
	compute := make([]float64, len(p.Groups))
	comm := make([]float64, len(p.Groups))
	for i := range p.Ops {
		o := &p.Ops[i]
		if o.Group < 0 {
			continue
		}
		d := sim.Ops[i].End - sim.Ops[i].Start
		switch o.Kind {
		case schedule.OpForward, schedule.OpBackward:
			compute[o.Group] += d
		case schedule.OpAllGather, schedule.OpReduceScatter, schedule.OpAllReduce:
			comm[o.Group] += d
		}
	}
	longest := 1e-12
	for g := range p.Groups {
		longest = math.Max(longest, math.Max(compute[g], comm[g]))
	}
	w := func(t float64) float64 { return t / longest * barWidth / 2 }
	for g := range p.Groups {
		gb := groupBar{Name: p.Groups[g].Label(), Index: g,
			Compute: diff.Seconds(compute[g]), Comm: diff.Seconds(comm[g]), Exposed: diff.Seconds(sim.ExposedByGroup[g]),
			ComputeW: w(compute[g]), CommW: w(comm[g]), ExposedW: w(sim.ExposedByGroup[g])}
		v.GroupBars = append(v.GroupBars, gb)
	}
	v.BarsHeight = 26*len(v.GroupBars) + 10

	for g := range p.Groups {
		gr := &p.Groups[g]
		pol := gr.Policy
		reshard := pol.Reshard.String()
		if pol.Reshard == schedule.ReshardTo {
			reshard = fmt.Sprintf("to %d", pol.ReshardTo)
		}
		prefetch := "implicit"
		if pol.PrefetchForward > 0 || pol.PrefetchBackward > 0 {
			prefetch = fmt.Sprintf("forward %d, backward %d", pol.PrefetchForward, pol.PrefetchBackward)
		}
		offload := "no"
		if pol.Offload {
			offload = "yes"
		}
		v.Decisions = append(v.Decisions, decision{Name: gr.Label(), Params: fmt.Sprintf("%s tensors, %s shard", commas(len(gr.Params)), ir.FormatBytes(gr.ShardBytes)),
			Reshard: reshard, Prefetch: prefetch, DTypes: fmt.Sprintf("%s → %s", pol.Orig, pol.Param), Reduce: fmt.Sprintf("%s, %s", pol.Reduce, pol.ReduceScatterOp), Offload: offload})
	}
	v.Warnings = append(v.Warnings, p.Warnings...)
	return v, nil
}

// peakText says where the GPU-clock peak is and what the allocator's peak,
// which bounds reservation, is made of.
func peakText(p *schedule.Plan, sim *schedule.Simulation, clk *schedule.Clocks) string {
	pk := clk.PeakPoint
	where := "before the step"
	if clk.PeakOp >= 0 {
		o := &p.Ops[clk.PeakOp]
		where = o.Phase.String()
		if o.Group >= 0 {
			where += " of " + p.Groups[o.Group].Label()
		}
		where += fmt.Sprintf(", micro-batch %d", o.Micro)
	}
	return fmt.Sprintf("On the GPU clock, %s is in use at %s (%s). The caching allocator's peak, when the CPU asks for memory ahead of the GPU, is %s allocated and %s reserved across its pools: that is what must fit the budget.",
		ir.FormatBytes(pk.Total), diff.Seconds(pk.Time), where, ir.FormatBytes(sim.PeakAllocated), ir.FormatBytes(sim.PeakReserved))
}
