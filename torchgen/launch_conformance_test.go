package torchgen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/python"
)

// The torch root needs two shims to run torchrun, both for this test only:
// Debian's torch 2.14.1 is built without libuv, and torchrun's
// rendezvous stores and its workers' agent-store clients ask for libuv
// whatever USE_LIBUV says; and the root's /etc/hosts does not name this
// machine, whose host name torchrun would give the workers as
// MASTER_ADDR. sitecustomize makes every TCPStore without libuv, and the
// torchrun on PATH runs the root's own /usr/bin/torchrun with
// --local-addr=127.0.0.1: the rendezvous, the worker processes, their
// environment and the exit status are torchrun's. On a torch with libuv
// (every pip wheel) and a resolvable host name neither is needed.
const (
	storeShim = `import sys
import torch.distributed as dist
import torch.distributed.elastic.rendezvous.c10d_rendezvous_backend as c10d

# torch.distributed.rendezvous names the function; the module is here.
rendezvous = sys.modules["torch.distributed.rendezvous"]

class _StoreWithoutLibuv(dist.TCPStore):
    def __init__(self, *args, **kwargs):
        kwargs["use_libuv"] = False
        super().__init__(*args, **kwargs)

dist.TCPStore = rendezvous.TCPStore = c10d.TCPStore = _StoreWithoutLibuv
`
	torchrunShim = "#!/bin/sh\nexec /usr/bin/torchrun --local-addr=127.0.0.1 \"$@\"\n"
)

// runLaunchFile runs `bash launch.sh` with the shim first on PATH, in the
// scratch directory, at a free port (FSDPC_RDZV_ENDPOINT, which the file
// honours, replaces its endpoint), prints what the job printed, and exits
// with its status. (Not the test's own port: importing net would make
// this test binary dynamic, and TestChrootMountsPrivate runs it in a root
// without libc.)
const runLaunchFile = `import os, socket, subprocess, sys
os.chmod("bin/torchrun", 0o755)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    endpoint = "127.0.0.1:%d" % s.getsockname()[1]
env = dict(os.environ, PATH=os.path.abspath("bin") + ":" + os.environ["PATH"], FSDPC_RDZV_ENDPOINT=endpoint)
r = subprocess.run(["bash", "launch.sh"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
print(r.stdout)
sys.exit(r.returncode)
`

// TestLaunchTorchrunConformance launches the file `fsdpc emit launch
// --engine torchrun` writes for a scaled zoo plan (llama3-8b), as a user
// runs it on one node of 2 CPU ranks: torchrun starts both, each runs `python -m fsdpc preflight`
// against the plan export and then the training program `emit torch`
// writes, whose apply_plan and verify_first_step check FSDP2's first step
// against the plan on every rank.
func TestLaunchTorchrunConformance(t *testing.T) {
	py := needTorch(t)
	// llama3-8b as the conformance suite shrinks it, on 2 ranks, then
	// scaled down as `emit torch --scale 2` does.
	m, p, _, err := zooPlan(zooCases[1])
	if err != nil {
		t.Fatal(err)
	}
	q, spec, err := ScalePlan(m, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewExport(spec, q, 2)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Program(e, spec.Model, "llama3-8b.toml", "llama3-8b.toml")
	if err != nil {
		t.Fatal(err)
	}
	export, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	launch, err := LaunchFile(q, LaunchJob{Engine: "torchrun", PlanExport: "plan.json", Script: "train.py",
		Source: "llama3-8b.plan.bin", PlanSHA256: e.PlanSHA256, Endpoint: "127.0.0.1:29500", Name: "fsdpc-launch-test"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"plan.json": string(export), "train.py": prog, "launch.sh": launch,
		"bin/torchrun": torchrunShim, "sitecustomize.py": storeShim, "run_launch.py": runLaunchFile}
	start := time.Now()
	out, err := runLaunch(py, files)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%.1fs:\n%s", time.Since(start).Seconds(), strings.TrimSpace(out))
	for _, want := range []string{"step 1: loss", "match the plan", "step 2: loss"} {
		if !strings.Contains(out, want) {
			t.Errorf("the launched job did not print %q:\n%s", want, out)
		}
	}

	// An export of another plan on the node (a stale copy): every rank's
	// preflight stops the job before the training program starts.
	files["plan.json"] = strings.Replace(files["plan.json"], e.PlanSHA256, strings.Repeat("0", 64), 1)
	out, err = runLaunch(py, files)
	if err == nil || !strings.Contains(out, "the training program was not started") || strings.Contains(out, "step 1: loss") {
		t.Errorf("a stale export: err %v, want every rank's preflight to stop the job:\n%s", err, out)
	}
}

// runLaunch runs the launch file with files in its scratch directory and
// returns what the job printed.
func runLaunch(py Python, files map[string]string) (string, error) {
	out, err := py.RunScript(Script{
		Setup: func(dir string) error {
			if err := python.WriteTo(dir); err != nil {
				return err
			}
			for name, text := range files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					return err
				}
			}
			return nil
		},
		Args:    []string{"run_launch.py"},
		Env:     []string{"FSDPC_STEPS=2"},
		Timeout: 4 * time.Minute,
	})
	return string(out), err
}
