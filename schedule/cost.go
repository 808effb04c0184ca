package schedule

import (
	"fmt"
	"math"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/ir"
)

// The cost model: how long each operation takes on the target hardware.
// docs/cost-model.md states the equations and where the constants come
// from; the constants themselves, with their sources, are package
// hardware's (hardware.Calibration holds every one, so a measured run can
// replace them).

// Hardware is what the cost model reads of the target.
type Hardware struct {
	PeakFLOPS          []float64 // dense peak per ir.DType, FLOP/s
	HBMBandwidth       float64   // bytes/s
	IntraNodeBandwidth float64   // per GPU, one direction, bytes/s
	InterNodeBandwidth float64
	HostBandwidth      float64 // host <-> device, bytes/s
	GPUsPerNode        int
	// SMs is the GPU's streaming multiprocessor count (hardware.GPU.SMs), over
	// which a GEMM's output tiles run in waves; 0 when unknown (no wave
	// quantisation).
	SMs int
}

// Model computes operation durations.
type Model struct {
	HW  Hardware
	Cal hardware.Calibration
}

// NewModel builds the cost model for a plan's cluster: the default
// calibration with the GPU's fitted profile, if it has one, and the
// plan's own profile over it. The plan must be one Verify accepts (the
// planner's, or one read by Decode): its profile names only known
// constants within their ranges, so an error applying it is a bug in
// fsdpc, and it panics.
func NewModel(p *Plan) *Model {
	cal := hardware.CalibrationFor(p.Cluster.Chip())
	if err := ApplyProfile(&cal, p.Cluster.Profile); err != nil {
		panic(fmt.Sprintf("internal error: an unverified plan reached the cost model: %v", err))
	}
	return &Model{HW: p.Cluster.hardware(), Cal: cal}
}

// ApplyProfile sets the constants a plan's profile names (a profile file,
// or the attention kernel's figures, ir.Cluster.Profile) over c. A name
// hardware.ProfileKeys does not list, or a value outside its range, is an
// error.
func ApplyProfile(c *hardware.Calibration, vals []ir.ProfileValue) error {
	for _, v := range vals {
		if err := c.Set(v.Name, v.Value); err != nil {
			return err
		}
	}
	return nil
}

// Kernel is the time of a forward or backward segment o: its GEMMs by
// shape (gemms, the plan's OpGEMMs of o) and any matmul FLOPs without a
// shape at an efficiency that grows with size, or its weight and
// activation traffic if slower; its
// attention core at FlashAttention's efficiency; and its element-wise
// kernels at the share of HBM bandwidth such kernels reach, one after the
// other: forward kernels, and the recompute bytes of a backward's
// ElemBytes (the plan's OpElemRecompute of o), at the forward share,
// gradient kernels at the backward share (Calibration.ElementwiseShares).
func (m *Model) Kernel(o *Op, gemms []ir.GEMM, recompute int64) float64 {
	var t float64
	if len(gemms) == 0 {
		t = m.Compute(o.FLOPs-o.AttnFLOPs, o.Bytes, o.DType)
	} else {
		var shaped float64
		for _, g := range gemms {
			t += float64(g.Count) * m.GEMM(g, o.DType)
			shaped += g.FLOPs()
		}
		// Matmul work the plan gives no shape for (explicit flops).
		if rest := o.FLOPs - o.AttnFLOPs - shaped; rest > 1e-9*shaped {
			t += m.Compute(rest, 0, o.DType)
		}
		t = math.Max(t, float64(o.Bytes)/(m.HW.HBMBandwidth*m.Cal.MemoryEfficiency)+m.Cal.Launch)
	}
	if o.AttnFLOPs > 0 {
		eff := m.Cal.AttentionForward
		if o.Kind == OpBackward {
			eff = m.Cal.AttentionBackward
		}
		if peak := m.peak(o.DType); peak > 0 && eff > 0 && !math.IsInf(peak, 1) {
			t += o.AttnFLOPs / (peak * eff)
		}
	}
	if o.ElemBytes > 0 {
		fwd, bwd := m.Cal.ElementwiseShares()
		forward := min(max(recompute, 0), o.ElemBytes)
		if o.Kind != OpBackward {
			forward = o.ElemBytes
		}
		t += float64(forward)/(m.HW.HBMBandwidth*fwd) + float64(o.ElemBytes-forward)/(m.HW.HBMBandwidth*bwd)
	}
	return t
}

// Compute is the time of a kernel doing flops of work in dtype dt while
// moving bytes through HBM: the slower of its arithmetic at an efficiency
// that grows with size, and its memory traffic.
func (m *Model) Compute(flops float64, bytes int64, dt ir.DType) float64 {
	peak := m.computePeak(dt)
	var arith float64
	if flops > 0 && peak > 0 && !math.IsInf(peak, 1) {
		atPeak := flops / peak
		eff := m.Cal.MaxEfficiency * atPeak / (atPeak + m.Cal.HalfEfficiencyTime)
		arith = flops / (peak * eff)
	}
	mem := float64(bytes) / (m.HW.HBMBandwidth * m.Cal.MemoryEfficiency)
	if arith == 0 && mem == 0 {
		return 0
	}
	return math.Max(arith, mem) + m.Cal.Launch
}

// GEMM is the time of one (M, N, K) matrix multiply in dtype dt: the
// slower of its arithmetic and its memory traffic, plus a launch.
// Arithmetic runs at MaxEfficiency of peak on every SM that has a tile,
// and the output's tiles (GEMMTile, in the orientation that needs fewer
// waves) run in waves of one tile per SM: a last, partial wave costs a
// whole one (wave quantisation), and edge tiles a whole tile (tile
// quantisation). Traffic is reading both operands and writing the output
// once, so a multiply with a small N or K is bound by HBM, not the tensor
// cores ("Math And Memory Bounds" in the guide GEMMTile cites).
func (m *Model) GEMM(g ir.GEMM, dt ir.DType) float64 {
	peak := m.computePeak(dt)
	flops := 2 * float64(g.M) * float64(g.N) * float64(g.K)
	var arith float64
	if flops > 0 && peak > 0 && !math.IsInf(peak, 1) && m.Cal.MaxEfficiency > 0 {
		arith = flops / (peak * m.Cal.MaxEfficiency * m.WaveUtilization(g.M, g.N))
	}
	size := float64(dt.Size())
	if size == 0 {
		size = 2
	}
	traffic := (float64(g.M)*float64(g.K) + float64(g.K)*float64(g.N) + float64(g.M)*float64(g.N)) * size
	mem := traffic / (m.HW.HBMBandwidth * m.Cal.MemoryEfficiency)
	return math.Max(arith, mem) + m.Cal.Launch
}

// WaveUtilization is the fraction of the SM-time an M×N output keeps busy
// with useful work: the output over the tiles of every wave it takes,
// the better of GEMMTile's two orientations. An output of less than one
// wave of tiles counts as 1: the libraries split such a multiply's K
// across thread blocks to fill the GPU (CUTLASS's "split-K" for small M
// and N with a large K, docs/efficient_gemm.md), and cuBLASLt has narrow
// tiles down to 64×8 (cublasLtMatmulTile_t), so a skinny multiply is held
// back by its traffic (GEMM), not by idle SMs. 1 when the SM count is not
// known.
func (m *Model) WaveUtilization(rows, cols int64) float64 {
	sms := int64(m.HW.SMs)
	if sms <= 0 || rows <= 0 || cols <= 0 {
		return 1
	}
	best := 0.0
	for _, t := range [][2]int64{hardware.GEMMTile, {hardware.GEMMTile[1], hardware.GEMMTile[0]}} {
		tiles := ceilDiv(rows, t[0]) * ceilDiv(cols, t[1])
		if tiles < sms {
			return 1
		}
		waves := ceilDiv(tiles, sms)
		u := float64(rows) * float64(cols) / (float64(waves) * float64(sms) * float64(t[0]*t[1]))
		best = math.Max(best, u)
	}
	return best
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Copy is a device-to-device copy or element-wise pass over bytes: read
// and write.
func (m *Model) Copy(bytes int64) float64 {
	if bytes == 0 {
		return 0
	}
	return 2*float64(bytes)/(m.HW.HBMBandwidth*m.Cal.MemoryEfficiency) + m.Cal.Launch
}

// Host is a host<->device copy.
func (m *Model) Host(bytes int64) float64 {
	return float64(bytes)/(m.HW.HostBandwidth*m.Cal.MemoryEfficiency) + m.Cal.Launch
}

// peak is the dense peak of dtype dt at the clock the GPU sustains.
func (m *Model) peak(dt ir.DType) float64 {
	p := m.HW.peak(dt)
	if r := m.Cal.ClockRatio; r > 0 {
		p *= r
	}
	return p
}

// computePeak is what a kernel in dtype dt runs against: dt's peak, or
// fp32's where the GPU gives none for dt.
func (m *Model) computePeak(dt ir.DType) float64 {
	if p := m.peak(dt); p != 0 {
		return p
	}
	return m.peak(ir.FP32)
}

func (h *Hardware) peak(dt ir.DType) float64 {
	if int(dt) < len(h.PeakFLOPS) {
		return h.PeakFLOPS[dt]
	}
	return 0
}

// Chip is the device name the GPU's built-in profile and SM count are
// keyed by: its preset's, whatever the GPU is called, else its name.
func (c Cluster) Chip() string {
	if g, ok := hardware.Preset(c.Preset); ok {
		return g.Device
	}
	return c.GPU
}

func (c Cluster) hardware() Hardware {
	return Hardware{PeakFLOPS: c.PeakFLOPS, HBMBandwidth: c.HBMBandwidth, IntraNodeBandwidth: c.IntraNodeBandwidth,
		InterNodeBandwidth: c.InterNodeBandwidth, HostBandwidth: c.HostBandwidth, GPUsPerNode: c.GPUsPerNode,
		SMs: smCount(c.Chip())}
}

// smCount is the SM count of the GPU preset whose device name is device,
// 0 for a GPU given as figures (its GEMMs are then charged without wave
// quantisation).
func smCount(device string) int {
	g, _ := hardware.Preset(hardware.PresetByDevice(device))
	return g.SMs
}
