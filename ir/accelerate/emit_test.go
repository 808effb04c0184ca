package accelerate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// planOf imports an accelerate config for the tiny Llama and plans it.
func planOf(t *testing.T, name string, config []byte) (*schedule.Plan, *Model) {
	t.Helper()
	hfSrc, err := os.ReadFile("testdata/tiny-llama.json")
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := Import(Input{ConfigFile: name, Config: config, ModelArg: "tiny-llama.json", HFFile: "tiny-llama.json", HF: hfSrc})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m, err := ir.Load("tiny-llama.toml", text)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mm, err := FromTransformers(m, "llama")
	if err != nil {
		t.Fatal(err)
	}
	return p, mm
}

// TestRoundTrip: import accelerate → plan → emit accelerate → import
// accelerate gives the same policy: the same units (modules), the same
// resolved settings of each, the same checkpointed modules and world;
// and accelerate's keys say it all (no comment for apply_plan).
func TestRoundTrip(t *testing.T) {
	configs, _ := filepath.Glob("testdata/*.yaml")
	for _, cfg := range configs {
		name := filepath.Base(cfg)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p1, mm1 := planOf(t, name, src)
			yaml, err := Emit(p1, mm1, "plan.bin")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(yaml, "apply_plan covers") {
				t.Errorf("the plan of %s needs more than accelerate's keys:\n%s", name, yaml)
			}
			p2, mm2 := planOf(t, "emitted.yaml", []byte(yaml))
			if len(p1.Groups) != len(p2.Groups) {
				t.Fatalf("%d groups, %d after the round trip", len(p1.Groups), len(p2.Groups))
			}
			for i := range p1.Groups {
				a, b := p1.Groups[i], p2.Groups[i]
				if !reflect.DeepEqual(a.Modules, b.Modules) || a.Policy != b.Policy {
					t.Errorf("group %d: %q %+v, after the round trip %q %+v", i, a.Modules, a.Policy, b.Modules, b.Policy)
				}
			}
			for i := range mm1.IR.Modules {
				if mm1.IR.Modules[i].Checkpoint != mm2.IR.Modules[i].Checkpoint {
					t.Errorf("%s: checkpoint %v, after the round trip %v", mm1.IR.Modules[i].Name, mm1.IR.Modules[i].Checkpoint, mm2.IR.Modules[i].Checkpoint)
				}
			}
			if p1.Cluster.WorldSize != p2.Cluster.WorldSize || p1.Cluster.GPUsPerNode != p2.Cluster.GPUsPerNode {
				t.Errorf("world %d×%d, after the round trip %d×%d", p1.Cluster.WorldSize, p1.Cluster.GPUsPerNode, p2.Cluster.WorldSize, p2.Cluster.GPUsPerNode)
			}
		})
	}
}

// TestEmitBeyondKeys: a plan accelerate's keys cannot say (one layer kept
// gathered, explicit prefetch, a divide factor, a reduce dtype of its own,
// a unit no wrap policy makes) is written with each of those as a comment
// naming apply_plan; the golden is testdata/beyond.yaml.golden.
func TestEmitBeyondKeys(t *testing.T) {
	hfSrc, err := os.ReadFile("testdata/tiny-llama.json")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/fsdp2-transformer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := Import(Input{ConfigFile: "fsdp2-transformer.yaml", Config: src, ModelArg: "tiny-llama.json", HFFile: "tiny-llama.json", HF: hfSrc})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, edit string
		want       []string
	}{
		{"beyond", `
[[policy.override]]
match = "model.layers.1"
reshard_after_forward = false
prefetch_forward = 1
gradient_divide_factor = 4.0
reduce_dtype = "fp32"
`, []string{"unit model.layers.1: reshard_after_forward = false", "explicit prefetch (forward 1", "gradient division", "reduce_dtype fp32", "fsdpc.apply_plan(model"}},
		{"units", "", []string{"units: no accelerate wrap policy makes the plan's units"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := string(text) + tc.edit
			if tc.name == "units" {
				edited = strings.Replace(edited, `units = ["model.embed_tokens", "model.layers.*", ["model.norm", "lm_head"]]`, `units = ["model.layers.*", ["model.norm", "lm_head"]]`, 1)
			}
			m, err := ir.Load("m.toml", []byte(edited))
			if err != nil {
				t.Fatal(err)
			}
			p, err := planner.Plan(m, planner.Options{})
			if err != nil {
				t.Fatal(err)
			}
			mm, err := FromTransformers(m, "llama")
			if err != nil {
				t.Fatal(err)
			}
			yaml, err := Emit(p, mm, "plan.bin")
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(yaml, w) {
					t.Errorf("no %q in\n%s", w, yaml)
				}
			}
			if _, err := Parse("emitted.yaml", []byte(yaml)); err != nil {
				t.Errorf("the emitted config does not read back: %v", err)
			}
			golden := filepath.Join("testdata", tc.name+".yaml.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./ir/accelerate -update)", err)
			}
			if string(want) != yaml {
				t.Errorf("%s is out of date: run go test ./ir/accelerate -run TestEmitBeyondKeys -update and review the diff", golden)
			}
		})
	}
}
