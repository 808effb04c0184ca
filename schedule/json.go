package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

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

// opJSON is an operation as the JSON form writes it: its lists in place
// (from the plan's tables), empty ones as [], not null.
type opJSON struct {
	plainOp
	GEMMs []ir.GEMM `json:"gemms"`
	Uses  []int32   `json:"uses"`
}

type plainOp Op

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
	// The ops need the plan's tables for their lists: the plan is written
	// with none and the list of ops put in place of "ops":[]. That key
	// occurs once, as the plan's own: no other type here has an "ops"
	// field, and within a JSON string every quote is escaped.
	pp.Ops = nil
	b, err := json.Marshal(pp)
	if err != nil {
		return nil, err
	}
	ops := make([]opJSON, len(p.Ops))
	for i := range p.Ops {
		o := &p.Ops[i]
		ops[i] = opJSON{plainOp(*o), p.OpGEMMs(o), p.OpUses(o)}
		if ops[i].GEMMs == nil {
			ops[i].GEMMs = []ir.GEMM{}
		}
		if ops[i].Uses == nil {
			ops[i].Uses = []int32{}
		}
	}
	list, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	const empty = `"ops":null`
	at := bytes.Index(b, []byte(empty))
	if at < 0 || bytes.Contains(b[at+len(empty):], []byte(empty)) {
		return nil, fmt.Errorf("internal error: the plan's JSON has no single \"ops\" field")
	}
	return slices.Concat(b[:at+len(`"ops":`)], list, b[at+len(empty):]), nil
}
