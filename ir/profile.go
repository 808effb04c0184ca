package ir

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/internal/inputfile"
	"github.com/fsdpc/fsdpc/internal/safetext"
)

// ProfileValue is one constant of a hardware profile: a cost-model
// calibration constant by its name in the profile file (hardware.ProfileKeys
// names them, with their ranges).
type ProfileValue struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// maxProfileSize bounds a profile file: it holds a handful of numbers.
const maxProfileSize = 64 << 10

// readProfile reads the hardware profile a cluster names: a TOML file,
// relative to the model file, with a [profile] table listing the GPU
// presets it was fitted for (gpus) and the constants. Problems are
// reported at the cluster's profile key, naming the profile's file.
func (d *decoder) readProfile(t *tbl, preset string) []ProfileValue {
	name, ok := t.str("profile")
	if !ok {
		return nil
	}
	at := t.at("profile")
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(d.file), path)
	}
	fail := func(format string, args ...any) []ProfileValue {
		d.errorf(at, "profile %s: %s", safetext.Term(path), fmt.Sprintf(format, args...))
		return nil
	}
	text, err := inputfile.ReadFile(path, "a profile", maxProfileSize)
	switch {
	case err != nil:
		return fail("%v", err)
	case len(text) > maxProfileSize:
		return fail("larger than %d KiB; a profile is a few lines", maxProfileSize>>10)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(text), &raw); err != nil {
		return fail("%v", err)
	}
	if pos, msg := checkTOML10(string(text)); msg != "" {
		return fail("line %d, column %d: TOML 1.0: %s", pos.Line, pos.Col, msg)
	}
	prof, ok := raw["profile"].(map[string]any)
	if !ok || len(raw) != 1 {
		return fail("a profile file holds one [profile] table (fsdpc calibrate -o writes them)")
	}
	var gpus []string
	if list, ok := prof["gpus"].([]any); ok {
		for _, g := range list {
			if s, ok := g.(string); ok {
				gpus = append(gpus, s)
			}
		}
	}
	if len(gpus) == 0 {
		return fail("[profile] needs gpus, the GPU presets it was fitted for")
	}
	if preset == "" || !slices.Contains(gpus, preset) {
		return fail("fitted for %s, not for this cluster's GPU %q", strings.Join(gpus, ", "), preset)
	}
	var out []ProfileValue
	for k, v := range prof {
		if k == "gpus" {
			continue
		}
		key, ok := hardware.LookupProfileKey(k)
		if !ok {
			return fail("unknown constant %q (constants: %s)", k, strings.Join(hardware.ProfileKeyNames(), ", "))
		}
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		default:
			return fail("%s must be a number", k)
		}
		if !key.Range.Contains(f) {
			return fail("%s = %g is outside its range (a fraction)", k, f)
		}
		out = append(out, ProfileValue{k, f})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// withDefaults adds built-in values to a profile, kept in name order,
// unless the profile already sets any of them: a value from the profile
// file is the target system's own and wins.
func withDefaults(prof []ProfileValue, values ...ProfileValue) []ProfileValue {
	for _, v := range prof {
		for _, d := range values {
			if v.Name == d.Name {
				return prof
			}
		}
	}
	prof = append(prof, values...)
	sort.Slice(prof, func(i, j int) bool { return prof[i].Name < prof[j].Name })
	return prof
}
