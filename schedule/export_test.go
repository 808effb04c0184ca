package schedule

import (
	"fmt"
	"reflect"

	"github.com/fsdpc/fsdpc/ir"
)

// Hooks for wire_test.go, which is an external test package because it
// plans the zoo with the planner (which imports this package).

// EncodeUnchecked and DecodeUnchecked are Encode and Decode without
// schedule.Check: the completeness test's plan sets every field but is no
// valid schedule. The wire checks (enums, indices, lengths) still run.
func EncodeUnchecked(p *Plan) ([]byte, error) { return encode(p, nil) }
func DecodeUnchecked(b []byte) (*Plan, error) {
	p, _, err := decode(b, false)
	return p, err
}

// TraceEntry labels the byte offset where an encoded field starts.
type TraceEntry = traceEntry

// EncodeTrace is Encode that also says where every field starts.
func EncodeTrace(p *Plan) ([]byte, []TraceEntry, error) {
	if _, err := Encode(p); err != nil {
		return nil, nil, err
	}
	var tr []traceEntry
	b, err := encode(p, &tr)
	return b, tr, err
}

// TraceUnchecked is EncodeTrace without schedule.Check.
func TraceUnchecked(p *Plan) ([]TraceEntry, error) {
	var tr []traceEntry
	_, err := encode(p, &tr)
	return tr, err
}

// SimulateRounds is Simulate with its tolerance and bound on rounds given.
func SimulateRounds(p *Plan, m *Model, tolerance float64, maxRounds int) (*Simulation, int, error) {
	return simulate(p, m, tolerance, maxRounds)
}

// WireDTypes is plan.bin's table of element types (wireDTypes).
func WireDTypes() []ir.DType { return wireDTypes.values }

// WireTable is one of plan.bin's enum tables (wire.go), for the tests:
// its values' Go values and names in code order, and the enum's type.
type WireTable struct {
	Type   reflect.Type
	Values []int
	Names  []string
}

func wireOf[T interface {
	~uint8
	fmt.Stringer
}](tab *wireTable[T]) WireTable {
	w := WireTable{Type: reflect.TypeFor[T]()}
	for _, v := range tab.values {
		w.Values = append(w.Values, int(v))
		w.Names = append(w.Names, v.String())
	}
	return w
}

// WireTables are plan.bin's enum tables by what they hold.
var WireTables = map[string]WireTable{
	"op kind":       wireOf(wireOpKinds),
	"stream":        wireOf(wireStreams),
	"pool":          wireOf(wirePools),
	"buffer kind":   wireOf(wireBufferKinds),
	"process group": wireOf(wireProcessGroups),
	"phase":         wireOf(wirePhases),
	"reshard":       wireOf(wireReshardKinds),
	"reduce op":     wireOf(wireReduceOps),
	"dtype":         wireOf(wireDTypes),
}
