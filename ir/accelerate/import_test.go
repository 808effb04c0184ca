package accelerate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestImportGolden imports every testdata/*.yaml with the tiny Llama of
// tiny-llama.json and compares the model file with NAME.toml.golden; the
// file must plan, and its plan's groups must be accelerate's fully_shard
// calls.
func TestImportGolden(t *testing.T) {
	configs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(configs) == 0 {
		t.Fatalf("no testdata/*.yaml: %v", err)
	}
	hfSrc, err := os.ReadFile("testdata/tiny-llama.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range configs {
		name := strings.TrimSuffix(filepath.Base(cfg), ".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			text, notes, err := Import(Input{ConfigFile: filepath.Base(cfg), Config: src, ModelArg: "tiny-llama.json", HFFile: "tiny-llama.json", HF: hfSrc})
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			got.Write(text)
			for _, n := range notes {
				got.WriteString("# note: " + n + "\n")
			}
			golden := filepath.Join("testdata", name+".toml.golden")
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./ir/accelerate -update)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s is out of date: run go test ./ir/accelerate -run TestImportGolden -update and review the diff\ngot:\n%s", golden, got.String())
			}
			m, err := ir.Load(name+".toml", text)
			if err != nil {
				t.Fatal(err)
			}
			p, err := planner.Plan(m, planner.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c, _ := Parse(name, src)
			mm, err := FromTransformers(m, "llama")
			if err != nil {
				t.Fatal(err)
			}
			d, err := Decide(c, mm)
			if err != nil {
				t.Fatal(err)
			}
			want2 := map[string]bool{}
			for _, call := range d.Calls {
				var names []string
				for _, id := range call {
					names = append(names, m.Modules[id].Name)
				}
				want2[strings.Join(names, ",")] = true
			}
			for _, g := range p.Groups {
				key := strings.Join(g.Modules, ",")
				if !want2[key] {
					t.Errorf("the plan has a group %q that accelerate does not make", key)
				}
				delete(want2, key)
			}
			for k := range want2 {
				t.Errorf("accelerate calls fully_shard on %q, which the plan has no group for", k)
			}
		})
	}
}
