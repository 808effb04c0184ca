package torchgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// hostileJob is a job whose every path and argument tries to break out of
// its quoting: quotes of each language, a command substitution, a line
// break that starts a command, a YAML key and a Python statement.
func hostileJob(engine string) LaunchJob {
	return LaunchJob{
		Engine:     engine,
		PlanExport: "plans/it's \"my\" plan\n$(touch pwned).json",
		Script:     "train $(touch pwned) `touch pwned`.py",
		Args:       []string{"--lr", "3e-4", "it's", "a\nb: c\n- d", "\"; import os; os.system('touch pwned') #", "${HOME}", "*", ""},
		Source:     "p\ntouch pwned\n.bin",
		PlanSHA256: strings.Repeat("5a", 32),
		Endpoint:   "head'node:29500",
		Image:      "registry.example/img:1\nkind: Pod",
	}
}

// launchPlans are scaled zoo plans of one node, two nodes and HSDP over
// two nodes.
func launchPlans(t *testing.T) map[string]*schedule.Plan {
	t.Helper()
	out := map[string]*schedule.Plan{}
	for _, c := range zooCases {
		if c.model != "gpt2-124m" && c.model != "llama3-70b" && c.model != "llama3.1-405b" {
			continue
		}
		_, p, _, err := zooPlan(c)
		if err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
		out[c.model] = p
	}
	return out
}

func TestLaunchMesh(t *testing.T) {
	for name, p := range launchPlans(t) {
		m, err := LaunchMesh(p)
		if err != nil {
			t.Fatal(err)
		}
		c := p.Cluster
		if m.World != c.WorldSize || m.Nodes*m.PerNode != c.WorldSize || m.PerNode > c.GPUsPerNode {
			t.Errorf("%s: mesh %+v for %d ranks of %d per node", name, m, c.WorldSize, c.GPUsPerNode)
		}
	}
	p := &schedule.Plan{Cluster: schedule.Cluster{WorldSize: 12, GPUsPerNode: 8}}
	if _, err := LaunchMesh(p); err == nil || !strings.Contains(err.Error(), "do not fill nodes of 8") {
		t.Errorf("12 ranks on nodes of 8: %v", err)
	}
}

func TestLaunchFileRefuses(t *testing.T) {
	_, p, _, err := zooPlan(zooCases[0])
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("0f", 32)
	for _, c := range []struct {
		job  LaunchJob
		want string
	}{
		{LaunchJob{Engine: "torchrun", PlanExport: "p.json", Script: "t.py", PlanSHA256: "x"}, `plan hash "x"`},
		{LaunchJob{Engine: "mpi", PlanExport: "p.json", Script: "t.py", PlanSHA256: sha}, `engine "mpi"`},
		{LaunchJob{Engine: "torchrun", PlanExport: "p.json", PlanSHA256: sha}, "no training program"},
		{LaunchJob{Engine: "torchrun", Script: "t.py", PlanSHA256: sha}, "no plan export"},
		{LaunchJob{Engine: "kubernetes", PlanExport: "p.json", Script: "t.py", PlanSHA256: sha}, "--image"},
		{LaunchJob{Engine: "slurm", PlanExport: "p.json", Script: "t.py", Name: "My Job", PlanSHA256: sha}, `"My Job"`},
		{LaunchJob{Engine: "slurm", PlanExport: "p.json", Script: "t.py", Args: []string{"a\x00b"}, PlanSHA256: sha}, "NUL"},
		{LaunchJob{Engine: "slurm", PlanExport: "p.json", Script: "t\xff.py", PlanSHA256: sha}, "UTF-8"},
		{LaunchJob{Engine: "torchrun", PlanExport: "p.json", Script: "t.py", Port: 70000, PlanSHA256: sha}, "not a TCP port"},
	} {
		if _, err := LaunchFile(p, c.job); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.job, err, c.want)
		}
	}
}

// TestLaunchHeaderIsComments: every line before a file's first statement
// is a comment (or the format's own first lines), so a line break in a
// path cannot add a statement there.
func TestLaunchHeaderIsComments(t *testing.T) {
	_, p, _, err := zooPlan(zooCases[0])
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]string{"torchrun": "set -euo pipefail", "slurm": "set -euo pipefail", "kubernetes": "apiVersion:", "ray": "import runpy"}
	for _, engine := range Engines {
		text, err := LaunchFile(p, hostileJob(engine))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, first[engine]) {
				break
			}
			if !strings.HasPrefix(line, "#") {
				t.Errorf("%s: header line %q is not a comment", engine, line)
			}
		}
	}
}

// runStubbed runs a generated shell script under bash with torchrun,
// srun and scontrol replaced by programs that record their arguments (NUL
// separated) and environment, and returns torchrun's arguments and
// environment. A command the hostile strings smuggled in would create
// "pwned" in the working directory.
func runStubbed(t *testing.T, script string) (argv []string, env map[string]string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	work := filepath.Join(dir, "work")
	for _, d := range []string{bin, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stubs := map[string]string{
		"torchrun": "printf '%s\\0' \"$@\" > \"$STUB_OUT/argv\"; env -0 > \"$STUB_OUT/env\"",
		"srun":     "printf '%s\\0' \"$@\" > \"$STUB_OUT/srun\"; while [ \"$1\" != torchrun ]; do shift; done; exec \"$@\"",
		"scontrol": "[ \"$1 $2\" = 'show hostnames' ] && printf 'node-a\\nnode-b\\n'",
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!"+bash+"\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "launch.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bash, "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	cmd := exec.Command(bash, path)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "STUB_OUT=" + dir, "SLURM_JOB_NODELIST=node-[a-b]", "SLURM_JOB_ID=42", "HOME=" + dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bash %s: %v\n%s", path, err, out)
	}
	if _, err := os.Stat(filepath.Join(work, "pwned")); err == nil {
		t.Fatal("a string from the job ran as a command")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "argv"))
	if err != nil {
		t.Fatalf("torchrun was not run: %v", err)
	}
	argv = strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	raw, err = os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	env = map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return argv, env
}

// torchrunFlags splits torchrun's arguments into its --flag=value options
// and the program's argument vector after them.
func torchrunFlags(argv []string) (map[string]string, []string) {
	flags := map[string]string{}
	for i, a := range argv {
		if !strings.HasPrefix(a, "--") {
			return flags, argv[i:]
		}
		k, v, _ := strings.Cut(a[2:], "=")
		flags[k] = v
	}
	return flags, nil
}

func wantPreflight(job LaunchJob) []string {
	return append([]string{"-m", "fsdpc", "preflight", job.PlanExport, job.Script}, job.Args...)
}

func checkEnv(t *testing.T, what string, p *schedule.Plan, env map[string]string) {
	t.Helper()
	for _, e := range append(Environment(p), EnvVar{Name: PlanSHA256Var, Value: strings.Repeat("5a", 32)}) {
		if env[e.Name] != e.Value {
			t.Errorf("%s: %s=%q, want %q", what, e.Name, env[e.Name], e.Value)
		}
	}
}

// TestLaunchShellScripts runs the torchrun and Slurm scripts of each plan
// with stubbed launchers: torchrun gets the plan's node and per-node
// counts, the rendezvous, the environment, and the program's arguments
// byte for byte, however hostile.
func TestLaunchShellScripts(t *testing.T) {
	for name, p := range launchPlans(t) {
		mesh, _ := LaunchMesh(p)
		for _, engine := range []string{"torchrun", "slurm"} {
			job := hostileJob(engine)
			job.MaxRestarts = 3
			text, err := LaunchFile(p, job)
			if err != nil {
				t.Fatal(err)
			}
			argv, env := runStubbed(t, text)
			flags, program := torchrunFlags(argv)
			what := name + " " + engine
			want := map[string]string{"nnodes": fmt.Sprint(mesh.Nodes), "nproc-per-node": fmt.Sprint(mesh.PerNode), "rdzv-backend": "c10d", "max-restarts": "3",
				"rdzv-endpoint": job.Endpoint, "rdzv-id": DefaultJobName(p)}
			if engine == "slurm" {
				want["rdzv-endpoint"], want["rdzv-id"] = "node-a:29500", "42"
				if !strings.Contains(text, fmt.Sprintf("#SBATCH --nodes=%d\n", mesh.Nodes)) || !strings.Contains(text, fmt.Sprintf("#SBATCH --gpus-per-node=%d\n", mesh.PerNode)) {
					t.Errorf("%s: the #SBATCH lines do not ask for %d nodes of %d GPUs", what, mesh.Nodes, mesh.PerNode)
				}
			}
			for k, v := range want {
				if flags[k] != v {
					t.Errorf("%s: torchrun --%s=%q, want %q", what, k, flags[k], v)
				}
			}
			if !slices.Equal(program, wantPreflight(job)) {
				t.Errorf("%s: program argv %q, want %q", what, program, wantPreflight(job))
			}
			checkEnv(t, what, p, env)
		}
	}
}

// TestLaunchTrainJob parses each TrainJob with a strict YAML subset
// reader and checks its counts, command and environment.
func TestLaunchTrainJob(t *testing.T) {
	for name, p := range launchPlans(t) {
		mesh, _ := LaunchMesh(p)
		job := hostileJob("kubernetes")
		text, err := LaunchFile(p, job)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := parseYAMLSubset(text)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		checkTrainJob(t, name, doc, p, mesh, job)
	}
}

func checkTrainJob(t *testing.T, name string, doc any, p *schedule.Plan, mesh Mesh, job LaunchJob) {
	t.Helper()
	get := func(path ...string) any {
		v := doc
		for _, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		}
		return v
	}
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"apiVersion"}, "trainer.kubeflow.org/v1alpha1"},
		{[]string{"kind"}, "TrainJob"},
		{[]string{"metadata", "name"}, DefaultJobName(p)},
		{[]string{"spec", "runtimeRef", "name"}, "torch-distributed"},
		{[]string{"spec", "trainer", "image"}, job.Image},
		{[]string{"spec", "trainer", "numNodes"}, int64(mesh.Nodes)},
		{[]string{"spec", "trainer", "numProcPerNode"}, int64(mesh.PerNode)},
		{[]string{"spec", "trainer", "resourcesPerNode", "limits", "nvidia.com/gpu"}, int64(mesh.PerNode)},
	} {
		if got := get(c.path...); got != c.want {
			t.Errorf("%s: %s = %#v, want %#v", name, strings.Join(c.path, "."), got, c.want)
		}
	}
	var command []string
	list, _ := get("spec", "trainer", "command").([]any)
	for _, w := range list {
		s, _ := w.(string)
		command = append(command, s)
	}
	if want := append([]string{"torchrun"}, wantPreflight(job)...); !slices.Equal(command, want) {
		t.Errorf("%s: command %q, want %q", name, command, want)
	}
	env := map[string]string{}
	envList, _ := get("spec", "trainer", "env").([]any)
	for _, e := range envList {
		m, _ := e.(map[string]any)
		k, _ := m["name"].(string)
		v, _ := m["value"].(string)
		env[k] = v
	}
	checkEnv(t, name, p, env)
}

// TestLaunchRay reads the Ray program's constants with Python's own
// parser (ast.literal_eval), and checks TorchTrainer gets one worker per
// rank.
func TestLaunchRay(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	for name, p := range launchPlans(t) {
		job := hostileJob("ray")
		text, err := LaunchFile(p, job)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rayConstants(py, text)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		env := map[string]string{}
		for k, v := range got.Environment {
			env[k] = v
		}
		if got.PlanExport != job.PlanExport || got.Script != job.Script || !slices.Equal(got.Args, job.Args) ||
			got.WorldSize != p.Cluster.WorldSize || got.NumWorkers != "WORLD_SIZE" || !got.UseGPU {
			t.Errorf("%s: read back %+v", name, got)
		}
		checkEnv(t, name, p, env)
	}
}

type rayRead struct {
	PlanExport  string            `json:"PLAN_EXPORT"`
	Script      string            `json:"SCRIPT"`
	Args        []string          `json:"ARGS"`
	WorldSize   int               `json:"WORLD_SIZE"`
	Environment map[string]string `json:"ENVIRONMENT"`
	NumWorkers  string            `json:"num_workers"`
	UseGPU      bool              `json:"use_gpu"`
}

const rayReader = `import ast, json, sys
src = sys.stdin.read()
tree = ast.parse(src)
compile(src, "launch.py", "exec")
out = {}
for node in tree.body:
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        out[target.id] = ast.literal_eval(node.value)
for node in ast.walk(tree):
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ScalingConfig":
        for kw in node.keywords:
            if kw.arg == "num_workers":
                out["num_workers"] = kw.value.id
            if kw.arg == "use_gpu":
                out["use_gpu"] = ast.literal_eval(kw.value)
json.dump(out, sys.stdout)
`

func rayConstants(py, text string) (rayRead, error) {
	cmd := exec.Command(py, "-c", rayReader)
	cmd.Stdin = strings.NewReader(text)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return rayRead{}, fmt.Errorf("python3: %v\n%s", err, stderr.String())
	}
	var r rayRead
	err = json.Unmarshal(out, &r)
	return r, err
}
