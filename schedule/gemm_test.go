package schedule_test

import (
	"math"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
	. "github.com/fsdpc/fsdpc/schedule"
)

// a100 is a cost model with the A100's 108 SMs and round figures.
func a100() *Model {
	hw := Hardware{PeakFLOPS: make([]float64, 16), HBMBandwidth: 2e12, SMs: 108}
	hw.PeakFLOPS[ir.BF16] = 312e12
	return &Model{HW: hw, Cal: hardware.DefaultCalibration}
}

// TestWaveUtilization: output tiles of 256×128 run one per SM; a last
// partial wave and partial edge tiles cost whole ones.
func TestWaveUtilization(t *testing.T) {
	m := a100()
	for _, tc := range []struct {
		name       string
		rows, cols int64
		want       float64
	}{
		{"one full wave", 108 * 256, 128, 1},
		{"either orientation", 128, 108 * 256, 1},
		{"one tile more: two waves", 109 * 256, 128, 109.0 / 216},
		{"less than a wave: split over K", 128, 128, 1},
		{"many waves", 8192, 8192, 8192.0 * 8192 / (19 * 108 * 256 * 128)},
		{"1.5 waves, edge tiles", 162*256 - 100, 128, (162*256 - 100) / (2 * 108 * 256.0)},
	} {
		if got := m.WaveUtilization(tc.rows, tc.cols); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %d×%d uses %.6f of the SMs, want %.6f", tc.name, tc.rows, tc.cols, got, tc.want)
		}
	}
	m.HW.SMs = 0
	if got := m.WaveUtilization(109*256, 128); got != 1 {
		t.Errorf("unknown SM count: utilization %g, want 1", got)
	}
}

// TestGEMMTime: a big multiply runs at MaxEfficiency over its waves; one
// with a small N (a LoRA adapter) is bound by reading its operands.
func TestGEMMTime(t *testing.T) {
	m := a100()
	launch := m.Cal.Launch
	big := ir.GEMM{M: 108 * 256, N: 128 * 4, K: 8192, Count: 1}
	want := big.FLOPs()/(312e12*m.Cal.MaxEfficiency) + launch
	if got := m.GEMM(big, ir.BF16); math.Abs(got-want) > 1e-12 {
		t.Errorf("full waves: %g s, want %g s", got, want)
	}
	lora := ir.GEMM{M: 8192, N: 16, K: 4096, Count: 1}
	want = float64(8192*4096+4096*16+8192*16) * 2 / (2e12 * m.Cal.MemoryEfficiency)
	if got := m.GEMM(lora, ir.BF16); math.Abs(got-launch-want) > 1e-12 {
		t.Errorf("small N: %g s, want its traffic %g s plus a launch", got, want)
	}
}

// TestKernelShapes: a compute op with shapes is charged per shape, and
// FLOPs it gives no shape for at the flat efficiency.
func TestKernelShapes(t *testing.T) {
	m := a100()
	g := ir.GEMM{M: 4096, N: 4096, K: 4096, Count: 3}
	o := &Op{Kind: OpForward, DType: ir.BF16, FLOPs: g.FLOPs()}
	if got, want := m.Kernel(o, []ir.GEMM{g}, 0), 3*m.GEMM(g, ir.BF16); math.Abs(got-want) > 1e-12 {
		t.Errorf("shaped op: %g s, want %g s", got, want)
	}
	o.FLOPs += 1e12
	if got, want := m.Kernel(o, []ir.GEMM{g}, 0), 3*m.GEMM(g, ir.BF16)+m.Compute(1e12, 0, ir.BF16); math.Abs(got-want) > 1e-12 {
		t.Errorf("op with unshaped FLOPs: %g s, want %g s", got, want)
	}
}

// TestCheckGEMMs: Check refuses shapes a planner never writes.
func TestCheckGEMMs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gemms []ir.GEMM
		want  string
	}{
		{"zero dimension", []ir.GEMM{{M: 0, N: 60, K: 50, Count: 1}}, "below 1"},
		{"out of order", []ir.GEMM{{M: 2, N: 1, K: 1, Count: 1}, {M: 1, N: 1, K: 1, Count: 1}}, "out of order"},
		{"repeated", []ir.GEMM{{M: 1, N: 1, K: 1, Count: 1}, {M: 1, N: 1, K: 1, Count: 1}}, "out of order"},
		{"too many FLOPs", []ir.GEMM{{M: 250, N: 60, K: 50, Count: 2}}, "more than the op's"},
	} {
		p := tinyPlan()
		placed := false
		for i := range p.Ops {
			if p.Ops[i].Kind == OpForward {
				p.SetOpGEMMs(&p.Ops[i], tc.gemms)
				placed = true
				break
			}
		}
		if !placed {
			t.Fatal("tinyPlan has no forward op")
		}
		if err := Verify(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	p := tinyPlan()
	for i := range p.Ops {
		if p.Ops[i].Kind == OpAllGather {
			p.SetOpGEMMs(&p.Ops[i], []ir.GEMM{{M: 1, N: 1, K: 1, Count: 1}})
			break
		}
	}
	if err := Verify(p); err == nil || !strings.Contains(err.Error(), "computes nothing") {
		t.Errorf("an all-gather with shapes: Verify = %v", err)
	}
}

// TestClockRatio: a GPU held at a lower SM clock computes slower in
// proportion and moves memory as fast.
func TestClockRatio(t *testing.T) {
	m := a100()
	g := ir.GEMM{M: 108 * 256, N: 128 * 4, K: 8192, Count: 1}
	full := m.GEMM(g, ir.BF16) - m.Cal.Launch
	copyFull := m.Copy(1 << 30)
	m.Cal.ClockRatio = 0.8
	if got := m.GEMM(g, ir.BF16) - m.Cal.Launch; math.Abs(got-full/0.8) > 1e-12 {
		t.Errorf("at 80%% clock a GEMM takes %g s, want %g s", got, full/0.8)
	}
	if m.Copy(1<<30) != copyFull {
		t.Error("the clock changed a copy's time")
	}
}
