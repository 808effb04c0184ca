package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fsdpc/fsdpc/internal/forge"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir/accelerate"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// fuzzModel is a small model whose plan has every string field forge
// needs (two groups with parameters, buffers, events, warnings), so one
// execution of FuzzPlanStrings runs every renderer in milliseconds.
const fuzzModel = `[model]
dtype = "fp32"
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = 2
[policy]
units = ["layers.*", "emb", "output"]
[[module]]
name = "emb"
kind = "embedding"
num = 33
dim = 8
[[module]]
name = "layers"
repeat = 2
block = "b"
[[module]]
name = "output"
kind = "linear"
in = 8
out = 33
[[block.b.module]]
name = "ffn"
kind = "mlp"
dim = 8
hidden = 12
`

// opensMarkup matches a "<" that an HTML tokenizer takes as the start of
// a tag, an end tag, a comment or declaration, or a processing
// instruction.
var opensMarkup = regexp.MustCompile(`<[A-Za-z/!?]`)

// detailsTags are the HTML the Markdown renderers write themselves.
var detailsTags = regexp.MustCompile(`</?details>|<summary>[^<]*</summary>`)

var fuzzBase struct {
	once       sync.Once
	dir, model string
	bin        string
	plan       *schedule.Plan
	titanKeys  string
	accelKeys  string
	launch     map[string]string // engine: the honest launch file's statements
	err        error
}

// FuzzPlanStrings puts an arbitrary string in one string field of a
// checksum-valid plan (internal/forge) and runs every command that
// renders a plan, in every format: show (text, -full, -json), textconv,
// sim (text, -json, -trace), verify, diff (text, markdown, json),
// checkpoint (text, -json), reshard (text, markdown, json), report,
// export, emit torch --torchtitan, emit accelerate, emit launch for every
// engine, and run --checkpoint with checkpoint verify of what it saved. A
// string the reader refuses is refused by every one, naming the plan,
// with nothing written; one it accepts comes out as data: terminal output
// is printable lines, JSON parses (show -json holding the string as it
// is), the torchtitan fragment and accelerate config have the honest
// plan's keys, the module's header is one line, each launch file has the
// honest plan's statements, the report's HTML holds no raw '<' from it,
// the Markdown no heading or raw HTML from it, and a checkpoint's
// metadata holds the plan's model and optimizer as they are and loads
// back under the plan.
//
//	go test -run '^$' -fuzz FuzzPlanStrings -fuzztime 2m ./cmd/fsdpc
func FuzzPlanStrings(f *testing.F) {
	for i, h := range forge.Hostile {
		f.Add(uint8(i), h.S)
	}
	fields := forge.StringFields()
	var printable []string
	for _, h := range forge.Hostile {
		if h.Printable {
			printable = append(printable, h.S)
		}
	}
	for i, fd := range fields { // markup and quotes where labels go, which readers accept
		if fd.Label {
			f.Add(uint8(i), printable[i%len(printable)])
		}
	}
	f.Fuzz(func(t *testing.T, field uint8, s string) {
		b := &fuzzBase
		b.once.Do(func() {
			b.dir, b.err = os.MkdirTemp("", "fsdpc-fuzz")
			if b.err != nil {
				return
			}
			b.model, b.bin = filepath.Join(b.dir, "m.toml"), filepath.Join(b.dir, "base.bin")
			os.WriteFile(b.model, []byte(fuzzModel), 0o644)
			if code, _, errOut := runCLI("plan", "-o", b.bin, b.model); code != 0 {
				t.Fatal(errOut)
			}
			b.plan, b.err = schedule.ReadFile(b.bin)
			out := filepath.Join(b.dir, "honest")
			os.Mkdir(out, 0o755)
			runCLI("emit", "torch", "--model", b.model, b.bin, "--torchtitan", filepath.Join(out, "a.toml"), "-o", filepath.Join(out, "a.py"))
			b.titanKeys = titanKeys(t, out)
			runCLI("emit", "accelerate", b.bin, "--model", b.model, "-o", filepath.Join(out, "a.yaml"))
			b.accelKeys = accelKeys(t, out)
			b.launch = map[string]string{}
			for _, e := range torchgen.Engines {
				if code, _, errOut := runCLI(launchArgs(e, b.bin, out)...); code != 0 {
					t.Fatal(errOut)
				}
				b.launch[e] = launchStatements(t, out, e)
			}
		})
		if b.err != nil {
			t.Fatal(b.err)
		}
		fd := fields[int(field)%len(fields)]
		forged, err := forge.Bytes(b.plan, fd, s)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		plan, out := filepath.Join(dir, "p.bin"), filepath.Join(dir, "out")
		os.WriteFile(plan, forged, 0o644)
		os.Mkdir(out, 0o755)
		decoded, decodeErr := schedule.Decode(forged)
		ckpt := filepath.Join(out, "ckpt")
		commands := [][]string{
			{"show", plan}, {"show", "-full", plan}, {"show", "-json", plan}, {"textconv", plan},
			{"sim", plan}, {"sim", "-json", plan}, {"sim", "-trace", filepath.Join(out, "t.json"), plan}, {"verify", plan},
			{"diff", b.bin, plan}, {"diff", "-format", "markdown", b.bin, plan}, {"diff", "-format", "json", b.bin, plan},
			{"checkpoint", plan}, {"checkpoint", "-json", plan},
			{"reshard", plan, b.bin}, {"reshard", "-reads", "-format", "markdown", b.bin, plan}, {"reshard", "-format", "json", plan, b.bin},
			{"report", "-o", filepath.Join(out, "r.html"), plan},
			{"export", "--model", b.model, "-o", filepath.Join(out, "p.json"), plan},
			{"emit", "torch", "--model", b.model, plan, "-o", filepath.Join(out, "a.py"), "--torchtitan", filepath.Join(out, "a.toml")},
			{"emit", "accelerate", plan, "--model", b.model, "-o", filepath.Join(out, "a.yaml")},
		}
		for _, e := range torchgen.Engines {
			commands = append(commands, launchArgs(e, plan, out))
		}
		commands = append(commands, []string{"run", "--steps", "1", "--checkpoint", ckpt, plan})
		ran := false
		for _, args := range commands {
			code, stdout, stderr := runCLI(args...)
			if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "panic") {
				t.Fatalf("%s %q = %q: %q: %s", fd.Name, s, args, stderr, stdout)
			}
			checkTerminal(t, args[0], stdout+stderr, false)
			if decodeErr != nil {
				if code == 0 || !strings.Contains(stderr, plan) {
					t.Fatalf("%s %q: %q accepts a plan decode refuses (%v), or its error does not name it: %s", fd.Name, s, args, decodeErr, stderr)
				}
				continue
			}
			if args[0] == "run" {
				ran = code == 0
			}
			if slices.Contains(args, "-json") || slices.Contains(args, "json") {
				if (code == 0 || code == 1 && args[0] == "diff") && !json.Valid([]byte(stdout)) {
					t.Fatalf("%s %q: %q writes JSON that does not parse:\n%s", fd.Name, s, args, stdout)
				}
			}
			if args[0] == "show" && args[1] == "-json" && s != "" && !holdsString(stdout, s) {
				t.Fatalf("%s %q: show -json does not hold the plan's string as it is:\n%s", fd.Name, s, stdout)
			}
			if slices.Contains(args, "markdown") {
				fenced := false // a fenced code block shows its lines literally
				for i, line := range strings.Split(stdout, "\n") {
					if strings.HasPrefix(line, "```") {
						fenced = !fenced
					}
					if fenced {
						continue
					}
					l := detailsTags.ReplaceAllString(line, "")
					if i > 0 && strings.HasPrefix(l, "#") || strings.Contains(strings.ReplaceAll(l, `\<`, ""), "<") {
						t.Fatalf("%s %q: markdown line %q", fd.Name, s, line)
					}
				}
			}
		}
		if decodeErr != nil {
			if files, _ := os.ReadDir(out); len(files) > 0 {
				t.Fatalf("%s %q: refused, but %s was written", fd.Name, s, files[0].Name())
			}
			return
		}
		// Only a "<" that opens markup (a tag name, "</", "<!", "<?") is
		// markup: a lone "<" is text to an HTML parser, and every page
		// holds one, so the check is for strings that could open a tag.
		if html, err := os.ReadFile(filepath.Join(out, "r.html")); err == nil && opensMarkup.MatchString(s) && strings.Contains(string(html), s) {
			t.Fatalf("%s %q: the report holds it raw", fd.Name, s)
		}
		for _, name := range []string{"p.json", "t.json"} {
			if js, err := os.ReadFile(filepath.Join(out, name)); err == nil && !json.Valid(js) {
				t.Fatalf("%s %q: %s (export, trace) does not parse:\n%s", fd.Name, s, name, js)
			}
		}
		if got := titanKeys(t, out); got != "" && got != b.titanKeys {
			t.Fatalf("%s %q: torchtitan keys %s, want %s", fd.Name, s, got, b.titanKeys)
		}
		if got := accelKeys(t, out); got != "" && got != b.accelKeys {
			t.Fatalf("%s %q: accelerate config keys\n%s\nwant\n%s", fd.Name, s, got, b.accelKeys)
		}
		if py, err := os.ReadFile(filepath.Join(out, "a.py")); err == nil && !strings.HasPrefix(string(py), "# Generated by fsdpc emit torch from ") {
			t.Fatalf("%s %q: the module starts %.80q", fd.Name, s, py)
		}
		for _, e := range torchgen.Engines {
			if got := launchStatements(t, out, e); got != "" && got != b.launch[e] {
				t.Fatalf("%s %q: the %s launch file's statements are\n%s\nwant\n%s", fd.Name, s, e, got, b.launch[e])
			}
		}
		if name := torchgen.DefaultJobName(decoded); !jobName.MatchString(name) {
			t.Fatalf("%s %q: default job name %q is not an RFC 1035 label", fd.Name, s, name)
		}
		if ran {
			checkSaved(t, fd.Name+" "+strconv.Quote(s), decoded, plan, ckpt)
		}
	})
}

// holdsString reports whether the JSON text js has a string (a key or a
// value) that contains s: a string the plan holds comes out of show -json
// as it is, escaped only as JSON escapes it.
func holdsString(js, s string) bool {
	var v any
	if json.Unmarshal([]byte(js), &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case string:
			return strings.Contains(x, s)
		case []any:
			return slices.ContainsFunc(x, walk)
		case map[string]any:
			for k, e := range x {
				if strings.Contains(k, s) || walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// jobName is an RFC 1035 label, what Kubernetes and Slurm take as a name.
var jobName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// launchArgs is emit launch for engine with fixed job arguments, so that
// two plans' launch files differ only by what the plans say.
func launchArgs(engine, plan, out string) []string {
	return []string{"emit", "launch", "--engine", engine, plan, "--script", "train.py", "--plan-json", "plan.json",
		"--name", "fsdpc-job", "--image", "img", "-o", filepath.Join(out, "launch."+engine)}
}

// sha256Hex is a plan's SHA-256 in a launch file, which differs from one
// plan to another.
var sha256Hex = regexp.MustCompile(`[0-9a-f]{64}`)

// launchStatements is the launch file emit launch wrote in out for the
// engine without its header comment (#SBATCH options kept) and with the
// plan's SHA-256 masked, "" when it wrote none. Only the header is
// dropped: past the first statement a comment in one engine's syntax may
// be data in another's (a YAML block, a Python string).
func launchStatements(t *testing.T, out, engine string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(out, "launch."+engine))
	if err != nil {
		return ""
	}
	lines := strings.Split(string(src), "\n")
	var kept []string
	for i, l := range lines {
		if !strings.HasPrefix(l, "#") {
			kept = append(kept, lines[i:]...)
			break
		}
		if strings.HasPrefix(l, "#SBATCH") { // Slurm's options
			kept = append(kept, l)
		}
	}
	return sha256Hex.ReplaceAllString(strings.Join(kept, "\n"), "SHA")
}

// checkSaved: the checkpoint fsdpc run saved under plan holds the plan's
// model and optimizer as they are (JSON-escaped, not changed), and fsdpc
// checkpoint verify (with flags, the run's --scale) loads it back under
// the plan.
func checkSaved(t *testing.T, what string, p *schedule.Plan, plan, ckpt string, flags ...string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(ckpt, "step-1", "metadata.json"))
	if err != nil {
		t.Fatalf("%s: run saved no checkpoint: %v", what, err)
	}
	var meta struct{ Model, Optimizer string }
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatalf("%s: the checkpoint's metadata does not parse: %v", what, err)
	}
	if meta.Model != p.Header.Model || meta.Optimizer != p.Train.Optimizer {
		t.Fatalf("%s: the metadata holds model %q, optimizer %q; the plan %q, %q", what, meta.Model, meta.Optimizer, p.Header.Model, p.Train.Optimizer)
	}
	code, stdout, stderr := runCLI(slices.Concat([]string{"checkpoint", "verify"}, flags, []string{plan, ckpt})...)
	checkTerminal(t, "checkpoint verify", stdout+stderr, false)
	if code != 0 {
		t.Fatalf("%s: checkpoint verify refuses what run saved: %s", what, stderr)
	}
}

// accelKeys is the accelerate config emit accelerate wrote in dir without
// its comments, "" when it wrote none; accelerate's own reading of it
// (ir/accelerate.Parse) must accept it.
func accelKeys(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "a.yaml"))
	if err != nil {
		return ""
	}
	if _, err := accelerate.Parse("a.yaml", src); err != nil {
		t.Fatalf("emit accelerate wrote a config that does not read back: %v\n%s", err, src)
	}
	var keys []string
	for _, l := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	return strings.Join(keys, "\n")
}

// FuzzFailIf: any -fail-if expression parses to a gate with a known
// metric, one of the four comparisons and a finite threshold (not
// negative unless relative), or to an error that quotes it on one
// printable line; never a panic. A relative gate is accepted only where
// there is an old plan (diff). A gate round-trips: written back in its
// metric's JSON name and base unit, it parses to the same gate.
//
//	go test -run '^$' -fuzz FuzzFailIf -fuzztime 2m ./cmd/fsdpc
func FuzzFailIf(f *testing.F) {
	for _, s := range []string{"step>+5%", "reserved>70GiB", "step < 1.5s", "mfu<40%", "exposed>=2ms", "step>>1", "\x1b[2J<1", "step>1e999s",
		"tps>1e300T", "step<1e308h", "tflops>1e300", "memory<=0.5KiB", "tps >= 2.5K", "hfu>0.3", "step>-0%"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, expr string, relativeOK bool) {
		g, err := parseGate(expr, relativeOK)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--fail-if ") || !safetext.Printable(err.Error()) {
				t.Fatalf("error %q", err)
			}
			return
		}
		switch {
		case g.op != "<" && g.op != ">" && g.op != "<=" && g.op != ">=":
			t.Fatalf("%q: op %q", expr, g.op)
		case math.IsNaN(g.threshold) || math.IsInf(g.threshold, 0):
			t.Fatalf("%q: threshold %v", expr, g.threshold)
		case g.relative && !relativeOK:
			t.Fatalf("%q: a relative gate without an old plan", expr)
		case !g.relative && g.threshold < 0:
			t.Fatalf("%q: a negative threshold %v", expr, g.threshold)
		}
		if _, ok := lookupMetric(g.metric.name); !ok {
			t.Fatalf("%q: metric %+v", expr, g.metric)
		}
		canon := g.metric.name + g.op + canonicalValue(g)
		again, err := parseGate(canon, g.relative)
		if err != nil {
			t.Fatalf("%q is written back as %q, which does not parse: %v", expr, canon, err)
		}
		if again.metric.name != g.metric.name || again.op != g.op || again.relative != g.relative ||
			math.Abs(again.threshold-g.threshold) > 1e-12*math.Abs(g.threshold) {
			t.Fatalf("%q is %+v; written back as %q, %+v", expr, g, canon, again)
		}
	})
}

// canonicalValue writes a gate's threshold in its metric's base unit
// (seconds, bytes, a fraction, a count) or as a signed percentage.
func canonicalValue(g gate) string {
	if g.relative {
		s := strconv.FormatFloat(100*g.threshold, 'f', -1, 64)
		if !strings.HasPrefix(s, "-") {
			s = "+" + s
		}
		return s + "%"
	}
	s := strconv.FormatFloat(g.threshold, 'f', -1, 64)
	switch g.metric.unit {
	case unitSeconds:
		return s + "s"
	case unitBytes:
		return s + "B"
	}
	return s
}
