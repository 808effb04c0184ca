package torchgen

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/python"
)

//go:embed program.py.tmpl
var programText string

var programTemplate = template.Must(template.New("program").Parse(programText))

// optimizers are the constructors for the plan's optimizer names, over
// params (the parameters with gradients). AdamW is built as the plan
// priced its step (optimizerConstructor).
var optimizers = map[string]string{
	"adamw":        "torch.optim.AdamW(params, lr=1e-3)",
	"adam":         "torch.optim.Adam(params, lr=1e-3)",
	"sgd_momentum": "torch.optim.SGD(params, lr=1e-3, momentum=0.9)",
	"sgd":          "torch.optim.SGD(params, lr=1e-3)",
}

// Program is `fsdpc emit torch`'s training program for a plan: the model
// (fsdpc.mirror's stand-in with the model's structure), apply_plan,
// the plan's optimizer and training steps whose first runs under
// verify_first_step. header says what it was made from, its paths quoted
// (safetext.Python); planName names the plan in its messages. Every
// string from the plan or a path enters the program as a quoted literal.
func Program(e *Export, model Node, header, planName string) (string, error) {
	planJSON, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	modelJSON, err := json.Marshal(struct {
		Model Node `json:"model"`
	}{model})
	if err != nil {
		return "", err
	}
	opt := optimizerConstructor(e.Train)
	var b strings.Builder
	err = programTemplate.Execute(&b, map[string]any{
		"Source":    safetext.Escape(header),
		"World":     e.Mesh.WorldSize,
		"Optimizer": opt,
		"Plan":      safetext.Python(string(planJSON)),
		"PlanName":  safetext.Python(planName),
		"Model":     safetext.Python(string(modelJSON)),
	})
	if err != nil {
		return "", fmt.Errorf("the program: %w", err)
	}
	return b.String(), nil
}

// rankLauncher starts the program once per rank with the environment
// torchrun gives each worker, and exits with the worst exit status. It
// stands in for torchrun, whose rendezvous store in torch 2.14 always asks
// for libuv, which Debian's torch is built without (USE_LIBUV=0 reaches
// only the process group's store).
const rankLauncher = `import os, socket, subprocess, sys
world, program = int(sys.argv[1]), sys.argv[2]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = str(s.getsockname()[1])
env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
ranks = [subprocess.Popen([sys.executable, program], env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in range(world)]
sys.exit(max(p.wait() for p in ranks))
`

// RunProgram runs the training program of export e (Program) on
// e.Mesh.WorldSize local CPU ranks, one process each with torchrun's
// environment, for steps steps, with fsdpc's Python package beside it:
// apply_plan and verify_first_step then check FSDP2 against the plan
// inside the run. It returns the program's standard output; a rank that
// fails fails the run, with the end of its output.
func RunProgram(py Python, e *Export, model Node, source string, steps int, timeout time.Duration) ([]byte, error) {
	prog, err := Program(e, model, safetext.Python(source), source)
	if err != nil {
		return nil, err
	}
	return py.RunScript(Script{
		Setup: func(dir string) error {
			if err := python.WriteTo(dir); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "launch.py"), []byte(rankLauncher), 0o644); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "train.py"), []byte(prog), 0o644)
		},
		Args:    []string{"launch.py", strconv.Itoa(e.Mesh.WorldSize), "train.py"},
		Env:     []string{"FSDPC_STEPS=" + strconv.Itoa(steps)},
		Timeout: timeout,
	})
}

// optimizerConstructor is the plan's optimizer over params. AdamW gets the
// implementation the plan priced: fused=True or foreach=True (PyTorch's
// own choice on CUDA, when neither is named, is foreach, whose step moves
// about three times the fused kernel's bytes). A plan from before format
// 10 names none, and PyTorch chooses.
func optimizerConstructor(t ExportTrain) string {
	opt, ok := optimizers[t.Optimizer]
	if !ok {
		return optimizers["adamw"]
	}
	if t.Optimizer == "adamw" {
		switch t.OptimizerImplementation {
		case "fused":
			return "torch.optim.AdamW(params, lr=1e-3, fused=True)"
		case "foreach":
			return "torch.optim.AdamW(params, lr=1e-3, foreach=True)"
		}
	}
	return opt
}
