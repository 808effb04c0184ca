package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyNet is a PyTorch factory of a plain nn.Module with
// _no_split_modules: accelerate wraps its Blocks, finds no embeddings to
// carve (no get_input_embeddings) and shards the final LayerNorm as its
// tail.
const tinyNet = `import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Linear(d, d)

    def forward(self, x):
        return x + self.ff(self.norm(x))


class Net(nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self, d=16, n=2, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, d)
        self.layers = nn.ModuleList([Block(d) for _ in range(n)])
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, v)

    def forward(self, ids):
        h = self.emb(ids)
        for layer in self.layers:
            h = layer(h)
        return self.out(self.norm(h))


def build():
    return Net()
`

// TestImportAccelerateFactory: import accelerate with a PyTorch factory
// builds it with the torch root's torch (import torch's importer) and
// decides with its Python classes and _no_split_modules.
// FSDPC_TORCH_CONFORMANCE=1 turns it on.
func TestImportAccelerateFactory(t *testing.T) {
	if testing.Short() || os.Getenv("FSDPC_TORCH_CONFORMANCE") != "1" {
		t.Skip("runs the PyTorch importer: set FSDPC_TORCH_CONFORMANCE=1")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("tinynet.py", []byte(tinyNet), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "distributed_type: FSDP\nnum_processes: 2\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 2\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  fsdp_activation_checkpointing: true\n"
	if err := os.WriteFile("a.yaml", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("import", "accelerate", "a.yaml", "--model", "tinynet:build", "--seq-len", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`units = ["layers.*", ["norm"]]`, "TRANSFORMER_BASED_WRAP: Block", "Module classes: Net as built by `fsdpc import torch`", "checkpoint = true"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "m.toml"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("plan", "m.toml", "-o", "p.bin"); code != 0 {
		t.Errorf("plan: exit %d: %s", code, errOut)
	}
}
