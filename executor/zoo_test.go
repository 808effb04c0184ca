package executor

import (
	"fmt"
	"testing"

	"github.com/fsdpc/fsdpc/internal/zootest"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// Helpers that plan zoo models with edited TOML (internal/zootest).

type edit = zootest.Edit

var (
	setKey  = zootest.Set
	dropKey = zootest.Drop
	world   = zootest.World
	layers  = zootest.Layers
	policy  = zootest.Policy
	train   = zootest.Train
)

// hsdp sets a replicate × shard mesh.
func hsdp(r, s int) []edit {
	return append(world(r*s), setKey("cluster", "mesh", fmt.Sprintf("{ replicate = %d, shard = %d }", r, s)))
}

func zooPlan(t testing.TB, name string, edits ...edit) *schedule.Plan {
	t.Helper()
	p, err := zooPlanErr(name, edits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func zooPlanErr(name string, edits ...edit) (*schedule.Plan, error) {
	m, err := zootest.ModelErr(name, edits...)
	if err != nil {
		return nil, err
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

func join(groups ...[]edit) []edit {
	var out []edit
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}
