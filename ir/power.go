package ir

import (
	"math"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
)

// A power limit below the one a GPU's figures were measured at lowers the
// SM clock the GPU sustains under dense compute: the firmware throttles
// the clock until the draw fits. CMOS dynamic power is α·C·V²·f, and
// across the range DVFS works in the voltage follows the clock, so the
// power above the idle draw grows as the cube of the clock:
//
//	f(P) / f(TDP) = ((P − P_idle) / (TDP − P_idle))^(1/3)
//
// The memory clock does not follow the SM clock, so only FLOP/s figures
// scale (the profile constant clock_ratio). The GH100 profile's fitted
// MaxEfficiency already holds the clock sustained at the 700 W TDP, so
// the ratio is against that, not against the datasheet clock. Checked,
// not fitted: torchtitan's Llama 3.1 8B runs on Grand Teton H100s at their
// 500 W default (benchmarks/llama3_h100_202412_torchtitan.md) are
// predicted within 5% with it and the platform's 2.4 TB/s HBM2e, 26–30%
// too fast without (docs/cost-model.md).

// powerClockRatio is the SM clock a power limit of watts sustains over
// the one the GPU's TDP sustains.
func powerClockRatio(watts, tdp, idle float64) float64 {
	return math.Cbrt((watts - idle) / (tdp - idle))
}

// powerProfile adds clock_ratio for [cluster] power_limit_w to the
// profile, unless the profile file sets it.
func (d *decoder) powerProfile(t *tbl, prof []ProfileValue, preset string) []ProfileValue {
	watts, ok := t.integer("power_limit_w", 1, 10000)
	if !ok {
		return prof
	}
	g, _ := hardware.Preset(preset)
	tdp, idle := g.TDPWatts, g.IdleWatts
	switch {
	case tdp == 0 || idle == 0:
		knows := hardware.PresetsWith(func(g hardware.GPU) bool { return g.TDPWatts != 0 && g.IdleWatts != 0 })
		d.errorf(t.at("power_limit_w"), "power_limit_w needs a GPU preset whose TDP and idle draw fsdpc knows (%s), not %s; give the clock it sustains as sm_clock_mhz instead", strings.Join(knows, ", "), presetLabel(preset))
		return prof
	case t.has("sm_clock_mhz"):
		d.errorf(t.at("power_limit_w"), "power_limit_w and sm_clock_mhz both set the clock: give one")
		return prof
	case float64(watts) > tdp:
		d.errorf(t.at("power_limit_w"), "power_limit_w = %d is above the %s's %.0f W TDP, which its figures already assume", watts, preset, tdp)
		return prof
	case float64(watts) <= idle:
		d.errorf(t.at("power_limit_w"), "power_limit_w = %d is at or below the %s's %.0f W idle draw", watts, preset, idle)
		return prof
	}
	return withDefaults(prof, ProfileValue{hardware.KeyClockRatio, powerClockRatio(float64(watts), tdp, idle)})
}

// clockProfile adds clock_ratio, [cluster] sm_clock_mhz over the preset's
// reference clock (hardware.GPU.RefClockMHz), to the profile, unless the profile
// file sets it.
func (d *decoder) clockProfile(t *tbl, prof []ProfileValue, preset string) []ProfileValue {
	mhz, ok := t.integer("sm_clock_mhz", 100, 10000)
	if !ok {
		return prof
	}
	g, _ := hardware.Preset(preset)
	ref := g.RefClockMHz
	if ref == 0 {
		knows := hardware.PresetsWith(func(g hardware.GPU) bool { return g.RefClockMHz != 0 })
		d.errorf(t.at("sm_clock_mhz"), "sm_clock_mhz needs a GPU preset whose peak fsdpc knows the clock of (%s), not %s", strings.Join(knows, ", "), presetLabel(preset))
		return prof
	}
	if mhz > ref {
		d.errorf(t.at("sm_clock_mhz"), "sm_clock_mhz = %d is above the %d MHz the %s's dense peak already assumes", mhz, ref, preset)
		return prof
	}
	return withDefaults(prof, ProfileValue{hardware.KeyClockRatio, float64(mhz) / float64(ref)})
}
