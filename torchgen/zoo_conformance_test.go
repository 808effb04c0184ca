package torchgen

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/internal/zootest"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// The zoo under real FSDP2: every zoo model, its TOML text scaled down by
// edits (layers, widths, vocabularies, world size) so a case runs in
// seconds, keeping what the model's structure decides: ties, the frozen
// LoRA base, experts, the encoder-decoder dataflow, explicit units, HSDP,
// accumulation, mixed precision.

// scale replaces the value of key on every line that sets key = from: a
// module's width, a vocabulary, a head count, wherever it is set.
func scale(key, from, to string) zootest.Edit {
	re := regexp.MustCompile(`(?m)^(\s*` + regexp.QuoteMeta(key) + `\s*=\s*)` + regexp.QuoteMeta(from) + `(\s|#|$)`)
	return func(src string) string {
		return re.ReplaceAllString(src, "${1}"+strings.ReplaceAll(to, "$", "$$")+"${2}")
	}
}

type zooCase struct {
	model string
	edits []zootest.Edit
	// mismatch, when set, is a deliberate difference listed in
	// docs/semantics.md: the run must report it.
	mismatch string
}

// Shared by the Llama-shaped models: 2 layers of width 16, 4 query and 2
// key/value heads (GQA kept), a 37-token vocabulary, 4-token sequences.
func llamaEdits(dim, heads, kv, hidden, vocab string, more ...zootest.Edit) []zootest.Edit {
	return append([]zootest.Edit{
		scale("dim", dim, "16"), scale("in", dim, "16"), scale("heads", heads, "4"), scale("kv_heads", kv, "2"),
		scale("hidden", hidden, "24"), scale("num", vocab, "37"), scale("out", vocab, "37"),
		zootest.Layers(2), zootest.Train("seq_len", "4"),
	}, more...)
}

var zooCases = []zooCase{
	{model: "gpt2-124m", edits: []zootest.Edit{ // tied lm_head, wte + wpe read by the first block, accumulation
		scale("num", "50257", "37"), scale("out", "50257", "37"), scale("num", "1024", "6"), scale("dim", "768", "8"), scale("in", "768", "8"),
		scale("hidden", "3072", "12"), scale("heads", "12", "2"), zootest.Layers(2), zootest.Train("seq_len", "4"),
		zootest.Train("micro_batch", "1"), zootest.Cluster("world_size", "2"),
	}},
	{model: "llama3-8b", edits: llamaEdits("4096", "32", "8", "14336", "128256", zootest.Cluster("world_size", "2"))},
	{model: "llama3-8b-torchtitan", edits: llamaEdits("4096", "32", "8", "14336", "128256", // per-op selective checkpointing, micro-batch 2
		zootest.Cluster("world_size", "2"))},
	{model: "llama3-8b-lora", edits: llamaEdits("4096", "32", "8", "14336", "128256", // frozen bf16 base, fp32-reduced adapters
		scale("lora_rank", "16", "2"), zootest.Train("grad_accum", "2"), zootest.Cluster("world_size", "3"))},
	{model: "llama3-70b", edits: llamaEdits("8192", "64", "8", "28672", "128256", // two nodes
		zootest.Cluster("nodes", "2"), zootest.Cluster("gpus_per_node", "2"), zootest.Train("grad_accum", "2"))},
	{model: "llama3.1-405b", edits: llamaEdits("16384", "128", "8", "53248", "128256", // HSDP, explicit units, bf16 reduce
		zootest.Cluster("world_size", "4"), zootest.Cluster("mesh", "{ replicate = 2, shard = 2 }"), zootest.Cluster("gpus_per_node", "2"))},
	{model: "mixtral-8x7b", edits: llamaEdits("4096", "32", "8", "14336", "32000", // experts
		scale("experts", "8", "3"), zootest.Cluster("nodes", "1"), zootest.Cluster("gpus_per_node", "2"), zootest.Train("grad_accum", "2"))},
	{model: "t5-base", edits: []zootest.Edit{ // encoder-decoder, cross-attention, three-way tie
		scale("num", "32128", "37"), scale("out", "32128", "37"), scale("dim", "768", "8"), scale("in", "768", "8"), scale("kv_dim", "768", "8"),
		scale("heads", "12", "2"), scale("head_dim", "64", "4"), scale("dim", "12", "2"), scale("hidden", "3072", "12"),
		zootest.Layers(2), zootest.Train("seq_len", "4"), scale("kv_seq_len", "512", "4"), zootest.Train("micro_batch", "1"),
		zootest.Cluster("world_size", "2"),
	}},
	{model: "vit-b16", edits: []zootest.Edit{ // root-level parameters, a conv patch embedding
		scale("shape", "[1, 1, 768]", "[1, 1, 8]"), scale("shape", "[1, 197, 768]", "[1, 5, 8]"), zootest.Train("seq_len", "5"),
		scale("out", "768", "8"), scale("kernel", "[16, 16]", "[2, 2]"), scale("stride", "[16, 16]", "[2, 2]"), scale("input_size", "[224, 224]", "[4, 4]"),
		scale("dim", "768", "8"), scale("in", "768", "8"), scale("heads", "12", "2"), scale("hidden", "3072", "12"), scale("out", "1000", "7"),
		zootest.Layers(2), zootest.Train("micro_batch", "1"), zootest.Cluster("world_size", "3"),
	}},
}

// zooText is the zoo model's file name and its text after the edits;
// an edit that changes nothing fails, so a changed zoo file cannot
// silently stop being scaled.
func zooText(name string, edits ...zootest.Edit) (file, text string, err error) {
	file, text, err = zootest.Text(name)
	if err != nil {
		return "", "", err
	}
	for i, e := range edits {
		next := e(text)
		if next == text {
			return "", "", fmt.Errorf("edit %d changes nothing: the zoo file no longer has what it edits", i)
		}
		text = next
	}
	return file, text, nil
}

// zooPlan scales, loads, plans and builds one case.
func zooPlan(c zooCase) (*ir.Model, *schedule.Plan, *Spec, error) {
	file, text, err := zooText(c.model, c.edits...)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := ir.Load(file, []byte(text))
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := Build(m, p)
	return m, p, s, err
}

func TestZooCasesCoverTheZoo(t *testing.T) {
	have := map[string]bool{}
	for _, c := range zooCases {
		have[c.model] = true
		// Every case plans and builds here, so only the run needs torch.
		if _, _, _, err := zooPlan(c); err != nil {
			t.Errorf("%s: %v", c.model, err)
		}
	}
	for _, name := range plans.Names() {
		if !have[name] {
			t.Errorf("zoo model %s has no conformance case", name)
		}
	}
}
