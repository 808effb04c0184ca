package torchgen

import (
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// planSpec loads a model text, plans it and builds the harness's spec.
func planSpec(t testing.TB, file, src string) (*Spec, *schedule.Plan) {
	t.Helper()
	m, err := ir.Load(file, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(m, p)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}
