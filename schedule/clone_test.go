package schedule_test

import (
	"reflect"
	"testing"
)

// TestCloneIsDeep: on every zoo plan, Clone is equal to its original and
// shares no slice's backing array with it, however deep: a slice field
// added to the plan and forgotten in Clone fails here.
func TestCloneIsDeep(t *testing.T) {
	for _, z := range zoo(t) {
		q := z.plan.Clone()
		if !reflect.DeepEqual(q, z.plan) {
			t.Fatalf("%s: the clone differs from the plan", z.name)
		}
		var shared []string
		walkShared(reflect.ValueOf(z.plan).Elem(), reflect.ValueOf(q).Elem(), "Plan", &shared)
		for _, s := range shared {
			t.Errorf("%s: %s shares its backing array with the original", z.name, s)
		}
	}
	// The walk finds sharing: a shallow copy shares every slice.
	p := zoo(t)[0].plan
	shallow := *p
	var shared []string
	walkShared(reflect.ValueOf(p).Elem(), reflect.ValueOf(&shallow).Elem(), "Plan", &shared)
	if len(shared) < 5 {
		t.Fatalf("a shallow copy shares only %v: the walk misses slices", shared)
	}
}

// walkShared appends the path of every non-empty slice of b whose backing
// array is a's.
func walkShared(a, b reflect.Value, path string, shared *[]string) {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			walkShared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name, shared)
		}
	case reflect.Slice:
		if a.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			*shared = append(*shared, path)
			return
		}
		for i := range a.Len() {
			walkShared(a.Index(i), b.Index(i), path+"[]", shared)
			if len(*shared) > 20 {
				return
			}
		}
	case reflect.Pointer, reflect.Map:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			*shared = append(*shared, path)
		}
	}
}
