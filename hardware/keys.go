package hardware

import (
	"fmt"
	"math"
	"strings"
)

// The constants a hardware profile may set, by their names in a profile
// file and in a plan's cluster profile.
const (
	KeyAttentionBackward = "attention_backward"
	KeyAttentionForward  = "attention_forward"
	KeyClockRatio        = "clock_ratio"
	KeyElementwise       = "elementwise_efficiency"
	KeyMaxEfficiency     = "max_efficiency"
	KeyMemoryEfficiency  = "memory_efficiency"
	KeyNICEfficiency     = "nic_efficiency"
	KeyOverlap           = "overlap"
	KeyRingLatencyInter  = "ring_latency_inter"
	KeyRingLatencyIntra  = "ring_latency_intra"
)

// ProfileKey is a constant a hardware profile may set: what `fsdpc
// calibrate` writes, ir reads from a profile file, a plan carries and the
// cost model applies. It is the one table of them; ir, schedule and
// calibrate all read it.
type ProfileKey struct {
	Name string
	// Field is the Calibration constant the key sets.
	Field func(*Calibration) *float64
	// Range is what a profile file or a plan may give it.
	Range Range
	// Fit is the physical range a fit (`fsdpc calibrate`) may move it
	// within, relative to the chip's sourced value when Relative; a zero
	// Fit is a key no fit adjusts.
	Fit FitRange
}

// Range is an interval of values, each end open or closed.
type Range struct {
	Lo, Hi         float64
	LoOpen, HiOpen bool
}

// Contains reports whether v lies in r (NaN lies in no range).
func (r Range) Contains(v float64) bool {
	return !math.IsNaN(v) && (v > r.Lo || !r.LoOpen && v == r.Lo) && (v < r.Hi || !r.HiOpen && v == r.Hi)
}

// FitRange bounds a fitted constant: Lo and Hi, or Lo and Hi times the
// value it starts from when Relative.
type FitRange struct {
	Lo, Hi   float64
	Relative bool
}

// Fitted reports whether a fit may adjust the key.
func (f FitRange) Fitted() bool { return f != FitRange{} }

// efficiency is a fraction of a peak that something reaches: above 0, at
// most all of it. overlap is a slowdown that cannot reach 100%. A ring
// step's latency is above 0 and at most a millisecond, 70 times NCCL's
// network figure (14 µs) and beyond any fabric NCCL runs a ring over.
var (
	efficiency = Range{Lo: 0, Hi: 1, LoOpen: true}
	slowdown   = Range{Lo: 0, Hi: 1, HiOpen: true}
	stepTime   = Range{Lo: 0, Hi: 1e-3, LoOpen: true}
)

// profileKeys, in name order (a plan's profile is kept in it).
//
// The fit ranges: max_efficiency, the share of peak that large GEMMs
// sustain, is 0.51–0.86 on every GPU with a published best-shape
// measurement (stas00/ml-engineering, "Maximum Achievable Matmul FLOPS":
// MI300X 0.51 … A100 SXM 0.86), so 0.45–0.9. Attention efficiencies stay
// within 0.75–1.35 times the chip's sourced figure: FlashAttention-2's
// forward spans 50–73% of the A100's peak across head dims and lengths
// (Dao 2023, arXiv 2307.08691, figures 4–7), ±20% around its 0.6. A NIC
// delivers at most its line rate less protocol overhead, and nccl-tests
// measure 80–92% of it across nodes on InfiniBand and RoCE: 0.5–0.95.
// elementwise_efficiency: eager PyTorch's element-wise kernels reach
// 0.39–0.51 of HBM3 bandwidth on H100 and 0.48–0.63 of HBM2e on A100
// across hidden sizes 8,192–16,384, forward and backward (Liger-Kernel's
// RMSNorm benchmarks, profiles.go), and a streaming copy about 0.8–0.9:
// 0.3–0.9. clock_ratio is set by [cluster] sm_clock_mhz or power_limit_w, not
// fitted. ring_latency_intra and ring_latency_inter are one step of
// NCCL's Simple-protocol ring inside a node and across nodes, in seconds
// (NCCL 2.30.7 src/graph/tuning.cc, hwLatencies: NVLink 3.4 µs, NET 14
// µs; hardware/nccl.go): a profile may give its fabric's own, nothing
// fits them.
var profileKeys = []ProfileKey{
	{KeyAttentionBackward, func(c *Calibration) *float64 { return &c.AttentionBackward }, efficiency, FitRange{0.75, 1.35, true}},
	{KeyAttentionForward, func(c *Calibration) *float64 { return &c.AttentionForward }, efficiency, FitRange{0.75, 1.35, true}},
	{KeyClockRatio, func(c *Calibration) *float64 { return &c.ClockRatio }, efficiency, FitRange{}},
	{KeyElementwise, func(c *Calibration) *float64 { return &c.ElementwiseEfficiency }, efficiency, FitRange{0.3, 0.9, false}},
	{KeyMaxEfficiency, func(c *Calibration) *float64 { return &c.MaxEfficiency }, efficiency, FitRange{0.45, 0.9, false}},
	{KeyMemoryEfficiency, func(c *Calibration) *float64 { return &c.MemoryEfficiency }, efficiency, FitRange{0.3, 0.95, false}},
	{KeyNICEfficiency, func(c *Calibration) *float64 { return &c.NICEfficiency }, efficiency, FitRange{0.5, 0.95, false}},
	{KeyOverlap, func(c *Calibration) *float64 { return &c.Overlap }, slowdown, FitRange{0, 0.5, false}},
	{KeyRingLatencyInter, func(c *Calibration) *float64 { return &c.AlphaInter }, stepTime, FitRange{}},
	{KeyRingLatencyIntra, func(c *Calibration) *float64 { return &c.AlphaIntra }, stepTime, FitRange{}},
}

// ProfileKeys returns the profile keys in name order.
func ProfileKeys() []ProfileKey { return append([]ProfileKey(nil), profileKeys...) }

// ProfileKeyNames lists the profile keys' names in name order.
func ProfileKeyNames() []string {
	names := make([]string, len(profileKeys))
	for i, k := range profileKeys {
		names[i] = k.Name
	}
	return names
}

// LookupProfileKey returns the profile key named name and whether there
// is one.
func LookupProfileKey(name string) (ProfileKey, bool) {
	for _, k := range profileKeys {
		if k.Name == name {
			return k, true
		}
	}
	return ProfileKey{}, false
}

// Set changes the constant the profile key name sets to v. An unknown
// name or a value outside the key's range is an error, never ignored.
func (c *Calibration) Set(name string, v float64) error {
	k, ok := LookupProfileKey(name)
	if !ok {
		return fmt.Errorf("unknown profile constant %q (constants: %s)", name, strings.Join(ProfileKeyNames(), ", "))
	}
	if !k.Range.Contains(v) {
		return fmt.Errorf("profile constant %s = %g is outside its range", name, v)
	}
	*k.Field(c) = v
	return nil
}
