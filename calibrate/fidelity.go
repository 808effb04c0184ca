// Package calibrate checks and fits fsdpc's cost model against measured
// training runs: a CSV in the format of the project's calibration set
// (published-runs.csv beside this file, copied from
// ../shared/calibration/; memory-runs.csv, cited peak-memory measurements
// kept apart to check the memory model), each row turned into a model
// file, planned, and simulated under a calibration. bench/fidelity prints
// the comparison; `fsdpc calibrate` fits the model's physical parameters
// to it.
package calibrate

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/schedule"
)

// Set is a calibration file: the runs fsdpc can express, planned, and the
// rows it cannot, with why.
type Set struct {
	Runs    []Planned
	Skipped []Unsupported
}

// Unsupported is a row fsdpc cannot express.
type Unsupported = unsupported

// Planned is one run and how to get its plan. A CSV row keeps only its
// model file and whether the planner placed it: its plan (about 1.8 MB
// for a row of the calibration set) is made again when a prediction needs
// it and held in a cache of bounded size (plancache.go), so a CSV of
// thousands of rows is fitted in bounded memory. Plan, when set, is a plan
// held for the run's life instead (a torchtitan log's one run).
type Planned struct {
	run
	Plan   *schedule.Plan
	src    string // the row's model file
	placed bool   // planned from src; false: predicted not to fit
}

// fits reports whether the planner placed the run.
func (p *Planned) fits() bool { return p.Plan != nil || p.placed }

// plan is the run's plan, nil when it does not fit.
func (p *Planned) plan() (*schedule.Plan, error) {
	if p.Plan != nil || !p.placed {
		return p.Plan, nil
	}
	return plans.get(p.id, p.src)
}

// ID is the row's row_id.
func (p *Planned) ID() string { return p.id }

// GPU is the run's GPU preset name.
func (p *Planned) GPU() string { return p.gpu }

// Load reads a calibration CSV and plans every run it can express.
// verbose, if set, receives each row's model file.
func Load(name string, r io.Reader, verbose io.Writer) (*Set, error) {
	runs, skipped, err := readRuns(name, r)
	if err != nil {
		return nil, err
	}
	set := &Set{Skipped: skipped}
	for _, x := range runs {
		src := modelFile(x)
		if verbose != nil {
			fmt.Fprintln(verbose, src)
		}
		p, err := planRow(x.id, src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if p != nil {
			plans.put(src, p)
		}
		set.Runs = append(set.Runs, Planned{run: x, src: src, placed: p != nil})
	}
	return set, nil
}

// Predict simulates every run under the calibration cal gives for its GPU
// (hardware.CalibrationFor when cal is nil).
func (s *Set) Predict(cal func(gpu string) hardware.Calibration) ([]Result, error) {
	out := make([]Result, 0, len(s.Runs))
	for i := range s.Runs {
		r, err := s.Runs[i].predict(cal)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Result is one row's prediction beside its measurement.
type Result struct {
	run
	fits     bool
	predTPS  float64 // predicted tokens/s per GPU
	predGiB  float64 // predicted peak of the metric the source measured: reserved or allocated
	stepTime float64
}

// modelFile writes the run as an fsdpc model file (Llama-family decoder,
// torchtitan module names).
func modelFile(r run) string {
	var b strings.Builder
	master, state := "fp32", ""
	if r.bf16Master {
		master, state = "bf16", "optimizer_state_bytes = 4\n" // AdamW's two moments in bf16
	}
	if r.accumulateUnsharded {
		state += "accumulate = \"unsharded\"\n"
	}
	if r.foreachOptimizer {
		state += "optimizer_implementation = \"foreach\"\n"
	}
	if r.maxGradNorm > 0 {
		state += fmt.Sprintf("max_grad_norm = %g\n", r.maxGradNorm)
	}
	// The row's ID and source are the CSV's text: a comment escaped, a
	// name a TOML string, so no line of the file comes from them.
	fmt.Fprintf(&b, "# %s (%s)\n[model]\nname = %s\ndtype = %q\n\n", safetext.TOMLComment(r.id), safetext.TOMLComment(r.source), safetext.TOML(r.id), master)
	ac := r.checkpointing
	interval := ""
	if r.checkpointInterval > 0 {
		interval = fmt.Sprintf("checkpoint_interval = %d\n", r.checkpointInterval)
	}
	fmt.Fprintf(&b, "[train]\nmicro_batch = %d\nseq_len = %d\ngrad_accum = %d\ncheckpointing = %q\n%soptimizer = \"adamw\"\n%scompile = %t\nattention_kernel = %q\nexpandable_segments = %t\n\n",
		r.microBatch, r.seq, r.accum, checkpointingName(ac), interval, state, r.compile, r.attentionKernel, r.expandable)
	gpu := fmt.Sprintf("%q", r.gpu)
	if r.hbm != "" || r.hbmBandwidth != "" {
		// The source's card has other memory than the preset's (the
		// 96 GB HBM2e H100 of Meta's Grand Teton).
		gpu = fmt.Sprintf("{ preset = %q", r.gpu)
		if r.hbm != "" {
			gpu += fmt.Sprintf(", hbm = %q", r.hbm)
		}
		if r.hbmBandwidth != "" {
			gpu += fmt.Sprintf(", hbm_bandwidth = %q", r.hbmBandwidth)
		}
		if r.hbmMemory != "" {
			gpu += fmt.Sprintf(", memory = %q", r.hbmMemory)
		}
		gpu += " }"
	}
	fmt.Fprintf(&b, "[cluster]\ngpu = %s\ngpus_per_node = %d\nworld_size = %d\n", gpu, r.gpusPerNode, r.world)
	if r.powerLimitW > 0 {
		fmt.Fprintf(&b, "power_limit_w = %d\n", r.powerLimitW)
	}
	if r.replicate > 1 {
		fmt.Fprintf(&b, "mesh = { replicate = %d, shard = %d }\n", r.replicate, r.shard)
	}
	if bw := networkPerGPU(r); bw > 0 {
		fmt.Fprintf(&b, "inter_node_bandwidth = \"%.4gGB/s\"\n", bw/1e9)
	}
	// The default budget: the card less the CUDA context and NCCL's
	// buffers. Whether the run fits is the question.
	b.WriteString("\n")
	rd := "fp32"
	if r.reduceBF16 {
		rd = "bf16"
	}
	fmt.Fprintf(&b, "[policy]\nunits = \"blocks\"\nparam_dtype = \"bf16\"\nreduce_dtype = %q\n\n", rd)
	fmt.Fprintf(&b, "[[module]]\nname = \"tok_embeddings\"\nkind = \"embedding\"\nnum = %d\ndim = %d\n\n", r.vocab, r.hidden)
	fmt.Fprintf(&b, "[[module]]\nname = \"layers\"\nrepeat = %d\nblock = \"decoder\"\n\n", r.layers)
	norm := ""
	if r.fusedNorm {
		norm = "fused = true\n"
	}
	fmt.Fprintf(&b, "[[module]]\nname = \"norm\"\nkind = \"norm\"\ndim = %d\n%s\n", r.hidden, norm)
	fmt.Fprintf(&b, "[[module]]\nname = \"output\"\nkind = \"linear\"\nin = %d\nout = %d\n\n", r.hidden, r.vocab)
	fmt.Fprintf(&b, "[[module]]\nname = \"loss\"\nkind = \"loss\"\nvocab = %d\nupcast = %t\ncompiled = %t\n\n", r.vocab, r.lossUpcast, r.compileLoss)
	fmt.Fprintf(&b, "[block.decoder]\n\n")
	fmt.Fprintf(&b, "[[block.decoder.module]]\nname = \"attention_norm\"\nkind = \"norm\"\ndim = %d\n%s\n", r.hidden, norm)
	rope := ""
	if r.rope != "" {
		rope = fmt.Sprintf("rope = %q\n", r.rope)
	}
	fmt.Fprintf(&b, "[[block.decoder.module]]\nname = \"attention\"\nkind = \"attention\"\ndim = %d\nheads = %d\nkv_heads = %d\n%s\n", r.hidden, r.heads, r.kvHeads, rope)
	fmt.Fprintf(&b, "[[block.decoder.module]]\nname = \"ffn_norm\"\nkind = \"norm\"\ndim = %d\n%s\n", r.hidden, norm)
	fmt.Fprintf(&b, "[[block.decoder.module]]\nname = \"feed_forward\"\nkind = \"mlp\"\ndim = %d\nhidden = %d\nactivation = %q\n", r.hidden, r.ffn, r.activation)
	return b.String()
}

// checkpointingName is the model format's name for the run's mode; the
// sources do not state selective-layer's interval, so it is torchtitan's
// default, 2.
func checkpointingName(ac string) string { return ac }

// networkPerGPU is the stated inter-node bandwidth per GPU, 0 when the
// source states none (the preset's default applies).
func networkPerGPU(r run) float64 {
	if r.nodeNetwork == 0 {
		return 0
	}
	if r.networkPerGPU {
		return r.nodeNetwork
	}
	return r.nodeNetwork / float64(r.gpusPerNode)
}

func (p *Planned) predict(cal func(gpu string) hardware.Calibration) (Result, error) {
	res := Result{run: p.run}
	plan, err := p.plan()
	if err != nil || plan == nil {
		return res, err
	}
	m := schedule.NewModel(plan)
	if cal != nil {
		// The calibration under test, with what the run's own plan sets
		// over it (its attention kernel's efficiencies).
		m.Cal = cal(p.gpu)
		if err := schedule.ApplyProfile(&m.Cal, plan.Cluster.Profile); err != nil {
			return res, fmt.Errorf("row %s: %w", p.id, err)
		}
	}
	sim, err := schedule.Simulate(plan, m)
	if err != nil {
		return res, fmt.Errorf("row %s: %w", p.id, err)
	}
	res.fits = true
	res.stepTime = sim.StepTime
	res.predTPS = float64(p.microBatch*p.accum*p.seq) / sim.StepTime
	peak := sim.PeakAllocated
	if p.memReserved {
		peak = sim.PeakReserved
	}
	res.predGiB = float64(peak) / (1 << 30)
	return res, nil
}

func pctErr(pred, meas float64) float64 { return (pred - meas) / meas * 100 }

// WriteTable prints the per-row comparison and the MAPE table.
func WriteTable(w io.Writer, results []Result, skipped []Unsupported) {
	fmt.Fprintln(w, "| row | GPU | GPUs | nodes | AC | compile | measured tok/s/GPU | predicted | error | measured GiB | predicted | error |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	type acc struct {
		sum float64
		n   int
	}
	tput, mem := map[string]*acc{}, map[string]*acc{}
	add := func(m map[string]*acc, keys []string, e float64) {
		for _, k := range keys {
			if m[k] == nil {
				m[k] = &acc{}
			}
			m[k].sum += math.Abs(e)
			m[k].n++
		}
	}
	oomMissed := 0
	for _, r := range results {
		nodes := (r.world + r.gpusPerNode - 1) / r.gpusPerNode
		scope := "single-node"
		if nodes > 1 {
			scope = "multi-node"
		}
		keys := []string{"all", r.gpu, scope}
		compile := "no"
		if r.compile {
			compile = "yes"
		}
		measT, predT, errT := "OOM", "", ""
		switch {
		case !r.oom && r.tokensPerGPU == 0:
			measT = "–"
		case !r.oom:
			measT = fmt.Sprintf("%.0f", r.tokensPerGPU)
		}
		switch {
		case !r.fits:
			predT = "does not fit"
		default:
			predT = fmt.Sprintf("%.0f", r.predTPS)
		}
		if r.oom && r.fits {
			oomMissed++
			errT = "fits (wrong)"
		}
		if r.oom && !r.fits {
			errT = "OOM (right)"
		}
		if !r.oom && r.fits && r.tokensPerGPU > 0 {
			e := pctErr(r.predTPS, r.tokensPerGPU)
			errT = fmt.Sprintf("%+.1f%%", e)
			add(tput, keys, e)
		}
		if !r.oom && !r.fits {
			errT = "OOM (wrong)"
			add(tput, keys, 100)
		}
		measM, predM, errM := "", "", ""
		if r.memGiB > 0 {
			kind := "alloc"
			if r.memReserved {
				kind = "reserved"
			}
			measM = fmt.Sprintf("%.1f %s", r.memGiB, kind)
			if r.fits {
				predM = fmt.Sprintf("%.1f", r.predGiB)
				e := pctErr(r.predGiB, r.memGiB)
				errM = fmt.Sprintf("%+.1f%%", e)
				add(mem, keys, e)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.id, r.gpu, r.world, nodes,
			r.checkpointing, compile, measT, predT, errT, measM, predM, errM)
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "| %s | not modelled: %s |||||||||||\n", s.ID, s.Why)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subset | throughput MAPE | rows | memory MAPE | rows |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	keys := []string{"all"}
	var rest []string
	for k := range tput {
		if k != "all" {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range append(keys, rest...) {
		t, m := tput[k], mem[k]
		ts, ms := "–", "–"
		tn, mn := 0, 0
		if t != nil && t.n > 0 {
			ts, tn = fmt.Sprintf("%.1f%%", t.sum/float64(t.n)), t.n
		}
		if m != nil && m.n > 0 {
			ms, mn = fmt.Sprintf("%.1f%%", m.sum/float64(m.n)), m.n
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %d |\n", k, ts, tn, ms, mn)
	}
	fmt.Fprintf(w, "\nOOM rows predicted to fit: %d; rows fsdpc cannot express: %d\n", oomMissed, len(skipped))
}
