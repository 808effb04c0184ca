package torchgen

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

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

// edit replaces the value of key on every line that sets key = from.
type edit struct{ key, from, to string }

type zooCase struct {
	model string
	edits []edit
	// mismatch, when set, is a deliberate difference listed in
	// docs/semantics.md: the run must report it.
	mismatch string
}

// Shared by the Llama-shaped models: 2 layers of width 16, 4 query and 2
// key/value heads (GQA kept), a 37-token vocabulary, 4-token sequences.
func llamaEdits(dim, heads, kv, hidden, vocab, layers, seq string) []edit {
	return []edit{
		{"dim", dim, "16"}, {"in", dim, "16"}, {"heads", heads, "4"}, {"kv_heads", kv, "2"},
		{"hidden", hidden, "24"}, {"num", vocab, "37"}, {"out", vocab, "37"},
		{"repeat", layers, "2"}, {"seq_len", seq, "4"},
	}
}

var zooCases = []zooCase{
	{model: "gpt2-124m", edits: []edit{ // tied lm_head, wte + wpe read by the first block, accumulation
		{"num", "50257", "37"}, {"out", "50257", "37"}, {"num", "1024", "6"}, {"dim", "768", "8"}, {"in", "768", "8"},
		{"hidden", "3072", "12"}, {"heads", "12", "2"}, {"repeat", "12", "2"}, {"seq_len", "1024", "4"},
		{"micro_batch", "32", "1"}, {"world_size", "8", "2"},
	}},
	{model: "llama3-8b", edits: append(llamaEdits("4096", "32", "8", "14336", "128256", "32", "8192"),
		edit{"world_size", "8", "2"})},
	{model: "llama3-8b-torchtitan", edits: append(llamaEdits("4096", "32", "8", "14336", "128256", "32", "8192"), // per-op selective checkpointing, micro-batch 2
		edit{"world_size", "8", "2"})},
	{model: "llama3-8b-lora", edits: append(llamaEdits("4096", "32", "8", "14336", "128256", "32", "8192"), // frozen bf16 base, fp32-reduced adapters
		edit{"lora_rank", "16", "2"}, edit{"grad_accum", "4", "2"}, edit{"world_size", "8", "3"})},
	{model: "llama3-70b", edits: append(llamaEdits("8192", "64", "8", "28672", "128256", "80", "8192"), // two nodes
		edit{"nodes", "8", "2"}, edit{"gpus_per_node", "8", "2"}, edit{"grad_accum", "8", "2"})},
	{model: "llama3.1-405b", edits: append(llamaEdits("16384", "128", "8", "53248", "128256", "126", "4096"), // HSDP, explicit units, bf16 reduce
		edit{"world_size", "512", "4"}, edit{"mesh", "{ replicate = 2, shard = 256 }", "{ replicate = 2, shard = 2 }"},
		edit{"gpus_per_node", "8", "2"})},
	{model: "mixtral-8x7b", edits: append(llamaEdits("4096", "32", "8", "14336", "32000", "32", "8192"), // experts
		edit{"experts", "8", "3"}, edit{"nodes", "8", "1"}, edit{"gpus_per_node", "8", "2"}, edit{"grad_accum", "4", "2"})},
	{model: "t5-base", edits: []edit{ // encoder-decoder, cross-attention, three-way tie
		{"num", "32128", "37"}, {"out", "32128", "37"}, {"dim", "768", "8"}, {"in", "768", "8"}, {"kv_dim", "768", "8"},
		{"heads", "12", "2"}, {"head_dim", "64", "4"}, {"dim", "12", "2"}, {"hidden", "3072", "12"},
		{"repeat", "12", "2"}, {"seq_len", "512", "4"}, {"kv_seq_len", "512", "4"}, {"micro_batch", "16", "1"},
		{"world_size", "8", "2"},
	}},
	{model: "vit-b16", edits: []edit{ // root-level parameters, a conv patch embedding
		{"shape", "[1, 1, 768]", "[1, 1, 8]"}, {"shape", "[1, 197, 768]", "[1, 5, 8]"}, {"seq_len", "197", "5"},
		{"out", "768", "8"}, {"kernel", "[16, 16]", "[2, 2]"}, {"stride", "[16, 16]", "[2, 2]"}, {"input_size", "[224, 224]", "[4, 4]"},
		{"dim", "768", "8"}, {"in", "768", "8"}, {"heads", "12", "2"}, {"hidden", "3072", "12"}, {"out", "1000", "7"},
		{"repeat", "12", "2"}, {"micro_batch", "128", "1"}, {"world_size", "8", "3"},
	}},
}

// scaleZoo applies the edits to a zoo model's text; an edit that matches
// no line fails, so a changed zoo file cannot silently stop being scaled.
func scaleZoo(src string, edits []edit) (string, error) {
	for _, e := range edits {
		re := regexp.MustCompile(`(?m)^(\s*` + regexp.QuoteMeta(e.key) + `\s*=\s*)` + regexp.QuoteMeta(e.from) + `(\s|#|$)`)
		if !re.MatchString(src) {
			return "", fmt.Errorf("no line sets %s = %s", e.key, e.from)
		}
		src = re.ReplaceAllString(src, "${1}"+strings.ReplaceAll(e.to, "$", "$$")+"${2}")
	}
	return src, nil
}

// zooPlan scales, loads, plans and builds one case.
func zooPlan(c zooCase) (*ir.Model, *schedule.Plan, *Spec, error) {
	src, file, ok := plans.Source(c.model)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s is not a zoo model", c.model)
	}
	scaled, err := scaleZoo(string(src), c.edits)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := ir.Load(file, []byte(scaled))
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
