package hardware

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestProfileKeysSetOneFieldEach: every profile key sets exactly one
// Calibration constant, no two keys the same one, and Set refuses a name
// the table does not hold instead of ignoring it. A key added to the
// table without its field, or pointed at another key's field, fails here.
func TestProfileKeysSetOneFieldEach(t *testing.T) {
	names := ProfileKeyNames()
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("profile keys are not sorted and unique: %v", names)
	}
	owner := map[string]string{}
	for _, k := range ProfileKeys() {
		if k.Field == nil {
			t.Errorf("%s: no field", k.Name)
			continue
		}
		var c Calibration
		val := 0.5
		if !k.Range.Contains(val) {
			val = k.Range.Hi // a latency in seconds
		}
		if err := c.Set(k.Name, val); err != nil {
			t.Errorf("%s: %v", k.Name, err)
			continue
		}
		v := reflect.ValueOf(c)
		var set []string
		for i := 0; i < v.NumField(); i++ {
			if !v.Field(i).IsZero() {
				set = append(set, v.Type().Field(i).Name)
			}
		}
		if len(set) != 1 {
			t.Errorf("%s sets %v, want one constant", k.Name, set)
			continue
		}
		if o, dup := owner[set[0]]; dup {
			t.Errorf("%s and %s both set %s", o, k.Name, set[0])
		}
		owner[set[0]] = k.Name
	}
	var c Calibration
	if err := c.Set("warp_efficiency", 0.5); err == nil || !strings.Contains(err.Error(), `unknown profile constant "warp_efficiency"`) {
		t.Errorf("an unknown key: %v, want an error naming it", err)
	}
	if err := c.Set(KeyOverlap, 1); err == nil || c != (Calibration{}) {
		t.Errorf("overlap = 1: %v, calibration %+v; want an error and nothing set", err, c)
	}
}

// TestProfileKeyRanges: efficiencies are fractions in (0, 1], overlap a
// slowdown in [0, 1); a fit range lies inside the key's range (relative
// ones around 1, a multiple of the chip's own value).
func TestProfileKeyRanges(t *testing.T) {
	for _, c := range []struct {
		key string
		v   float64
		ok  bool
	}{
		{KeyMaxEfficiency, 0, false}, {KeyMaxEfficiency, 1e-9, true}, {KeyMaxEfficiency, 1, true}, {KeyMaxEfficiency, 1.01, false},
		{KeyOverlap, 0, true}, {KeyOverlap, 0.99, true}, {KeyOverlap, 1, false}, {KeyOverlap, -0.01, false},
		{KeyClockRatio, 0.8, true}, {KeyClockRatio, 0, false},
		{KeyRingLatencyInter, 14e-6, true}, {KeyRingLatencyInter, 0, false}, {KeyRingLatencyIntra, 0.5, false},
	} {
		k, _ := LookupProfileKey(c.key)
		if got := k.Range.Contains(c.v); got != c.ok {
			t.Errorf("%s = %g: in range %v, want %v", c.key, c.v, got, c.ok)
		}
	}
	for _, k := range ProfileKeys() {
		f := k.Fit
		switch {
		case !f.Fitted():
		case f.Relative && !(f.Lo < 1 && 1 < f.Hi):
			t.Errorf("%s: relative fit range %g–%g does not hold the chip's own value", k.Name, f.Lo, f.Hi)
		case !f.Relative && (!k.Range.Contains(f.Lo) || !k.Range.Contains(f.Hi) || f.Lo >= f.Hi):
			t.Errorf("%s: fit range %g–%g is not inside its range %+v", k.Name, f.Lo, f.Hi, k.Range)
		}
	}
}

// TestProfileKeysDocumented: the model format's profile row names every
// key a profile file may set, so the doc cannot fall behind the table.
func TestProfileKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/model-format.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `profile` |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/model-format.md has no `profile` row")
	}
	for _, k := range ProfileKeyNames() {
		if !strings.Contains(row, "`"+k+"`") {
			t.Errorf("docs/model-format.md's profile row does not name %s", k)
		}
	}
}
