package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// Gates for CI: `--fail-if 'step>+5%' --fail-if 'reserved>70GiB'` on
// plan, sim and diff. A gate is METRIC OP VALUE: a metric of metrics (by
// its JSON name), one of > >= < <=, and a value that is either a change
// relative to the old plan (a signed percentage, +5% or -10%: diff only)
// or an absolute value in the metric's unit (900ms, 70GiB, 35%, 5000).
// The gate fails when the comparison holds. docs/json.md documents the
// names, the units and the exit codes.

// exitGateFailed is the exit status when a gate fails (0 all pass, 1 an
// error, 2 bad usage, a bad gate included; diff's 1 means "different").
const exitGateFailed = 3

// unit is how a metric's values are written.
type unit uint8

const (
	unitSeconds  unit = iota // 900ms, 1.2s, 2h
	unitBytes                // 70GiB, 80GB
	unitFraction             // 35% or 0.35
	unitCount                // 5000, 2.5K, 1M, 3G, 2T
)

// metricDef is one metric a gate can test.
type metricDef struct {
	name string
	unit unit
	get  func(m *metrics) (v float64, known bool)
}

func known(v float64) (float64, bool) { return v, true }

func optional(v *float64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return *v, true
}

// gateMetrics are the metrics gates test, in docs/json.md's order.
var gateMetrics = []metricDef{
	{"step", unitSeconds, func(m *metrics) (float64, bool) { return known(m.Step) }},
	{"compute", unitSeconds, func(m *metrics) (float64, bool) { return known(m.Compute) }},
	{"overlap_slowdown", unitSeconds, func(m *metrics) (float64, bool) { return known(m.OverlapSlowdown) }},
	{"optimizer", unitSeconds, func(m *metrics) (float64, bool) { return known(m.Optimizer) }},
	{"fsdp_kernels", unitSeconds, func(m *metrics) (float64, bool) { return known(m.FSDPKernels) }},
	{"exposed_communication", unitSeconds, func(m *metrics) (float64, bool) { return known(m.ExposedCommunication) }},
	{"waiting_for_cpu", unitSeconds, func(m *metrics) (float64, bool) { return known(m.WaitingForCPU) }},
	{"tail", unitSeconds, func(m *metrics) (float64, bool) { return known(m.Tail) }},
	{"compute_alone", unitSeconds, func(m *metrics) (float64, bool) { return known(m.ComputeAlone) }},
	{"cpu_issue", unitSeconds, func(m *metrics) (float64, bool) { return known(m.CPUIssue) }},
	{"allocated", unitBytes, func(m *metrics) (float64, bool) { return known(float64(m.Allocated)) }},
	{"reserved", unitBytes, func(m *metrics) (float64, bool) { return known(float64(m.Reserved)) }},
	{"tokens_per_second_per_gpu", unitCount, func(m *metrics) (float64, bool) { return known(m.TokensPerSecondGPU) }},
	{"model_flops_per_second_per_gpu", unitCount, func(m *metrics) (float64, bool) { return optional(m.ModelFLOPSPerGPU) }},
	{"hardware_flops_per_second_per_gpu", unitCount, func(m *metrics) (float64, bool) { return known(m.HardwareFLOPSGPU) }},
	{"mfu", unitFraction, func(m *metrics) (float64, bool) { return optional(m.MFU) }},
	{"hfu", unitFraction, func(m *metrics) (float64, bool) { return known(m.HFU) }},
}

// titanAliases are the names torchtitan's step lines give metrics
// (calibrate/log.go: "memory: 41.49GiB(51.14%)  tps: 6,100  tflops: 96.17
// mfu: 9.72%"; memory is max_memory_reserved), so a gate reads as the
// training log does: --fail-if 'tps<6000' --fail-if 'memory>70GiB'. An
// absolute value is in the log's unit: tflops in TFLOP/s.
var titanAliases = map[string]struct {
	name  string
	scale float64
}{
	"tps":    {"tokens_per_second_per_gpu", 1},
	"memory": {"reserved", 1},
	"tflops": {"model_flops_per_second_per_gpu", 1e12},
}

func lookupMetric(name string) (metricDef, bool) {
	if a, ok := titanAliases[name]; ok {
		name = a.name
	}
	for _, d := range gateMetrics {
		if d.name == name {
			return d, true
		}
	}
	return metricDef{}, false
}

func metricNames() string {
	var names []string
	for _, d := range gateMetrics {
		names = append(names, d.name)
	}
	return strings.Join(names, ", ") + "; torchtitan's tps, memory, tflops, mfu"
}

// allMetricNames are every name a gate accepts, for suggestions.
func allMetricNames() []string {
	var names []string
	for _, d := range gateMetrics {
		names = append(names, d.name)
	}
	for a := range titanAliases {
		names = append(names, a)
	}
	slices.Sort(names)
	return names
}

// gate is one parsed --fail-if expression.
type gate struct {
	expr      string
	metric    metricDef
	op        string
	threshold float64 // the absolute value, or the relative change as a fraction
	relative  bool
}

// gateList is the repeatable --fail-if flag.
type gateList []string

func (g *gateList) String() string     { return strings.Join(*g, ", ") }
func (g *gateList) Set(s string) error { *g = append(*g, s); return nil }

// parseGates parses every expression; relativeOK says whether there is an
// old plan to compare with (diff).
func parseGates(exprs []string, relativeOK bool) ([]gate, error) {
	var out []gate
	for _, e := range exprs {
		g, err := parseGate(e, relativeOK)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// parseGate parses METRIC OP VALUE.
func parseGate(expr string, relativeOK bool) (gate, error) {
	g := gate{expr: expr}
	bad := func(format string, a ...any) (gate, error) {
		return gate{}, fmt.Errorf("--fail-if %q: %s", expr, fmt.Sprintf(format, a...))
	}
	s := strings.TrimSpace(expr)
	i := strings.IndexAny(s, "<>")
	if i < 0 {
		return bad("no comparison; write METRIC>VALUE or METRIC<VALUE, e.g. 'step>+5%%' or 'reserved>70GiB'")
	}
	name := strings.TrimSpace(s[:i])
	g.op = s[i : i+1]
	rest := s[i+1:]
	if strings.HasPrefix(rest, "=") {
		g.op += "="
		rest = rest[1:]
	}
	if strings.ContainsAny(rest, "<>=") {
		return bad("one comparison per gate (give --fail-if once for each)")
	}
	if name == "" {
		return bad("no metric before %q (metrics: %s)", g.op, metricNames())
	}
	d, ok := lookupMetric(name)
	if !ok {
		if s := ir.Suggest(name, allMetricNames()); s != "" {
			return bad("no metric %q; did you mean %q? (metrics: %s)", name, s, metricNames())
		}
		return bad("no metric %q (metrics: %s)", name, metricNames())
	}
	g.metric = d
	value := strings.TrimSpace(rest)
	if value == "" {
		return bad("no value after %q", g.op)
	}
	if (value[0] == '+' || value[0] == '-') && strings.HasSuffix(value, "%") {
		if !relativeOK {
			return bad("%q is a change relative to an old plan: use it with fsdpc diff OLD NEW, or give an absolute value", value)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value[:len(value)-1]), 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return bad("%q is not a percentage", value)
		}
		g.threshold, g.relative = v/100, true
		return g, nil
	}
	v, err := parseMetricValue(d.unit, value)
	if err != nil {
		return bad("%s: %v", name, err)
	}
	g.threshold = v
	if a, ok := titanAliases[name]; ok {
		g.threshold *= a.scale
	}
	if math.IsInf(g.threshold, 0) { // 1e300T, 1e308h: a finite number times its unit
		return bad("%s: %q is out of range", name, value)
	}
	return g, nil
}

// parseMetricValue reads an absolute value in a metric's unit.
func parseMetricValue(u unit, s string) (float64, error) {
	switch u {
	case unitSeconds:
		return parseSeconds(s)
	case unitBytes:
		b, err := ir.ParseBytes(s)
		if err != nil {
			return 0, err
		}
		if b < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return float64(b), nil
	case unitFraction:
		t := strings.TrimSpace(s)
		scale := 1.0
		if strings.HasSuffix(t, "%") {
			t, scale = strings.TrimSpace(t[:len(t)-1]), 0.01
		} else if strings.HasPrefix(t, "+") {
			return 0, fmt.Errorf("%q: a relative change is a signed percentage such as +5%%", s)
		}
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || v < 0 {
			return 0, fmt.Errorf("%q is not a fraction; write 35%% or 0.35", s)
		}
		return v * scale, nil
	}
	if strings.HasSuffix(s, "%") {
		return 0, fmt.Errorf("%q: a percentage of what? A relative change is signed (+5%%, -5%%)", s)
	}
	num, suffix := splitCount(strings.TrimSpace(s))
	mult, ok := tokenSuffixes[suffix]
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || math.IsInf(v, 0) || math.IsNaN(v) || v < 0 {
		return 0, fmt.Errorf("%q is not a count; write 5000, 2.5K, 1M, 3G or 2T", s)
	}
	return v * mult, nil
}

// secondsUnits are the time units a gate may use.
var secondsUnits = map[string]float64{"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600}

// parseSeconds reads a time with its unit: 900ms, 1.2s, 2h.
func parseSeconds(s string) (float64, error) {
	t := strings.TrimSpace(s)
	end := 0
	for end < len(t) && (t[end] >= '0' && t[end] <= '9' || t[end] == '.' || t[end] == 'e' && end > 0 && end+1 < len(t) && (t[end+1] >= '0' && t[end+1] <= '9' || t[end+1] == '-')) {
		end++
	}
	v, err := strconv.ParseFloat(t[:end], 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a time; write 900ms, 1.2s or 2h (a relative change is signed: +5%%)", s)
	}
	mult, ok := secondsUnits[strings.TrimSpace(t[end:])]
	if !ok {
		return 0, fmt.Errorf("%q: give a time unit (ns, us, ms, s, min, h), e.g. 900ms (a relative change is signed: +5%%)", s)
	}
	return v * mult, nil
}

// gateResult is a gate's outcome, as the JSON reports it.
type gateResult struct {
	Expr      string   `json:"expr"`
	Metric    string   `json:"metric"`
	Op        string   `json:"op"`
	Relative  bool     `json:"relative"`
	Threshold float64  `json:"threshold"`
	Value     float64  `json:"value"`
	Old       *float64 `json:"old,omitempty"`
	Change    *float64 `json:"relative_change,omitempty"`
	Failed    bool     `json:"failed"`
}

// evalGates tests every gate on the new plan's metrics (and against the
// old one's for relative gates; old is nil without an old plan). A metric
// that is not known, or a relative change from zero, is an error.
func evalGates(gates []gate, old, new *metrics) ([]gateResult, error) {
	var out []gateResult
	for _, g := range gates {
		v, ok := g.metric.get(new)
		if !ok {
			return nil, fmt.Errorf("--fail-if %q: %s is not known: %s", g.expr, g.metric.name, mfuUnknown)
		}
		r := gateResult{Expr: g.expr, Metric: g.metric.name, Op: g.op, Relative: g.relative, Threshold: g.threshold, Value: v}
		x := v
		if g.relative {
			o, ok := g.metric.get(old)
			if !ok {
				return nil, fmt.Errorf("--fail-if %q: the old plan's %s is not known: %s", g.expr, g.metric.name, mfuUnknown)
			}
			if o == 0 {
				return nil, fmt.Errorf("--fail-if %q: the old plan's %s is 0, so a relative change means nothing; give an absolute value", g.expr, g.metric.name)
			}
			x = (v - o) / o
			r.Old, r.Change = &o, &x
		}
		switch g.op {
		case ">":
			r.Failed = x > g.threshold
		case ">=":
			r.Failed = x >= g.threshold
		case "<":
			r.Failed = x < g.threshold
		case "<=":
			r.Failed = x <= g.threshold
		}
		out = append(out, r)
	}
	return out, nil
}

// anyFailed reports whether a gate failed.
func anyFailed(rs []gateResult) bool {
	for _, r := range rs {
		if r.Failed {
			return true
		}
	}
	return false
}

// printGates says how each gate came out.
func printGates(w io.Writer, rs []gateResult) {
	for _, r := range rs {
		verdict := "passed"
		if r.Failed {
			verdict = "FAILED"
		}
		d, _ := lookupMetric(r.Metric)
		what := fmt.Sprintf("%s %s", r.Metric, formatMetric(d.unit, r.Value))
		if r.Relative {
			what = fmt.Sprintf("%s %s → %s (%+.1f%%)", r.Metric, formatMetric(d.unit, *r.Old), formatMetric(d.unit, r.Value), 100**r.Change)
		}
		fmt.Fprintf(w, "gate %s: %s: %s\n", r.Expr, verdict, what)
	}
}

func formatMetric(u unit, v float64) string {
	switch u {
	case unitSeconds:
		return seconds(v)
	case unitBytes:
		return ir.FormatBytes(int64(v))
	case unitFraction:
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
