package calibrate

import (
	"fmt"
	"io"
	"sort"
)

// Step is one run of a scaling series set against the series' smallest
// run: how much of its tokens/s per GPU is lost by adding GPUs, measured
// and predicted.
type Step struct {
	From, To               string // row ids
	FromGPUs, ToGPUs       int
	FromNodes, ToNodes     int
	MeasuredDrop, PredDrop float64 // 1 − tokens/s per GPU at To over at From, %
}

// Factor is the measured drop over the predicted one: 1 when the model
// loses as much per GPU as the runs did, above 1 when adding GPUs costs
// more than it predicts. 0 when the two do not have the same sign (or
// the prediction has no drop), where a ratio says nothing.
func (s Step) Factor() float64 {
	if s.PredDrop == 0 || (s.MeasuredDrop > 0) != (s.PredDrop > 0) {
		return 0
	}
	return s.MeasuredDrop / s.PredDrop
}

// Scaling finds the scaling series among results, runs of one source that
// differ only in their GPU count (model, GPU, checkpointing, compile,
// batch, sequence and every other setting the same), and sets each
// series' runs against its smallest. A run that ran out of memory, has
// no measured throughput or is predicted not to fit is in no series.
// Series are ordered by their first row id, runs by GPU count.
func Scaling(results []Result) []Step {
	series := map[string][]Result{}
	var keys []string
	for _, r := range results {
		if r.oom || r.tokensPerGPU == 0 || !r.fits {
			continue
		}
		k := seriesKey(r.run)
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], r)
	}
	var out []Step
	for _, k := range keys {
		rs := series[k]
		if len(rs) < 2 {
			continue
		}
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].world < rs[j].world })
		base := rs[0]
		for _, r := range rs[1:] {
			if r.world == base.world {
				continue
			}
			out = append(out, Step{
				From: base.id, To: r.id,
				FromGPUs: base.world, ToGPUs: r.world,
				FromNodes: nodes(base.run), ToNodes: nodes(r.run),
				MeasuredDrop: 100 * (1 - r.tokensPerGPU/base.tokensPerGPU),
				PredDrop:     100 * (1 - r.predTPS/base.predTPS),
			})
		}
	}
	return out
}

// seriesKey is everything of a run but its GPU count, mesh, network and
// measurements: two runs with the same key differ only in how many GPUs
// ran them.
func seriesKey(r run) string {
	r.id, r.tier = "", ""
	r.world, r.shard, r.replicate = 0, 0, 0
	r.nodeNetwork, r.networkPerGPU = 0, false
	r.tokensPerGPU, r.oom, r.memGiB, r.memReserved = 0, false, 0, false
	return fmt.Sprintf("%+v", r)
}

func nodes(r run) int { return (r.world + r.gpusPerNode - 1) / r.gpusPerNode }

// WriteScaling prints the scaling table: per step of a series, the drop
// in tokens/s per GPU measured and predicted, and measured over
// predicted (the target: within a factor of 1.5 either way).
func WriteScaling(w io.Writer, steps []Step) {
	if len(steps) == 0 {
		fmt.Fprintln(w, "No scaling series (runs that differ only in their GPU count).")
		return
	}
	fmt.Fprintln(w, "| from | to | GPUs | nodes | measured drop | predicted drop | measured / predicted |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | ---: | ---: | ---: |")
	within := 0
	for _, s := range steps {
		f := "– (signs differ)"
		if x := s.Factor(); x > 0 {
			f = fmt.Sprintf("%.2f", x)
			if x <= 1.5 && x >= 1/1.5 {
				within++
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d → %d | %d → %d | %+.1f%% | %+.1f%% | %s |\n", s.From, s.To, s.FromGPUs, s.ToGPUs,
			s.FromNodes, s.ToNodes, s.MeasuredDrop, s.PredDrop, f)
	}
	fmt.Fprintf(w, "\nWithin a factor of 1.5: %d of %d steps (a drop is 1 − tokens/s per GPU at the larger count over at the smaller)\n", within, len(steps))
}
