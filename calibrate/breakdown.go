package calibrate

import (
	"fmt"
	"io"
	"math"
	"sort"
)

// Two views of the throughput residuals that a MAPE hides: whether one GPU
// (or eager against compiled runs on it) leans one way, and whether the
// gain from torch.compile is predicted on the runs that differ only in it.

// WriteBias prints, per GPU and compile, the mean signed throughput error
// and its range over the rows that trained and were predicted to fit.
func WriteBias(w io.Writer, results []Result) {
	type acc struct {
		sum, lo, hi float64
		n           int
	}
	groups := map[string]*acc{}
	for _, r := range results {
		if r.oom || !r.fits || r.tokensPerGPU == 0 {
			continue
		}
		k := r.gpu + " eager"
		if r.compile {
			k = r.gpu + " compile"
		}
		e := pctErr(r.predTPS, r.tokensPerGPU)
		a := groups[k]
		if a == nil {
			a = &acc{lo: math.Inf(1), hi: math.Inf(-1)}
			groups[k] = a
		}
		a.sum += e
		a.lo, a.hi = math.Min(a.lo, e), math.Max(a.hi, e)
		a.n++
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w, "| GPU, compile | rows | mean signed throughput error | lowest | highest |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, k := range keys {
		a := groups[k]
		fmt.Fprintf(w, "| %s | %d | %+.1f%% | %+.1f%% | %+.1f%% |\n", k, a.n, a.sum/float64(a.n), a.lo, a.hi)
	}
}

// CompilePair is two runs of one source that differ only in torch.compile:
// the measured and predicted throughput gain of the compiled one.
type CompilePair struct {
	Eager, Compiled     string
	GPU                 string
	Checkpointing       string
	Measured, Predicted float64 // compiled over eager tokens/s, − 1, in %
}

// CompilePairs finds the pairs among results: same source, model,
// cluster, batch, sequence and checkpointing, one compiled and one not,
// both trained and predicted to fit.
func CompilePairs(results []Result) []CompilePair {
	setting := func(r run) run {
		r.id, r.tier, r.compile, r.compileLoss = "", "", false, false
		r.tokensPerGPU, r.oom, r.memGiB, r.memReserved = 0, false, 0, false
		return r
	}
	ok := func(r Result) bool { return !r.oom && r.fits && r.tokensPerGPU > 0 }
	var out []CompilePair
	for _, c := range results {
		if !c.compile || !ok(c) {
			continue
		}
		for _, e := range results {
			if e.compile || !ok(e) || setting(e.run) != setting(c.run) {
				continue
			}
			out = append(out, CompilePair{Eager: e.id, Compiled: c.id, GPU: c.gpu, Checkpointing: c.checkpointing,
				Measured:  (c.tokensPerGPU/e.tokensPerGPU - 1) * 100,
				Predicted: (c.predTPS/e.predTPS - 1) * 100})
		}
	}
	return out
}

// WriteCompilePairs prints CompilePairs' table; nothing when there is no
// pair.
func WriteCompilePairs(w io.Writer, pairs []CompilePair) {
	if len(pairs) == 0 {
		return
	}
	fmt.Fprintln(w, "| eager row | compiled row | GPU | AC | measured gain | predicted gain | predicted − measured |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | ---: | ---: | ---: |")
	for _, p := range pairs {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %+.1f%% | %+.1f%% | %+.1f |\n", p.Eager, p.Compiled, p.GPU, p.Checkpointing,
			p.Measured, p.Predicted, p.Predicted-p.Measured)
	}
}
