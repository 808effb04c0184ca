package ir

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// decoder walks the generic tree the TOML parser returns and collects every
// problem it finds, each with the position of the key or value it is about.
type decoder struct {
	file  string
	locs  map[string]location
	diags Diagnostics
	// dropped counts the problems found after diags filled up; seen holds
	// the key of every problem in diags.
	dropped int
	seen    map[string]bool
	// limit marks the problem being reported as a limit (limitErrorf).
	limit bool
}

func (d *decoder) report(sev Severity, path string, atValue bool, format string, args ...any) {
	if len(d.diags) >= maxDiagnostics*4 { // collect a few more than we print; sorting picks the first
		d.dropped++
		return
	}
	var pos Pos
	if loc, ok := d.locs[path]; ok {
		pos = loc.key
		if atValue {
			pos = loc.val
		}
	}
	x := Diagnostic{Severity: sev, File: d.file, Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...), Limit: d.limit}
	// One problem per place: the instances of a declaration repeated or
	// used through blocks differ only in numbers and names (layers.0.attn,
	// layers.1.attn), different problems at one place in other words.
	// Duplicates do not fill the list.
	key := x.key()
	if d.seen[key] {
		return
	}
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	d.seen[key] = true
	d.diags = append(d.diags, x)
}

// key identifies a problem for removing duplicates: where, and what with
// the numbers and quoted names left out.
func (x Diagnostic) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:%d:%s:%d:", x.Pos.Line, x.Pos.Col, x.Path, x.Severity)
	digits, quoted := false, false
	for i := 0; i < len(x.Msg); i++ {
		c := x.Msg[i]
		switch {
		case quoted && c == '\\':
			i++
		case quoted:
			quoted = c != '"'
		case c == '"':
			quoted = true
			b.WriteString(`"#"`)
		case c >= '0' && c <= '9':
			if !digits {
				b.WriteByte('#')
			}
			digits = true
		default:
			digits = false
			b.WriteByte(c)
		}
	}
	return b.String()
}

func (d *decoder) errorf(path string, format string, args ...any) {
	d.report(Error, path, true, format, args...)
}

// limitErrorf reports a documented limit exceeded (Diagnostic.Limit),
// placed at the key.
func (d *decoder) limitErrorf(path string, format string, args ...any) {
	d.limit = true
	d.report(Error, path, false, format, args...)
	d.limit = false
}

func (d *decoder) keyErrorf(path string, format string, args ...any) {
	d.report(Error, path, false, format, args...)
}

func (d *decoder) warnf(path string, format string, args ...any) {
	d.report(Warning, path, false, format, args...)
}

// tomlType names a decoded value's TOML type for error messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date-time"
	}
	return fmt.Sprintf("a %T", v)
}

// tbl is one TOML table being decoded, with the keys it allows.
type tbl struct {
	d    *decoder
	path string
	m    map[string]any
}

// table checks that v is a table and that it has only allowed keys; an
// unknown key is reported with the closest allowed one.
func (d *decoder) table(path string, v any, what string, allowed ...string) *tbl {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorf(path, "%s must be a table, not %s", what, tomlType(v))
		return &tbl{d: d, path: path, m: map[string]any{}}
	}
	t := &tbl{d: d, path: path, m: m}
	t.allow(what, allowed)
	return t
}

func (t *tbl) allow(what string, allowed []string) {
	for _, k := range sortedKeys(t.m) {
		if contains(allowed, k) {
			continue
		}
		msg := fmt.Sprintf("unknown key %q in %s", k, what)
		if s := suggest(k, allowed); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else {
			sorted := append([]string(nil), allowed...)
			sort.Strings(sorted)
			msg += fmt.Sprintf(" (allowed: %s)", strings.Join(sorted, ", "))
		}
		t.d.keyErrorf(childPath(t.path, k), "%s", msg)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (t *tbl) has(k string) bool  { _, ok := t.m[k]; return ok }
func (t *tbl) at(k string) string { return childPath(t.path, k) }

func (t *tbl) str(k string) (string, bool) {
	v, ok := t.m[k]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		t.d.errorf(t.at(k), "%s must be a string, not %s", k, tomlType(v))
	}
	return s, ok
}

func (t *tbl) boolean(k string) (*bool, bool) {
	v, ok := t.m[k]
	if !ok {
		return nil, true
	}
	b, ok := v.(bool)
	if !ok {
		t.d.errorf(t.at(k), "%s must be true or false, not %s", k, tomlType(v))
		return nil, false
	}
	return &b, true
}

// integer reads an integer in [lo, hi]. ok is false when the key is absent
// or wrong (the latter reported).
func (t *tbl) integer(k string, lo, hi int64) (int64, bool) {
	v, ok := t.m[k]
	if !ok {
		return 0, false
	}
	return t.d.intValue(t.at(k), k, v, lo, hi)
}

func (d *decoder) intValue(path, k string, v any, lo, hi int64) (int64, bool) {
	n, ok := v.(int64)
	if !ok {
		if f, isFloat := v.(float64); isFloat && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			d.errorf(path, "%s must be an integer; write %d, not %.1f", k, int64(f), f)
		} else if s, isString := v.(string); isString && isInteger(s) {
			d.errorf(path, "%s must be an integer, not a string; write %s without quotes", k, s)
		} else {
			d.errorf(path, "%s must be an integer, not %s", k, tomlType(v))
		}
		return 0, false
	}
	if n < lo || n > hi {
		switch {
		case hi == math.MaxInt64:
			d.errorf(path, "%s must be at least %d, not %d", k, lo, n)
		default:
			d.errorf(path, "%s must be between %d and %d, not %d", k, lo, hi, n)
		}
		return 0, false
	}
	return n, true
}

func isInteger(s string) bool {
	_, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	return err == nil
}

// number reads an integer or a float, or a string parsed by parse (for
// values with units).
func (t *tbl) number(k string, parse func(string) (float64, error)) (float64, bool) {
	v, ok := t.m[k]
	if !ok {
		return 0, false
	}
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case float64:
		f = x
	case string:
		if parse == nil {
			t.d.errorf(t.at(k), "%s must be a number, not a string", k)
			return 0, false
		}
		var err error
		if f, err = parse(x); err != nil {
			t.d.errorf(t.at(k), "%s: %v", k, err)
			return 0, false
		}
	default:
		t.d.errorf(t.at(k), "%s must be a number or a string with a unit, not %s", k, tomlType(v))
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		t.d.errorf(t.at(k), "%s must be a finite, non-negative number, not %v", k, v)
		return 0, false
	}
	return f, true
}

// bytes reads a size: an integer number of bytes or a string with a unit.
func (t *tbl) bytes(k string) (int64, bool) {
	v, ok := t.m[k]
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case int64:
		if x < 0 {
			t.d.errorf(t.at(k), "%s must not be negative", k)
			return 0, false
		}
		return x, true
	case string:
		b, err := ParseBytes(x)
		if err != nil {
			t.d.errorf(t.at(k), "%s: %v", k, err)
			return 0, false
		}
		return b, true
	}
	t.d.errorf(t.at(k), "%s must be a size such as \"80GiB\" or an integer number of bytes, not %s", k, tomlType(v))
	return 0, false
}

func (t *tbl) strList(k string) ([]string, bool) {
	v, ok := t.m[k]
	if !ok {
		return nil, false
	}
	arr, ok := v.([]any)
	if !ok {
		t.d.errorf(t.at(k), "%s must be an array of strings, not %s", k, tomlType(v))
		return nil, false
	}
	out := make([]string, 0, len(arr))
	good := true
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			t.d.errorf(indexPath(t.at(k), i), "%s[%d] must be a string, not %s", k, i, tomlType(e))
			good = false
			continue
		}
		out = append(out, s)
	}
	return out, good
}

// intList reads an integer or an array of integers, each in [lo, hi].
func (t *tbl) intList(k string, lo, hi int64) ([]int64, bool) {
	v, ok := t.m[k]
	if !ok {
		return nil, false
	}
	if n, isInt := v.(int64); isInt {
		if _, ok := t.d.intValue(t.at(k), k, n, lo, hi); !ok {
			return nil, false
		}
		return []int64{n}, true
	}
	arr, ok := v.([]any)
	if !ok {
		t.d.errorf(t.at(k), "%s must be an integer or an array of integers, not %s", k, tomlType(v))
		return nil, false
	}
	if len(arr) == 0 {
		t.d.errorf(t.at(k), "%s must not be empty", k)
		return nil, false
	}
	out := make([]int64, 0, len(arr))
	good := true
	for i, e := range arr {
		n, ok := t.d.intValue(indexPath(t.at(k), i), fmt.Sprintf("%s[%d]", k, i), e, lo, hi)
		good = good && ok
		out = append(out, n)
	}
	return out, good
}

// tables reads an array of tables (or an empty array).
func (t *tbl) tables(k string) ([]map[string]any, bool) {
	v, ok := t.m[k]
	if !ok {
		return nil, false
	}
	switch x := v.(type) {
	case []map[string]any:
		return x, true
	case []any:
		out := make([]map[string]any, 0, len(x))
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				t.d.errorf(indexPath(t.at(k), i), "%s[%d] must be a table, not %s", k, i, tomlType(e))
				return nil, false
			}
			out = append(out, m)
		}
		return out, true
	}
	t.d.errorf(t.at(k), "%s must be an array of tables ([[%s]]), not %s", k, k, tomlType(v))
	return nil, false
}

// enum reads a string that must be one of allowed.
func (t *tbl) enum(k string, allowed ...string) (string, bool) {
	s, ok := t.str(k)
	if !ok {
		return "", false
	}
	if !contains(allowed, s) {
		msg := fmt.Sprintf("%s %q is not one of %s", k, s, strings.Join(allowed, ", "))
		if g := suggest(s, allowed); g != "" {
			msg += fmt.Sprintf("; did you mean %q?", g)
		}
		t.d.errorf(t.at(k), "%s", msg)
		return "", false
	}
	return s, true
}

func (t *tbl) dtype(k string) (DType, bool) {
	s, ok := t.str(k)
	if !ok {
		return DTypeInvalid, false
	}
	dt, ok := ParseDType(s)
	if !ok {
		msg := fmt.Sprintf("unknown dtype %q (allowed: %s)", s, strings.Join(DTypeNames(), ", "))
		if g := suggest(s, sortedKeys(dtypeAliases)); g != "" {
			msg = fmt.Sprintf("unknown dtype %q; did you mean %q? (allowed: %s)", s, g, strings.Join(DTypeNames(), ", "))
		}
		t.d.errorf(t.at(k), "%s", msg)
		return DTypeInvalid, false
	}
	return dt, true
}
