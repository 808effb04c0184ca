package torchgen

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/ir"
)

// bookkeepingModel names its modules after what the harness's Node once
// kept as attributes (issue 28, M3): compute, ext, outs, fqn, exec.
const bookkeepingModel = `
[model]
dtype = "fp32"
[train]
seq_len = 4
[cluster]
gpu = "h100-sxm"
world_size = 2
[policy]
units = "blocks"
[[module]]
name = "compute"
kind = "embedding"
num = 33
dim = 8
[[module]]
name = "ext"
repeat = 2
block = "b"
[[module]]
name = "outs"
kind = "norm"
dim = 8
[[module]]
name = "fqn"
kind = "linear"
in = 8
out = 33
[[block.b.module]]
name = "exec"
kind = "norm"
dim = 8
[[block.b.module]]
name = "exec_order"
kind = "mlp"
dim = 8
hidden = 12
`

// TestTorchNames: a name every nn.Module already has as an attribute is
// refused by emit with a message naming it; the harness's own bookkeeping
// names are ordinary names.
func TestTorchNames(t *testing.T) {
	for _, name := range []string{"training", "forward", "cuda", "parameters", "unshard", "_modules", "__init__"} {
		src := strings.Replace(bookkeepingModel, `name = "outs"`, fmt.Sprintf("name = %q", name), 1)
		m, err := ir.Load("m.toml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := BuildModel(m); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("module %s: PyTorch cannot name", name)) {
			t.Errorf("module %q: BuildModel = %v, want it refused by name", name, err)
		}
	}
	m, err := ir.Load("m.toml", []byte(bookkeepingModel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BuildModel(m); err != nil {
		t.Errorf("the bookkeeping names: %v", err)
	}
}

// TestBookkeepingNamesUnderTorch runs the model whose modules are named
// compute, ext, outs, fqn and exec under real FSDP2: the harness builds
// it, applies the plan and matches it (it raised KeyError before).
func TestBookkeepingNamesUnderTorch(t *testing.T) {
	py := needTorch(t)
	s, p := planSpec(t, "bookkeeping.toml", bookkeepingModel)
	recs, err := Launch(py, s, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if bad := Compare(p, recs); len(bad) > 0 {
		t.Errorf("FSDP2 differs from the plan:\n%s", strings.Join(bad, "\n"))
	}
}
