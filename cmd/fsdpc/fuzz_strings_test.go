package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fsdpc/fsdpc/internal/forge"
	"github.com/fsdpc/fsdpc/ir/accelerate"
	"github.com/fsdpc/fsdpc/schedule"
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

// detailsTags are the HTML the Markdown renderers write themselves.
var detailsTags = regexp.MustCompile(`</?details>|<summary>[^<]*</summary>`)

var fuzzBase struct {
	once       sync.Once
	dir, model string
	bin        string
	plan       *schedule.Plan
	titanKeys  string
	accelKeys  string
	err        error
}

// FuzzPlanStrings puts an arbitrary string in one string field of a
// checksum-valid plan (internal/forge) and runs every command that
// renders a plan: show, textconv, diff (text, markdown), checkpoint,
// reshard (markdown), report and emit torch --torchtitan. A string the
// reader refuses is refused by every one, with nothing written; one it
// accepts comes out as data: the torchtitan fragment has the honest
// plan's keys, the module's header is one line, the report's HTML holds
// no raw '<' from it, the Markdown no heading or raw HTML from it.
//
//	go test -run '^$' -fuzz FuzzPlanStrings -fuzztime 2m ./cmd/fsdpc
func FuzzPlanStrings(f *testing.F) {
	for i, h := range forge.Hostile {
		f.Add(uint8(i), h.S)
	}
	f.Add(uint8(2), "gpt2-124m")
	fields := forge.StringFields()
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
		_, decodeErr := schedule.Decode(forged)
		for _, args := range [][]string{
			{"show", plan}, {"textconv", plan}, {"diff", b.bin, plan}, {"diff", "-format", "markdown", b.bin, plan},
			{"checkpoint", plan}, {"reshard", "-reads", "-format", "markdown", b.bin, plan},
			{"report", "-o", filepath.Join(out, "r.html"), plan},
			{"emit", "torch", "--model", b.model, plan, "-o", filepath.Join(out, "a.py"), "--torchtitan", filepath.Join(out, "a.toml")},
			{"emit", "accelerate", plan, "--model", b.model, "-o", filepath.Join(out, "a.yaml")},
		} {
			code, stdout, stderr := runCLI(args...)
			if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "panic") {
				t.Fatalf("%s %q = %q: %q: %s", fd.Name, s, args[0], stderr, stdout)
			}
			checkTerminal(t, args[0], stdout+stderr, false)
			if decodeErr != nil {
				if code == 0 {
					t.Fatalf("%s %q: %s accepts a plan decode refuses (%v)", fd.Name, s, args[0], decodeErr)
				}
				continue
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
		if html, err := os.ReadFile(filepath.Join(out, "r.html")); err == nil && strings.Contains(s, "<") && strings.Contains(string(html), s) {
			t.Fatalf("%s %q: the report holds it raw", fd.Name, s)
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
	})
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
// metric, one of the four comparisons and a finite threshold, or to an
// error that quotes it on one printable line; never a panic. A relative
// gate is accepted only where there is an old plan (diff).
//
//	go test -run '^$' -fuzz FuzzFailIf -fuzztime 2m ./cmd/fsdpc
func FuzzFailIf(f *testing.F) {
	for _, s := range []string{"step>+5%", "reserved>70GiB", "step < 1.5s", "mfu<40%", "exposed>=2ms", "step>>1", "\x1b[2J<1", "step>1e999s"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, expr string, relativeOK bool) {
		g, err := parseGate(expr, relativeOK)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--fail-if ") || strings.Contains(err.Error(), "\n") {
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
		}
		if _, ok := lookupMetric(g.metric.name); !ok {
			t.Fatalf("%q: metric %+v", expr, g.metric)
		}
	})
}
