package ir

import (
	"fmt"
	"strings"
	"testing"
)

const blocksModel = `
[train]
seq_len = 64
checkpointing = "full"

[cluster]
gpu = "h100-sxm"
world_size = 8

[[module]]
name = "layers"
repeat = 5
blocks = ["dense", "moe"]

[block.dense]
[[block.dense.module]]
name = "mlp"
kind = "mlp"
dim = 16
hidden = 64

[block.moe]
[[block.moe.module]]
name = "mlp"
kind = "moe"
dim = 16
hidden = 32
experts = 4
top_k = 2
`

// TestBlocksPattern: a repeat's blocks cycle over its instances, each
// instance is a checkpoint region, and the holder is marked varied.
func TestBlocksPattern(t *testing.T) {
	m, err := Load("blocks.toml", []byte(blocksModel))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]Kind{}
	regions := 0
	for i := range m.Modules {
		mod := &m.Modules[i]
		kinds[mod.Name] = mod.Kind
		if mod.Checkpoint {
			regions++
		}
		if mod.Name == "layers" && (!mod.Varied || mod.Repeat != 5) {
			t.Errorf("layers: Varied %v, Repeat %d; want true, 5", mod.Varied, mod.Repeat)
		}
	}
	for name, want := range map[string]Kind{"layers.0.mlp": KindMLP, "layers.1.mlp": KindMoE, "layers.2.mlp": KindMLP, "layers.3.mlp": KindMoE, "layers.4.mlp": KindMLP} {
		if kinds[name] != want {
			t.Errorf("%s is %v, want %v", name, kinds[name], want)
		}
	}
	if regions != 5 {
		t.Errorf("%d checkpoint regions, want one per instance (5)", regions)
	}
	// dense: 3·16·64; moe: 4·16 router + 4·3·16·32.
	if got, want := m.Stats().Params, int64(3*3*16*64+2*(4*16+4*3*16*32)); got != want {
		t.Errorf("params = %d, want %d", got, want)
	}
}

func TestBlocksErrors(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{`blocks = ["dense", "moe"]`, `blocks = ["dense", "moe", "x", "y", "z", "w"]`, "must name 1 to repeat (5) blocks, not 6"},
		{`blocks = ["dense", "moe"]`, `blocks = []`, "must name 1 to repeat (5) blocks, not 0"},
		{`repeat = 5` + "\n", ``, "has blocks but no repeat"},
		{`blocks = ["dense", "moe"]`, `blocks = ["dense", "moe"]` + "\nblock = \"dense\"", "has blocks and also block"},
		{`blocks = ["dense", "moe"]`, `blocks = ["dense", "mo"]`, `unknown block "mo"; did you mean "moe"?`},
	} {
		_, err := Load("blocks.toml", []byte(strings.Replace(blocksModel, tc.from, tc.to, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.to, err, tc.want)
		}
	}
}

// TestCheckpointingMatchesNothing: a checkpointing mode with no repeated
// module to apply to is a warning naming the key, not a silent "none".
func TestCheckpointingMatchesNothing(t *testing.T) {
	src := strings.Replace(blocksModel, "repeat = 5\nblocks = [\"dense\", \"moe\"]", `block = "moe"`, 1)
	src = src[:strings.Index(src, "[block.dense]")] + src[strings.Index(src, "[block.moe]"):]
	m, err := Load("flat.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !m.CheckpointingUnused() || len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0].String(), `flat.toml:4:1: warning: train.checkpointing: train.checkpointing = "full" matches no module`) {
		t.Errorf("CheckpointingUnused %v, warnings %v", m.CheckpointingUnused(), m.Warnings)
	}
	for _, s := range []string{blocksModel, strings.Replace(src, `checkpointing = "full"`, `checkpointing = "none"`, 1)} {
		m, err := Load("ok.toml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if m.CheckpointingUnused() || len(m.Warnings) != 0 {
			t.Errorf("CheckpointingUnused %v, warnings %v", m.CheckpointingUnused(), m.Warnings)
		}
	}
}

// TestFusedExpertsAndSinks: transformers 5's fused expert tensors, in both
// layouts, with gpt-oss's biases, and the attention sinks.
func TestFusedExpertsAndSinks(t *testing.T) {
	const head = "[train]\nseq_len = 64\n[cluster]\ngpu = \"h100-sxm\"\nworld_size = 8\n[[module]]\nname = \"m\"\n"
	for _, tc := range []struct {
		attrs string
		want  []string
	}{
		{`kind = "moe"` + "\ndim = 16\nhidden = 32\nexperts = 4\ntop_k = 2\ngrouped = true\nfused_gate_up = true\nexperts_first = true\nnames = { gate_up = \"gate_up_proj\", down = \"down_proj\" }",
			[]string{"m.experts.gate_up_proj [4 64 16]", "m.experts.down_proj [4 16 32]", "m.gate.weight [4 16]"}},
		{`kind = "moe"` + "\ndim = 16\nhidden = 32\nexperts = 4\ntop_k = 2\ngrouped = true\nfused_gate_up = true\ntransposed = true\nbias = true\nrouter_bias = true\nnames = { router = \"router\", gate_up = \"gate_up_proj\", down = \"down_proj\" }",
			[]string{"m.router.weight [4 16]", "m.router.bias [4]", "m.experts.gate_up_proj [4 16 64]", "m.experts.gate_up_proj_bias [4 64]", "m.experts.down_proj [4 32 16]", "m.experts.down_proj_bias [4 16]"}},
		{`kind = "attention"` + "\ndim = 16\nheads = 4\nsinks = true",
			[]string{"m.sinks [4]", "m.wq.weight [16 16]", "m.wk.weight [16 16]", "m.wv.weight [16 16]", "m.wo.weight [16 16]"}},
	} {
		m, err := Load("x.toml", []byte(head+tc.attrs))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range m.Params {
			got = append(got, fmt.Sprintf("%s %v", p.Name, p.Shape))
		}
		if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
			t.Errorf("params %v, want %v", got, tc.want)
		}
		if m.Stats().Params == 0 || m.Modules[1].Cost.FlopsFwd == 0 {
			t.Errorf("no cost: %+v", m.Modules[1].Cost)
		}
	}
	_, err := Load("x.toml", []byte(head+`kind = "moe"`+"\ndim = 16\nhidden = 32\nexperts = 4\ntop_k = 2\nfused_gate_up = true"))
	if err == nil || !strings.Contains(err.Error(), "set grouped = true") {
		t.Errorf("fused without grouped: %v", err)
	}
}
