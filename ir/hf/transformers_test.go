package hf

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
)

// countScript builds each config's model with transformers on the meta
// device and writes every parameter (named_parameters order, duplicates
// kept) and the total with tied parameters once.
const countScript = `
import json, sys, warnings
warnings.filterwarnings("ignore")
import torch
from transformers import AutoConfig, AutoModelForCausalLM
out = {}
for path in sys.argv[2:]:
    d = json.load(open(path))
    mt = d.pop("model_type")
    cfg = AutoConfig.for_model(mt, **d)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    seen, total, params = set(), 0, []
    for n, p in m.named_parameters(remove_duplicate=False):
        params.append("%s %s" % (n, list(p.shape)))
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    out[path] = {"total": total, "params": params}
json.dump(out, open(sys.argv[1], "w"))
`

// TestAgainstTransformers builds every fixture with transformers (the
// torch root's 5.x, on the meta device) and compares the importer's
// parameters with its named_parameters: the same names, shapes and order,
// and the same total. It needs the torch root and root privileges
// (chroot); FSDPC_TORCH_CONFORMANCE=1 turns it on.
func TestAgainstTransformers(t *testing.T) {
	if testing.Short() || os.Getenv("FSDPC_TORCH_CONFORMANCE") != "1" {
		t.Skip("builds the models with transformers: set FSDPC_TORCH_CONFORMANCE=1")
	}
	root := os.Getenv("FSDPC_TORCH_ROOT")
	if root == "" {
		root = "/var/cache/fsdpc/torch-forky"
	}
	if _, err := os.Stat(filepath.Join(root, ".fsdpc-torch-ready")); err != nil {
		t.Fatalf("no torch root at %s: %v", root, err)
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "fsdpc-hf-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	inside := "/tmp/" + filepath.Base(dir)
	fixtures, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{root, "python3", inside + "/count.py", inside + "/out.json"}
	for _, f := range fixtures {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), src, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, inside+"/"+filepath.Base(f))
	}
	if err := os.WriteFile(filepath.Join(dir, "count.py"), []byte(countScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chroot", args...).CombinedOutput(); err != nil {
		t.Fatalf("transformers: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct {
		Total  int64
		Params []string
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			w := want[inside+"/"+filepath.Base(f)]
			_, m := convertFixture(t, strings.TrimSuffix(filepath.Base(f), ".json"))
			got := namedParameters(m)
			if total := m.Stats().Params; total != w.Total {
				t.Errorf("%d parameters, transformers %d (off by %d)", total, w.Total, total-w.Total)
			}
			for i := 0; i < max(len(got), len(w.Params)); i++ {
				g, x := "(none)", "(none)"
				if i < len(got) {
					g = got[i]
				}
				if i < len(w.Params) {
					x = w.Params[i]
				}
				if g != x {
					t.Errorf("parameter %d: %s, transformers %s", i, g, x)
					break
				}
			}
		})
	}
}

// namedParameters lists a model's parameters as PyTorch's
// named_parameters(remove_duplicate=False) does: each module's own, then
// its children's in registration order.
func namedParameters(m *ir.Model) []string {
	var out []string
	var walk func(id ir.ModuleID)
	walk = func(id ir.ModuleID) {
		for _, p := range m.Modules[id].Params {
			out = append(out, fmt.Sprintf("%s %v", m.Params[p].Name, strings.ReplaceAll(fmt.Sprint(m.Params[p].Shape), " ", ", ")))
		}
		for _, c := range m.RegisteredChildren(id) {
			walk(c)
		}
	}
	walk(0)
	return out
}
