package schedule

import (
	"encoding/json"

	"github.com/fsdpc/fsdpc/ir"
)

// The plan's JSON form (fsdpc show -json, docs/json.md) is the Go types'
// own, with a snake_case key on every field (json_test.go checks that
// none is missing) and every enum by its name. Times are seconds, sizes
// bytes, bandwidths bytes per second; the two arrays indexed by an enum
// become objects keyed by its names.

// MarshalJSON writes peak_flops by dtype name.
func (c Cluster) MarshalJSON() ([]byte, error) {
	type plain Cluster
	peak := map[string]float64{}
	for dt, f := range c.PeakFLOPS {
		if f > 0 {
			peak[ir.DType(dt).String()] = f
		}
	}
	pc := plain(c)
	if pc.Profile == nil {
		pc.Profile = []ir.ProfileValue{}
	}
	return json.Marshal(struct {
		plain
		PeakFLOPS map[string]float64 `json:"peak_flops"`
	}{pc, peak})
}

// MarshalJSON writes peak_by_pool by pool name.
func (p Prediction) MarshalJSON() ([]byte, error) {
	type plain Prediction
	byPool := map[string]int64{}
	for pool, b := range p.PeakByPool {
		byPool[Pool(pool).String()] = b
	}
	return json.Marshal(struct {
		plain
		PeakByPool map[string]int64 `json:"peak_by_pool"`
	}{plain(p), byPool})
}

// MarshalJSON writes an operation's empty lists as [], not null.
func (o Op) MarshalJSON() ([]byte, error) {
	type plain Op
	po := plain(o)
	if po.Uses == nil {
		po.Uses = []int32{}
	}
	if po.GEMMs == nil {
		po.GEMMs = []ir.GEMM{}
	}
	return json.Marshal(po)
}

// MarshalJSON writes a parameter's empty alias list as [], not null.
func (p GroupParam) MarshalJSON() ([]byte, error) {
	type plain GroupParam
	pp := plain(p)
	if pp.Aliases == nil {
		pp.Aliases = []string{}
	}
	return json.Marshal(pp)
}

// MarshalJSON writes the plan's empty lists as [], not null.
func (p Plan) MarshalJSON() ([]byte, error) {
	type plain Plan
	pp := plain(p)
	for _, l := range []*[]string{&pp.Modules, &pp.EventNames, &pp.Warnings} {
		if *l == nil {
			*l = []string{}
		}
	}
	if pp.Groups == nil {
		pp.Groups = []Group{}
	}
	if pp.Buffers == nil {
		pp.Buffers = []Buffer{}
	}
	if pp.Ops == nil {
		pp.Ops = []Op{}
	}
	return json.Marshal(pp)
}
