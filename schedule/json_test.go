package schedule_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestJSONKeysSnakeCase: every exported field of the plan's types carries
// a snake_case JSON key (a field added without one would show its Go
// name in show -json), and the two enum-indexed arrays are left to the
// marshalers that key them by name.
func TestJSONKeysSnakeCase(t *testing.T) {
	byName := map[string]bool{"Cluster.PeakFLOPS": true, "Prediction.PeakByPool": true}
	// An op's lists are written in place ("gemms", "uses") from the
	// plan's tables, which have no key of their own.
	inPlace := map[string]bool{"Op.GEMMs": true, "Op.Uses": true, "Plan.GEMMTable": true, "Plan.UseTable": true}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Slice || ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Array {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := strings.Split(f.Tag.Get("json"), ",")[0]
			where := ty.Name() + "." + f.Name
			if inPlace[where] {
				continue
			}
			switch {
			case tag == "-" && byName[where]:
			case !snakeCase.MatchString(tag):
				t.Errorf("%s (%s): json key %q is not snake_case", where, ty.PkgPath(), tag)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(schedule.Plan{}))
	if len(seen) < 9 {
		t.Errorf("walked %d types, expected the plan's nine or more", len(seen))
	}
}

// TestJSONEnumsByName: enums are names and the dtype- and pool-indexed
// arrays are objects keyed by name.
func TestJSONEnumsByName(t *testing.T) {
	p := planFor(t, "gpt2-124m")
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cluster struct {
			PeakFLOPS map[string]float64 `json:"peak_flops"`
		} `json:"cluster"`
		Prediction struct {
			PeakByPool map[string]int64 `json:"peak_by_pool"`
			StepTime   float64          `json:"step_time"`
		} `json:"prediction"`
		Ops []struct {
			Kind   string `json:"kind"`
			Stream string `json:"stream"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Cluster.PeakFLOPS["bf16"] != 312e12 {
		t.Errorf("peak_flops: %v", doc.Cluster.PeakFLOPS)
	}
	if doc.Prediction.PeakByPool["compute"] != p.Prediction.PeakByPool[schedule.PoolCompute] || doc.Prediction.StepTime != p.Prediction.StepTime {
		t.Errorf("prediction: %+v", doc.Prediction)
	}
	if len(doc.Ops) != len(p.Ops) || doc.Ops[0].Kind != p.Ops[0].Kind.String() || doc.Ops[0].Stream != p.Ops[0].Stream.String() {
		t.Errorf("ops: %d, first %+v", len(doc.Ops), doc.Ops[0])
	}
}

// planFor plans a zoo model.
func planFor(t *testing.T, name string) *schedule.Plan {
	t.Helper()
	src, file, _ := plans.Source(name)
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
