package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/fsdpc/fsdpc/internal/forge"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/torchgen"
)

// readers are the commands that read a plan.bin, each with every output
// format it has; PLAN stands for the plan, BASE for an honest one, OUT for
// a fresh directory for output files.
var readers = [][]string{
	{"show", "PLAN"}, {"show", "-full", "PLAN"}, {"show", "-json", "PLAN"}, {"textconv", "PLAN"},
	{"diff", "BASE", "PLAN"}, {"diff", "-format", "markdown", "BASE", "PLAN"}, {"diff", "-format", "json", "BASE", "PLAN"},
	{"diff", "-color", "always", "BASE", "PLAN"},
	{"report", "-o", "OUT/r.html", "PLAN"}, {"report", "-o", "OUT/r2.html", "BASE", "PLAN"},
	{"reshard", "PLAN", "BASE"}, {"reshard", "-reads", "-format", "markdown", "BASE", "PLAN"}, {"reshard", "-format", "json", "PLAN", "BASE"},
	{"checkpoint", "PLAN"}, {"checkpoint", "-json", "PLAN"},
	{"sim", "PLAN"}, {"verify", "PLAN"},
	{"emit", "torch", "--model", "gpt2-124m", "PLAN", "-o", "OUT/a.py", "--torchtitan", "OUT/a.toml"},
	{"emit", "accelerate", "PLAN", "--model", "gpt2-124m", "-o", "OUT/a.yaml"},
	{"export", "--model", "gpt2-124m", "-o", "OUT/p.json", "PLAN"},
	launchArgs("torchrun", "PLAN", "OUT"), launchArgs("slurm", "PLAN", "OUT"), launchArgs("kubernetes", "PLAN", "OUT"), launchArgs("ray", "PLAN", "OUT"),
	// Saves a checkpoint, which checkSaved loads back (not under -short).
	{"run", "--steps", "1", "--scale", "4096", "--checkpoint", "OUT/ckpt", "PLAN"},
}

// TestForgedStringsEverywhere takes plans with each string field forged
// (internal/forge) through every command that reads a plan and every
// output format: a string its field's rule refuses is refused by all of
// them, naming the file, with nothing written; one it allows (printable
// text where a label goes) comes out as data: printable lines on the
// terminal, no Markdown or HTML markup, Python, TOML, YAML and launch
// files with the same statements and keys as for the honest plan, an
// export that parses, and (without -short) a checkpoint whose metadata
// holds the plan's strings unchanged and loads back under the plan.
func TestForgedStringsEverywhere(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.bin")
	if code, _, errOut := runCLI("plan", "-o", base, "gpt2-124m"); code != 0 {
		t.Fatalf("plan: %s", errOut)
	}
	p, err := schedule.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	honest := emitShape(t, dir, base)
	fields := forge.StringFields()
	if testing.Short() {
		fields = slices.DeleteFunc(fields, func(f forge.StringField) bool {
			return f.Name != "header model" && f.Name != "group name"
		})
	}
	var refused, accepted int
	for fi, f := range fields {
		for hi, h := range forge.Hostile {
			b, err := forge.Bytes(p, f, h.S)
			if err != nil {
				t.Fatal(err)
			}
			plan := filepath.Join(dir, "forged.bin")
			if err := os.WriteFile(plan, b, 0o644); err != nil {
				t.Fatal(err)
			}
			decoded, decodeErr := schedule.Decode(b)
			for _, cmd := range readers {
				if decodeErr != nil && hi > 0 && fi > 0 && cmd[0] != "show" {
					continue // one refused string per field goes through every reader
				}
				if cmd[0] == "run" && testing.Short() {
					continue
				}
				out := filepath.Join(dir, "out")
				os.RemoveAll(out)
				os.Mkdir(out, 0o755)
				args := make([]string, len(cmd))
				for i, a := range cmd {
					a = strings.ReplaceAll(a, "PLAN", plan)
					a = strings.ReplaceAll(a, "BASE", base)
					args[i] = strings.ReplaceAll(a, "OUT", out)
				}
				what := f.Name + " = " + safetext.Term(h.S) + ": " + strings.Join(cmd, " ")
				code, stdout, stderr := runCLI(args...)
				checkTerminal(t, what, stdout+stderr, cmd[0] == "diff" && cmd[1] == "-color")
				files, _ := os.ReadDir(out)
				if decodeErr != nil {
					refused++
					if code == 0 || !strings.Contains(stderr, plan) {
						t.Errorf("%s: exit %d, stderr %q; want an error naming the file", what, code, stderr)
					}
					if len(files) > 0 {
						t.Errorf("%s: refused, but wrote %s", what, files[0].Name())
					}
					continue
				}
				accepted++
				if (cmd[0] == "diff" || cmd[0] == "reshard") && slices.Contains(cmd, "markdown") {
					checkMarkdown(t, what, stdout)
				}
				checkFiles(t, what, out, honest)
				if cmd[0] == "run" && code == 0 {
					checkSaved(t, what, decoded, plan, filepath.Join(out, "ckpt"), "--scale", "4096")
				}
			}
		}
	}
	t.Logf("%d command runs on refused forgeries, %d on accepted ones", refused, accepted)
	if refused == 0 || accepted == 0 {
		t.Errorf("the forgeries reach no refusal or no writer")
	}
}

// checkTerminal: every line is printable (a tab aside), so no string
// added a line break or an escape sequence; colour is SGR only.
func checkTerminal(t *testing.T, what, out string, color bool) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		line = strings.ReplaceAll(line, "\t", " ")
		if color {
			for _, sgr := range []string{"\x1b[31m", "\x1b[32m", "\x1b[0m"} {
				line = strings.ReplaceAll(line, sgr, "")
			}
		}
		if !safetext.Printable(line) {
			t.Errorf("%s: prints %q", what, line)
			return
		}
	}
}

// checkMarkdown: no markup from the forged string survives unescaped.
func checkMarkdown(t *testing.T, what, md string) {
	t.Helper()
	if strings.Contains(md, "\n# ") {
		t.Errorf("%s: the Markdown gained a heading:\n%s", what, md)
	}
	for _, bad := range []string{"!", "<img", "[l]", "`code`", "|a", "@someone", "://", "# Heading"} {
		for i := 0; ; i++ {
			j := strings.Index(md[i:], bad)
			if j < 0 {
				break
			}
			i += j
			if i == 0 || md[i-1] != '\\' {
				t.Errorf("%s: the Markdown keeps %q unescaped:\n%s", what, bad, md)
				return
			}
		}
	}
}

// shape is what the generated files hold: a Python module's top-level
// statements, a torchtitan fragment's keys, an accelerate config's keys,
// and each launch file's statements (launchStatements).
type shape struct {
	py, toml, accel string
	launch          map[string]string
}

func emitShape(t *testing.T, dir, plan string) shape {
	t.Helper()
	out := filepath.Join(dir, "honest")
	os.Mkdir(out, 0o755)
	if code, _, errOut := runCLI("emit", "torch", "--model", "gpt2-124m", plan, "-o", filepath.Join(out, "a.py"), "--torchtitan", filepath.Join(out, "a.toml")); code != 0 {
		t.Fatalf("emit: %s", errOut)
	}
	if code, _, errOut := runCLI("emit", "accelerate", plan, "--model", "gpt2-124m", "-o", filepath.Join(out, "a.yaml")); code != 0 {
		t.Fatalf("emit accelerate: %s", errOut)
	}
	for _, e := range torchgen.Engines {
		if code, _, errOut := runCLI(launchArgs(e, plan, out)...); code != 0 {
			t.Fatalf("emit launch: %s", errOut)
		}
	}
	return readShape(t, out)
}

func readShape(t *testing.T, out string) shape {
	t.Helper()
	s := shape{toml: titanKeys(t, out), accel: accelKeys(t, out), launch: map[string]string{}}
	if _, err := os.Stat(filepath.Join(out, "a.py")); err == nil {
		s.py = pythonStatements(t, filepath.Join(out, "a.py"))
	}
	for _, e := range torchgen.Engines {
		s.launch[e] = launchStatements(t, out, e)
	}
	return s
}

// titanKeys lists the keys of the torchtitan fragment out/a.toml, or ""
// without one.
func titanKeys(t *testing.T, out string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "a.toml"))
	if err != nil {
		return ""
	}
	var v map[string]any
	md, err := toml.Decode(string(b), &v)
	if err != nil {
		t.Fatalf("the torchtitan fragment does not parse: %v\n%s", err, b)
	}
	var keys []string
	for _, k := range md.Keys() {
		keys = append(keys, k.String())
	}
	return strings.Join(keys, " ")
}

// pythonStatements lists a module's top-level statements (kind and line
// count) with the host's python3, or "" without one.
func pythonStatements(t *testing.T, path string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		return ""
	}
	out, err := exec.Command(py, "-c", `import ast, sys
tree = ast.parse(open(sys.argv[1], encoding="utf-8").read())
print(" ".join(type(n).__name__ for n in tree.body))
print(sum(1 for l in open(sys.argv[1], encoding="utf-8") if l.startswith("#")))`, path).CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not parse: %v\n%s", path, err, out)
	}
	return string(out)
}

func checkFiles(t *testing.T, what, out string, honest shape) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(out, "r.html")); err == nil {
		for _, bad := range []string{"<img src=x", "evil.example/p.png\""} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s: the report holds %q unescaped", what, bad)
			}
		}
	}
	got := readShape(t, out)
	if got.toml != "" && got.toml != honest.toml {
		t.Errorf("%s: the torchtitan fragment's keys are\n%s\nwant\n%s", what, got.toml, honest.toml)
	}
	if got.py != "" && got.py != honest.py {
		t.Errorf("%s: the module's statements are\n%s\nwant\n%s", what, got.py, honest.py)
	}
	if got.accel != "" && got.accel != honest.accel {
		t.Errorf("%s: the accelerate config's keys are\n%s\nwant\n%s", what, got.accel, honest.accel)
	}
	for e, l := range got.launch {
		if l != "" && l != honest.launch[e] {
			t.Errorf("%s: the %s launch file's statements are\n%s\nwant\n%s", what, e, l, honest.launch[e])
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "p.json")); err == nil && !json.Valid(b) {
		t.Errorf("%s: the export does not parse:\n%s", what, b)
	}
}

// hostileNames are file names an attacker would hand fsdpc: each adds
// code, a TOML key or a line of output if written raw.
var hostileNames = []string{
	"x\nopen(\"pwned\", \"w\").write(\"1\")\n#",
	"x\nprofile.clock_ratio = 0.05\n[experimental]\ncustom_import = \"evil_module\"\n#",
	"x\x1b]0;pwned\x07\x1b[2J\u202e",
	"x\"; import os; \"",
}

// TestHostileFileNames gives emit torch, --torchtitan and calibrate -o
// inputs whose names hold code, TOML and escapes: the generated Python
// parses to the same statements, the TOML to the same keys, the profile
// to the same constants as with a plain name; errors and messages that
// echo such a name print it quoted, on one line.
func TestHostileFileNames(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../plans/gpt2-124m.toml")
	if err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile("../../calibrate/published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	plainOut := filepath.Join(dir, "plain-out")
	os.Mkdir(plainOut, 0o755)
	plainModel := filepath.Join(dir, "plain.toml")
	os.WriteFile(plainModel, src, 0o644)
	if code, _, errOut := runCLI("plan", "-o", filepath.Join(dir, "plain.bin"), plainModel); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := runCLI("emit", "torch", "--model", plainModel, filepath.Join(dir, "plain.bin"),
		"-o", filepath.Join(plainOut, "a.py"), "--torchtitan", filepath.Join(plainOut, "a.toml")); code != 0 {
		t.Fatal(errOut)
	}
	honest := readShape(t, plainOut)
	runs := filepath.Join(dir, "runs.csv")
	os.WriteFile(runs, csv, 0o644)
	os.WriteFile(filepath.Join(dir, "plain.log"), []byte(titanLogForTest), 0o644)
	llama := "../../plans/llama3-8b.toml"
	if code, _, errOut := runCLI("calibrate", "-fit", "max_efficiency", "-o", plainOut, runs, llama+"="+filepath.Join(dir, "plain.log")); code != 0 {
		t.Fatal(errOut)
	}
	plainProfile := profileBody(t, filepath.Join(plainOut, "a100-80gb.profile.toml"))

	for i, name := range hostileNames {
		sub := filepath.Join(dir, fmt.Sprint(i))
		out := filepath.Join(sub, "out")
		os.MkdirAll(out, 0o755)
		model := filepath.Join(sub, name+".toml")
		plan := filepath.Join(sub, name+".bin")
		if err := os.WriteFile(model, src, 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI("plan", "-o", plan, model)
		checkTerminal(t, "plan", stdout+stderr, false)
		if code != 0 {
			t.Fatalf("plan %q: %s", name, stderr)
		}
		code, stdout, stderr = runCLI("emit", "torch", "--model", model, plan, "-o", filepath.Join(out, "a.py"), "--torchtitan", filepath.Join(out, "a.toml"))
		checkTerminal(t, "emit", stdout+stderr, false)
		if code != 0 {
			t.Fatalf("emit %q: %s", name, stderr)
		}
		checkFiles(t, fmt.Sprintf("emit with %q", name), out, honest)
		py, _ := os.ReadFile(filepath.Join(out, "a.py"))
		if first, _, _ := strings.Cut(string(py), "\n"); !strings.Contains(first, safetext.Python(model)) {
			t.Errorf("the header does not quote the model's name %q: %s", model, first)
		}
		// A log named after an injection: the profile has the same
		// constants as with a plain name.
		log := filepath.Join(sub, name+".log")
		os.WriteFile(log, []byte(titanLogForTest), 0o644)
		code, stdout, stderr = runCLI("calibrate", "-fit", "max_efficiency", "-o", out, runs, llama+"="+log)
		checkTerminal(t, "calibrate", stdout+stderr, false)
		if code != 0 {
			t.Fatalf("calibrate %q: %s", name, stderr)
		}
		if got := profileBody(t, filepath.Join(out, "a100-80gb.profile.toml")); got != plainProfile {
			t.Errorf("calibrate with %q: the profile holds\n%s\nwant\n%s", name, got, plainProfile)
		}
		// Errors echo the name quoted, on one line.
		missing := filepath.Join(sub, name+"-missing.toml")
		for _, args := range [][]string{{"inspect", missing}, {"show", missing}, {"plan", "-o", filepath.Join(out, name+".bin"), missing},
			{"diff", missing, plan}, {"report", "-o", filepath.Join(sub, name+"-no-dir", "r.html"), plan}} {
			code, stdout, stderr := runCLI(args...)
			checkTerminal(t, strings.Join(args, " "), stdout+stderr, false)
			if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") > 0 && args[0] != "diff" {
				t.Errorf("%q: exit %d, stderr %q; want one line", args, code, stderr)
			}
		}
	}
}

// profileBody is a profile file without its first comment line (which
// names the inputs), parsed: its keys and values.
func profileBody(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if _, err := toml.Decode(string(b), &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return fmt.Sprint(v)
}

// titanLogForTest is a torchtitan log of llama3-8b on H100s (the format
// calibrate's log reader takes).
const titanLogForTest = `[rank0]:[titan] 2025-10-30 14:32:58,897 - root - INFO - step:  1  loss:  8.1661  grad_norm:  3.6855  memory: 40.47GiB(50.12%)  tps: 3,502  tflops: 1.90  mfu: 0.19%
[rank0]:[titan] 2025-10-30 14:32:58,990 - root - INFO - step:  2  loss:  6.1098  grad_norm:  4.6416  memory: 41.49GiB(51.14%)  tps: 6,100  tflops: 96.17  mfu: 9.72%
[rank0]:[titan] 2025-10-30 14:32:59,077 - root - INFO - step:  3  loss:  4.7947  grad_norm:  2.4418  memory: 41.49GiB(51.14%)  tps: 6,300  tflops: 102.99  mfu: 10.41%
`

// TestHostileCalibrate gives calibrate a CSV of runs whose text fields
// (sources, notes) hold code, TOML, Markdown and escapes, row IDs with
// Markdown, HTML and quotes, a row whose GPU names a path and TOML, and a
// torchtitan log with such lines: the fit and the profiles are those of
// the honest inputs, written where they would be and nowhere else, and
// everything printed is printable lines. A row ID, which names the row's
// model file and every message about it, is refused when not printable,
// naming the file and line.
func TestHostileCalibrate(t *testing.T) {
	src, err := os.ReadFile("../../calibrate/published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(src)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	hostile := append(slices.Clone(hostileNames), "# Heading ![x](https://evil.example/p.png) <img src=x onerror=alert(1)> |a|b|")
	var printable []string
	for _, h := range forge.Hostile {
		if h.Printable {
			printable = append(printable, h.S)
		}
	}
	forged := [][]string{rows[0]}
	for i, r := range rows[1:] {
		r = slices.Clone(r)
		r[col["row_id"]] += printable[i%len(printable)]
		for _, c := range []string{"source_id", "source_org", "source_ref", "arch_note", "versions", "notes"} {
			r[col[c]] = hostile[i%len(hostile)]
		}
		forged = append(forged, r)
	}
	evil := slices.Clone(rows[1])
	evil[col["row_id"]] = "evil-gpu"
	evil[col["gpu"]] = "../../evil\n[profile]\nclock_ratio = 0.05\n#"
	forged = append(forged, evil)

	log := titanLogForTest + "x\x1b]0;pwned\x07\nprofile.clock_ratio = 0.05\n[experimental]\ncustom_import = \"evil_module\"\n\u202e\n"
	llama := "../../plans/llama3-8b.toml"
	calibrate := func(name string, rows [][]string, log string) (code int, stderr, files, profiles string) {
		dir := filepath.Join(t.TempDir(), name)
		out := filepath.Join(dir, "out")
		os.MkdirAll(out, 0o755)
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		w.WriteAll(rows)
		os.WriteFile(filepath.Join(dir, "runs.csv"), b.Bytes(), 0o644)
		os.WriteFile(filepath.Join(dir, "train.log"), []byte(log), 0o644)
		code, stdout, stderr := runCLI("calibrate", "-fit", "max_efficiency", "-o", out, filepath.Join(dir, "runs.csv"), llama+"="+filepath.Join(dir, "train.log"))
		checkTerminal(t, "calibrate "+name, stdout+stderr, false)
		var names, profs []string
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(dir, path)
			names = append(names, rel)
			if strings.HasSuffix(path, ".profile.toml") {
				profs = append(profs, rel+"\n"+profileBody(t, path))
			}
			return nil
		})
		return code, stderr, strings.Join(names, " "), strings.Join(profs, "\n")
	}
	code, stderr, wantFiles, want := calibrate("honest", rows, titanLogForTest)
	if code != 0 {
		t.Fatalf("calibrate: %s", stderr)
	}
	code, stderr, gotFiles, got := calibrate("hostile", forged, log)
	if code != 0 {
		t.Fatalf("calibrate with hostile text: %s", stderr)
	}
	if gotFiles != wantFiles {
		t.Errorf("calibrate wrote %s; with honest inputs %s", gotFiles, wantFiles)
	}
	if got != want {
		t.Errorf("the hostile inputs' profiles are\n%s\nwant\n%s", got, want)
	}
	for i, h := range hostileNames {
		if safetext.Printable(h) {
			continue // a row ID like any other
		}
		bad := slices.Clone(forged)
		bad[2] = slices.Clone(bad[2])
		bad[2][col["row_id"]] = h
		code, stderr, files, _ := calibrate(fmt.Sprint("id", i), bad, titanLogForTest)
		if code == 0 || !strings.Contains(stderr, "runs.csv:3: row_id ") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("row ID %q: exit %d, stderr %q; want one line naming the file and line", h, code, stderr)
		}
		if files != ". out runs.csv train.log" {
			t.Errorf("row ID %q refused, but calibrate wrote %s", h, files)
		}
	}
}
