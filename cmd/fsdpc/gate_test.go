package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseGate(t *testing.T) {
	for _, c := range []struct {
		expr      string
		diff      bool
		metric    string
		op        string
		threshold float64
		relative  bool
		err       string
	}{
		{expr: "step>+5%", diff: true, metric: "step", op: ">", threshold: 0.05, relative: true},
		{expr: " step >= -2.5% ", diff: true, metric: "step", op: ">=", threshold: -0.025, relative: true},
		{expr: "reserved>70GiB", metric: "reserved", op: ">", threshold: 70 << 30},
		{expr: "allocated<=80GB", metric: "allocated", op: "<=", threshold: 80e9},
		{expr: "step>900ms", metric: "step", op: ">", threshold: 0.9},
		{expr: "step<1.5s", metric: "step", op: "<", threshold: 1.5},
		{expr: "exposed_communication>250us", metric: "exposed_communication", op: ">", threshold: 250e-6},
		{expr: "tail>2h", metric: "tail", op: ">", threshold: 7200},
		{expr: "mfu<35%", metric: "mfu", op: "<", threshold: 0.35},
		{expr: "hfu<0.4", metric: "hfu", op: "<", threshold: 0.4},
		{expr: "tokens_per_second_per_gpu<5K", metric: "tokens_per_second_per_gpu", op: "<", threshold: 5000},
		{expr: "mfu<-1%", diff: true, metric: "mfu", op: "<", threshold: -0.01, relative: true},
		// torchtitan's log names.
		{expr: "tps<6000", metric: "tokens_per_second_per_gpu", op: "<", threshold: 6000},
		{expr: "memory>70GiB", metric: "reserved", op: ">", threshold: 70 << 30},
		{expr: "tflops<300", metric: "model_flops_per_second_per_gpu", op: "<", threshold: 300e12},
		{expr: "tps<-5%", diff: true, metric: "tokens_per_second_per_gpu", op: "<", threshold: -0.05, relative: true},
		{expr: "reserverd>70GiB", err: `no metric "reserverd"; did you mean "reserved"?`},

		{expr: "step>+5%", err: "use it with fsdpc diff"},
		{expr: "step>5%", diff: true, err: "give a time unit"},
		{expr: "step>900", err: "give a time unit"},
		{expr: "step", err: "no comparison"},
		{expr: "step=1s", err: "no comparison"},
		{expr: "step>>1s", err: "one comparison per gate"},
		{expr: "step>1s<2s", err: "one comparison per gate"},
		{expr: ">1s", err: "no metric before"},
		{expr: "speed>1s", err: `no metric "speed" (metrics: step, `},
		{expr: "step>", err: "no value after"},
		{expr: "reserved>70GB/s", err: "not a size"},
		{expr: "reserved>lots", err: "does not start with a number"},
		{expr: "mfu<35x", err: "not a fraction"},
		{expr: "mfu<+35", err: "signed percentage"},
		{expr: "tokens_per_second_per_gpu<5%", err: "a percentage of what"},
		{expr: "tokens_per_second_per_gpu<5Q", err: "not a count"},
		{expr: "step>+x%", diff: true, err: "is not a percentage"},
		// A finite number times its unit past float64: +Inf, which -json
		// cannot write.
		{expr: "tps>1e300T", err: `"1e300T" is out of range`},
		{expr: "step<1e308h", err: `"1e308h" is out of range`},
		{expr: "tflops>1e300", err: `"1e300" is out of range`},
	} {
		g, err := parseGate(c.expr, c.diff)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseGate(%q) = %+v, %v; want an error with %q", c.expr, g, err, c.err)
			} else if !strings.Contains(err.Error(), c.expr) {
				t.Errorf("parseGate(%q): the error does not quote the expression: %v", c.expr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseGate(%q): %v", c.expr, err)
			continue
		}
		if g.metric.name != c.metric || g.op != c.op || g.relative != c.relative || !near(g.threshold, c.threshold) {
			t.Errorf("parseGate(%q) = %s %s %g (relative %v), want %s %s %g (relative %v)",
				c.expr, g.metric.name, g.op, g.threshold, g.relative, c.metric, c.op, c.threshold, c.relative)
		}
	}
}

func near(a, b float64) bool { return a == b || a != 0 && (a-b)/a < 1e-12 && (b-a)/a < 1e-12 }

// TestGateMetricsInJSON: every metric a gate names is a key of the
// metrics object, so a gate and a script reading the JSON agree.
func TestGateMetricsInJSON(t *testing.T) {
	doc := map[string]any{}
	code, out, _ := runCLI("sim", "gpt2-124m", "-json")
	if code != 0 || jsonUnmarshal(out, &doc) != nil {
		t.Fatalf("sim -json: exit %d", code)
	}
	m := doc["metrics"].(map[string]any)
	for _, d := range gateMetrics {
		if _, ok := m[d.name]; !ok {
			t.Errorf("gate metric %q is not in the JSON's metrics", d.name)
		}
	}
}

func TestEvalGates(t *testing.T) {
	mfu := 0.4
	old := metrics{Step: 1.0, Reserved: 60 << 30, MFU: &mfu}
	new := metrics{Step: 1.06, Reserved: 71 << 30}
	for _, c := range []struct {
		expr   string
		failed bool
		err    string
	}{
		{"step>+5%", true, ""},
		{"step>+10%", false, ""},
		{"step>=+7%", false, ""},
		{"step<-1%", false, ""},
		{"reserved>70GiB", true, ""},
		{"reserved>=71GiB", true, ""},
		{"reserved>71GiB", false, ""},
		{"step<1.1s", true, ""},
		{"mfu<30%", false, "mfu is not known"},
	} {
		gates, err := parseGates([]string{c.expr}, true)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := evalGates(gates, &old, &new)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.expr, err, c.err)
			}
			continue
		}
		if err != nil || len(rs) != 1 || rs[0].Failed != c.failed {
			t.Errorf("%s: %+v, %v; want failed = %v", c.expr, rs, err, c.failed)
		}
	}
	zero := metrics{}
	gates, _ := parseGates([]string{"tail>+5%"}, true)
	if _, err := evalGates(gates, &zero, &new); err == nil || !strings.Contains(err.Error(), "is 0") {
		t.Errorf("a relative change from 0: %v", err)
	}
}

// TestGateExitCodes: 3 when a gate fails, 0 when all pass, 2 for a bad
// gate, on plan, sim and diff; diff with gates no longer exits 1 for
// "different".
func TestGateExitCodes(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "p.bin")
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"plan", "gpt2-124m", "-o", bin, "-fail-if", "reserved>1GiB"}, 3, "gate reserved>1GiB: FAILED: reserved"},
		{[]string{"plan", "gpt2-124m", "-o", bin, "-fail-if", "reserved>70GiB", "-fail-if", "mfu<1%"}, 0, "gate mfu<1%: passed: mfu"},
		{[]string{"plan", "gpt2-124m", "-o", bin, "-fail-if", "step>+5%"}, 2, ""},
		{[]string{"plan", "gpt2-124m", "-o", bin, "-d", "emit", "-json"}, 2, ""},
		{[]string{"sim", bin, "-fail-if", "step>1ms"}, 3, "gate step>1ms: FAILED"},
		{[]string{"sim", bin, "-fail-if", "step>1h"}, 0, "gate step>1h: passed"},
		{[]string{"sim", bin, "-fail-if", "step"}, 2, ""},
		{[]string{"diff", "gpt2-124m", "llama3-8b", "-fail-if", "step>+5%"}, 3, "gate step>+5%: FAILED: step "},
		{[]string{"diff", "gpt2-124m", "llama3-8b", "-fail-if", "step>+500%"}, 0, "passed"},
		{[]string{"diff", "gpt2-124m", "llama3-8b"}, 1, ""},
		{[]string{"diff", "gpt2-124m", "gpt2-124m", "-fail-if", "reserved>1MiB"}, 3, ""},
		{[]string{"diff", "gpt2-124m", "llama3-8b", "-fail-if", "step>+5"}, 2, ""},
		{[]string{"diff", "-quiet", "gpt2-124m", "llama3-8b", "-fail-if", "step>+5%"}, 3, ""},
		{[]string{"sim", bin, "-fail-if", "tps<1", "-fail-if", "memory>70GiB", "-fail-if", "tflops>2000"}, 0, "gate memory>70GiB: passed: reserved"},
		{[]string{"sim", bin, "-fail-if", "tps>1"}, 3, "gate tps>1: FAILED: tokens_per_second_per_gpu"},
		// terraform's -detailed-exitcode: 0 same, 1 error, 2 different.
		{[]string{"diff", "-detailed-exitcode", "gpt2-124m", "gpt2-124m"}, 0, ""},
		{[]string{"diff", "-detailed-exitcode", "gpt2-124m", "llama3-8b"}, 2, "fsdpc diff gpt2-124m"},
		{[]string{"diff", "gpt2-124m", "no-such-model", "--detailed-exitcode"}, 1, ""},
		{[]string{"diff", "-detailed-exitcode=false", "gpt2-124m", "llama3-8b"}, 1, ""},
		{[]string{"diff", "-detailed-exitcode", "gpt2-124m", "llama3-8b", "-fail-if", "step>+500%"}, 2, "passed"},
		{[]string{"diff", "-detailed-exitcode", "gpt2-124m", "llama3-8b", "-fail-if", "step>+5%"}, 3, "FAILED"},
		{[]string{"diff", "-detailed-exitcode", "gpt2-124m", "gpt2-124m", "-fail-if", "step>+5%"}, 0, "passed"},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != c.code || !strings.Contains(out, c.out) {
			t.Errorf("%s: exit %d (want %d)\n%s%s", strings.Join(c.args, " "), code, c.code, out, errOut)
		}
		if c.code == 2 && c.args[0] != "diff" && !strings.Contains(errOut, "-fail-if") && !strings.Contains(errOut, "-d") {
			t.Errorf("%s: the error does not name the flag: %q", strings.Join(c.args, " "), errOut)
		}
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
