package planner

import (
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

func TestZooPlansVerify(t *testing.T) {
	for _, name := range plans.Names() {
		m := loadZoo(t, name)
		p, err := Plan(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := schedule.Verify(p); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		sim := mustSimulate(t, p, schedule.NewModel(p))
		t.Logf("%-16s step %.3fs compute %.3fs exposed %.3fs cpu %.3fs peak %s reserved %s budget %s", name, sim.StepTime, sim.ComputeTime, sim.ExposedComm, sim.CPUTime,
			ir.FormatBytes(sim.PeakAllocated), ir.FormatBytes(sim.PeakReserved), ir.FormatBytes(p.Cluster.MemoryBudget))
	}
}

func TestPeakBreakdown405(t *testing.T) {
	p, _ := Plan(loadZoo(t, "llama3.1-405b"), Options{})
	sim := mustSimulate(t, p, schedule.NewModel(p))
	t.Logf("peak at op %d (%s %s)", sim.PeakOp, p.Ops[sim.PeakOp].Kind, p.Ops[sim.PeakOp].Phase)
	for i, b := range schedule.LiveAt(p, sim.PeakOp) {
		if i > 25 {
			break
		}
		t.Logf("  %-60s %s", p.Buffers[b].Name, ir.FormatBytes(p.Buffers[b].Bytes))
	}
}
