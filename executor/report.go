package executor

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Report is what a run measured and found.
type Report struct {
	Model, Backend          string
	World, Replicate, Shard int
	Scale, Steps, Ops       int
	GradAccum               int
	AccumulateUnsharded     bool
	Optimizer               string
	// Elements is the parameter count of the (scaled) model.
	Elements int64
	// SizeDiffs are buffers whose plan size the layout does not reproduce.
	SizeDiffs []string

	Times struct {
		Setup, Reference, Run, Issue, Verify time.Duration
	}
	// StepWall is each step's wall time, first op to last, over all ranks;
	// Phases the wall time of each phase summed over the steps; Busy each
	// stream's kernel time, averaged over ranks.
	StepWall []time.Duration
	Phases   [numPhases]time.Duration
	Busy     [numStreams]time.Duration

	Pools  []PoolReport
	Groups []GroupVerdict
	// Exact: the backend reduces in a fixed order, so results must equal
	// the reference bit for bit.
	Exact bool
	// Completed: every step ran to the end (else the run stopped at its
	// first failure, and the measurements are partial).
	Completed bool
	Failures  *FailureError
	// Final is the reference's state after the last step, when the run
	// saved a checkpoint (Options.Checkpoint).
	Final *Final
	// Saved is the directory the run's checkpoint was saved to (a step-N
	// directory of Options.Checkpoint).
	Saved string
}

// PoolReport compares one pool's measured peak with the prediction.
type PoolReport struct {
	Pool schedule.Pool
	// Measured is the peak of live bytes on rank 0 (Agree: every rank saw
	// the same); Predicted the simulator's peak for the scaled plan, Plan
	// the plan's own prediction (unscaled, 0 if the plan has none).
	Measured, Predicted, Plan int64
	Reserved, Allocs          int64
	Agree                     bool
}

// GroupVerdict compares one group's final shards, on every rank, with the
// reference.
type GroupVerdict struct {
	Group            string
	Elements         int64 // compared, over all ranks: parameters and states
	Mismatched       int64
	MaxAbs, MaxRel   float64
	ParamsMismatched int64
	// Updated counts parameter elements whose final value differs from
	// their initial one: the steps did train (0 for a frozen group).
	Updated int64
}

// OK reports whether the run passed.
func (r *Report) OK() bool { return r.Failures == nil }

func (r *Report) memoryAgrees() bool {
	for _, p := range r.Pools {
		if p.Measured != p.Predicted || !p.Agree {
			return false
		}
	}
	return true
}

func (d *driver) collectStats(rep *Report, p, q *schedule.Plan) {
	stats := make([]RankStats, len(d.local))
	for i, r := range d.local {
		stats[i] = d.b.Stats(r)
	}
	for pool := 0; pool < numPools; pool++ {
		pr := PoolReport{Pool: schedule.Pool(pool), Measured: stats[0].Pools[pool].Peak, Reserved: stats[0].Pools[pool].Reserved,
			Allocs: stats[0].Pools[pool].Allocs, Agree: true}
		if pool < len(q.Prediction.PeakByPool) {
			pr.Predicted = q.Prediction.PeakByPool[pool]
		}
		if pool < len(p.Prediction.PeakByPool) {
			pr.Plan = p.Prediction.PeakByPool[pool]
		}
		for r := range stats {
			if stats[r].Pools[pool].Peak != pr.Measured {
				pr.Agree = false
			}
		}
		if pr.Measured == 0 && pr.Predicted == 0 && pr.Plan == 0 {
			continue
		}
		rep.Pools = append(rep.Pools, pr)
	}
	rep.StepWall = make([]time.Duration, d.opts.Steps)
	for step := 0; step < d.opts.Steps; step++ {
		lo, hi := int64(math.MaxInt64), int64(0)
		for ph := 0; ph < numPhases; ph++ {
			plo, phi := int64(math.MaxInt64), int64(0)
			for r := range stats {
				if step < len(stats[r].PhaseStart) {
					plo = min(plo, stats[r].PhaseStart[step][ph])
					phi = max(phi, stats[r].PhaseEnd[step][ph])
				}
			}
			if phi > plo {
				rep.Phases[ph] += time.Duration(phi - plo)
				lo, hi = min(lo, plo), max(hi, phi)
			}
		}
		if hi > lo {
			rep.StepWall[step] = time.Duration(hi - lo)
		}
	}
	for s := 0; s < numStreams; s++ {
		var sum time.Duration
		for r := range stats {
			sum += stats[r].Busy[s]
		}
		rep.Busy[s] = sum / time.Duration(len(stats))
	}
}

// verify compares every rank's final parameters and optimizer states with
// the reference's.
func (d *driver) verify(rep *Report, exp *expectations) []Failure {
	var fails []Failure
	for g, gl := range d.layouts {
		v := GroupVerdict{Group: gl.Name}
		for bi, b := range d.q.Buffers {
			if !b.Persistent || b.Group != g || (b.Kind != schedule.BufShardedParams && b.Kind != schedule.BufOptimizerState) {
				continue
			}
			for _, rank := range d.local {
				got, err := d.b.Download(rank, d.mems[rank][bi])
				if err != nil {
					fails = append(fails, Failure{Kind: Internal, Rank: rank, Op: -1, What: err.Error()})
					continue
				}
				// The regions to compare: each parameter in its dtype, or
				// the fp32 states.
				type region struct {
					name string
					dt   ir.DType
					off  int64 // bytes
					n    int64
				}
				var regions []region
				want := exp.params[g][rank]
				if b.Kind == schedule.BufShardedParams {
					for _, p := range gl.Params {
						for e := int64(0); e < p.ShardNumel; e++ {
							if load(p.DType, got[p.ShardedOffset:], e) != load(p.DType, exp.initial[g][rank][p.ShardedOffset:], e) {
								v.Updated++
							}
						}
					}
				}
				if b.Kind == schedule.BufOptimizerState {
					want = exp.states[g][rank]
					if want == nil {
						continue // a stateless optimizer's unused state
					}
					regions = []region{{b.Name, ir.FP32, 0, int64(len(want)) / 4}}
					got = got[:min(len(got), len(want))]
				} else {
					for _, p := range gl.Params {
						regions = append(regions, region{p.Name, p.DType, p.ShardedOffset, p.ShardNumel})
					}
				}
				if len(got) != len(want) {
					fails = append(fails, Failure{Kind: Internal, Rank: rank, Op: -1, What: fmt.Sprintf("buffer %s holds %d bytes, the reference %d", b.Name, len(got), len(want))})
					continue
				}
				for _, rg := range regions {
					var first, count int64 = -1, 0
					for e := int64(0); e < rg.n; e++ {
						x, y := load(rg.dt, got[rg.off:], e), load(rg.dt, want[rg.off:], e)
						v.Elements++
						if math.Float64bits(x) == math.Float64bits(y) {
							continue
						}
						abs := math.Abs(x - y)
						if math.IsNaN(abs) {
							abs = math.Inf(1)
						}
						rel := math.Inf(1)
						if y != 0 {
							rel = abs / math.Abs(y)
						}
						v.MaxAbs, v.MaxRel = max(v.MaxAbs, abs), max(v.MaxRel, rel)
						v.Mismatched++
						if b.Kind == schedule.BufShardedParams {
							v.ParamsMismatched++
						}
						if rep.Exact || rel > tolerance {
							if first < 0 {
								first = e
							}
							count++
						}
					}
					if first >= 0 {
						fails = append(fails, Failure{Kind: Mismatch, Rank: rank, Step: d.opts.Steps - 1, Op: -1,
							What: fmt.Sprintf("after %d step(s), %s in %s differs from the reference: shard element %d is %v, the reference's %v (%d of %d elements differ on this rank)",
								d.opts.Steps, rg.name, b.Name, first, load(rg.dt, got[rg.off:], first), load(rg.dt, want[rg.off:], first), count, rg.n)})
					}
				}
			}
		}
		rep.Groups = append(rep.Groups, v)
	}
	if len(fails) > maxFailures {
		fails = fails[:maxFailures]
	}
	return fails
}

// tolerance is the relative bound a backend without a fixed reduction
// order is held to (docs/executor.md).
const tolerance = 1e-2

// Write prints the report.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "run %s on the %s backend: %d ranks", r.Model, r.Backend, r.World)
	if r.Replicate > 1 {
		fmt.Fprintf(w, " (HSDP %d × %d)", r.Replicate, r.Shard)
	}
	fmt.Fprintf(w, ", scale 1/%d (%s parameters), %d step(s) of %d micro-batch(es), %s accumulation, %s\n",
		r.Scale, ir.FormatCount(r.Elements), r.Steps, r.GradAccum, map[bool]string{true: "unsharded", false: "sharded"}[r.AccumulateUnsharded], r.Optimizer)
	fmt.Fprintf(w, "  %d ops per rank per step\n", r.Ops)
	fmt.Fprintln(w, "\ntimes")
	rows := [][2]string{
		{"setup", r.Times.Setup.String()},
		{"reference", r.Times.Reference.String()},
		{"run", r.Times.Run.String()},
		{"  CPU issue", r.Times.Issue.String()},
	}
	if len(r.StepWall) > 0 {
		s := append([]time.Duration(nil), r.StepWall...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		rows = append(rows, [2]string{"  step (median)", s[len(s)/2].String()})
	}
	for ph := 0; ph < numPhases; ph++ {
		rows = append(rows, [2]string{"  " + schedule.Phase(ph).String() + " wall", r.Phases[ph].String()})
	}
	rows = append(rows, [2]string{"verify", r.Times.Verify.String()})
	for _, row := range rows {
		fmt.Fprintf(w, "  %-16s %s\n", row[0], row[1])
	}
	fmt.Fprintln(w, "  (phase walls are summed over steps, first op to last on any rank; they overlap)")
	fmt.Fprint(w, "  stream busy per rank:")
	for s := 0; s < numStreams; s++ {
		if r.Busy[s] > 0 {
			fmt.Fprintf(w, " %s %s", schedule.Stream(s), r.Busy[s].Round(time.Microsecond))
		}
	}
	fmt.Fprintln(w)

	if r.Completed {
		fmt.Fprintln(w, "\nmemory per rank (peak of live bytes per pool)")
	} else {
		fmt.Fprintln(w, "\nmemory per rank (peak of live bytes per pool), as far as the run got before it stopped")
	}
	fmt.Fprintf(w, "  %-15s %14s %14s %7s %14s %14s\n", "pool", "measured", "predicted", "", "plan (1/1)", "reserved")
	for _, p := range r.Pools {
		verdict := "exact"
		switch {
		case !r.Completed:
			verdict = "-"
		case p.Measured != p.Predicted:
			verdict = "DIFFERS"
		}
		if !p.Agree && r.Completed {
			verdict += ", ranks differ"
		}
		fmt.Fprintf(w, "  %-15s %14s %14s %7s %14s %14s\n", p.Pool, ir.FormatCount(p.Measured), ir.FormatCount(p.Predicted), verdict, ir.FormatCount(p.Plan), ir.FormatCount(p.Reserved))
	}
	fmt.Fprintln(w, "  (predicted: the simulator on the scaled plan; measured: the host allocator, which acts as the CPU")
	fmt.Fprintln(w, "  issues each alloc and free, as the CUDA caching allocator does; reserved: blocks it holds)")
	if len(r.SizeDiffs) > 0 {
		fmt.Fprintf(w, "  the plan's own sizes differ from its layout for %d buffer(s); runs follow the layout:\n", len(r.SizeDiffs))
		for i, s := range r.SizeDiffs {
			if i == 5 {
				fmt.Fprintf(w, "    … and %d more\n", len(r.SizeDiffs)-5)
				break
			}
			fmt.Fprintf(w, "    %s\n", s)
		}
	}

	if len(r.Groups) > 0 {
		fmt.Fprintf(w, "\nnumerics against the unsharded reference (%s)\n", map[bool]string{true: "exact: the host reduces in rank order", false: fmt.Sprintf("within a relative %g", tolerance)}[r.Exact])
		var total, bad, updated int64
		for _, g := range r.Groups {
			total += g.Elements
			bad += g.Mismatched
			updated += g.Updated
		}
		if bad == 0 {
			fmt.Fprintf(w, "  all %d groups: %s elements (parameters and optimizer states on every rank) equal the reference, max error 0;\n  %s parameter elements moved from their initial values\n", len(r.Groups), ir.FormatCount(total), ir.FormatCount(updated))
			if len(r.Groups) <= 40 {
				groupTable(w, r.Groups)
			}
		} else {
			var differ []GroupVerdict
			for _, g := range r.Groups {
				if g.Mismatched > 0 {
					differ = append(differ, g)
				}
			}
			fmt.Fprintf(w, "  %s of %s elements differ, in %d of %d groups:\n", ir.FormatCount(bad), ir.FormatCount(total), len(differ), len(r.Groups))
			groupTable(w, differ)
		}
	}
	if r.Failures != nil {
		fmt.Fprintf(w, "\nFAILED: %s\n", strings.TrimPrefix(r.Failures.Error(), "the run failed: "))
	} else {
		fmt.Fprintln(w, "\nOK: every gather, gradient, parameter and state matched the reference; no hazard, no deadlock")
	}
}

func groupTable(w io.Writer, groups []GroupVerdict) {
	fmt.Fprintf(w, "  %-28s %12s %12s %12s %10s %10s\n", "group", "elements", "trained", "differ", "max abs", "max rel")
	for _, g := range groups {
		fmt.Fprintf(w, "  %-28s %12s %12s %12s %10.3g %10.3g\n", g.Group, ir.FormatCount(g.Elements), ir.FormatCount(g.Updated), ir.FormatCount(g.Mismatched), g.MaxAbs, g.MaxRel)
	}
}
