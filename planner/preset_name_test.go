package planner

import (
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// TestPresetGPUNamed: a preset GPU given a name of its own keeps its chip,
// so its fitted profile and SM count: the same step time as the preset
// under its own name (it was 6.2% faster, its fitted GEMM efficiency and
// wave quantisation dropped for an unknown name).
func TestPresetGPUNamed(t *testing.T) {
	src, file, _ := plans.Source("llama3-8b")
	named := strings.Replace(string(src), `gpu = "h100-sxm"`, `gpu = { preset = "h100-sxm", name = "our H100s" }`, 1)
	if named == string(src) {
		t.Fatal("llama3-8b's model file no longer names gpu = \"h100-sxm\"")
	}
	step := func(src string) (*schedule.Plan, float64) {
		m, err := ir.Load(file, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Plan(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		sim, err := schedule.Simulate(p, schedule.NewModel(p))
		if err != nil {
			t.Fatal(err)
		}
		return p, sim.StepTime
	}
	p, got := step(named)
	_, want := step(string(src))
	if p.Cluster.GPU != "our H100s" || p.Cluster.Preset != "h100-sxm" || p.Cluster.Chip() != "NVIDIA H100 SXM5 80GB" {
		t.Errorf("cluster GPU %q preset %q chip %q", p.Cluster.GPU, p.Cluster.Preset, p.Cluster.Chip())
	}
	if got != want {
		t.Errorf("named preset GPU: step %.6f s, the preset's own %.6f s", got, want)
	}
}
