package hf

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// config is a decoded config.json. Field reads record their problems
// instead of returning at the first one, so a user fixing a hand-written
// config sees every missing or mistyped field in one run.
type config struct {
	file   string
	fields map[string]json.RawMessage
	errs   []string
	// read holds every key the importer looked at; vetKeys checks the
	// rest. sizes holds the integers read, for messages about limits.
	read  map[string]bool
	sizes map[string]int64
}

func parseConfig(file string, src []byte) (*config, error) {
	// Editors on Windows may save a byte-order mark, which JSON forbids; it
	// is invisible, so dropping it moves no column a user can see.
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(src, &fields); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(src, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: JSON syntax: %s", file, line, col, se.Error())
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			line, col := lineCol(src, te.Offset)
			return nil, fmt.Errorf("%s:%d:%d: a config.json holds one JSON object, not %s", file, line, col, te.Value)
		}
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if fields == nil {
		return nil, fmt.Errorf("%s: a config.json holds one JSON object, not null", file)
	}
	return &config{file: file, fields: fields, read: map[string]bool{}, sizes: map[string]int64{}}, nil
}

// lineCol turns encoding/json's byte offset into a 1-based line and a
// column counted in characters. The offset is how many bytes were read when
// the error was found, so the offending byte is the one before it.
func lineCol(src []byte, offset int64) (line, col int) {
	p := int(offset) - 1
	p = max(0, min(p, len(src)))
	line = 1 + bytes.Count(src[:p], []byte("\n"))
	start := bytes.LastIndexByte(src[:p], '\n') + 1
	return line, utf8.RuneCount(src[start:p]) + 1
}

func (c *config) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *config) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	lines := make([]string, len(c.errs))
	for i, e := range c.errs {
		lines[i] = c.file + ": " + e
	}
	return errors.New(strings.Join(lines, "\n"))
}

// raw returns a field's JSON text; a null counts as absent, as it does for
// transformers, which writes null for "use the default".
func (c *config) raw(key string) (string, bool) {
	c.read[key] = true
	r, ok := c.fields[key]
	if !ok {
		return "", false
	}
	s := strings.TrimSpace(string(r))
	if s == "null" {
		return "", false
	}
	return s, true
}

func (c *config) has(key string) bool {
	_, ok := c.raw(key)
	return ok
}

func describe(raw string) string {
	switch {
	case raw == "true" || raw == "false":
		return "a boolean (" + raw + ")"
	case strings.HasPrefix(raw, `"`):
		return "a string (" + short(raw) + ")"
	case strings.HasPrefix(raw, "["):
		return "an array"
	case strings.HasPrefix(raw, "{"):
		return "an object"
	}
	return short(raw)
}

func short(s string) string {
	if utf8.RuneCountInString(s) > 40 {
		return string([]rune(s)[:37]) + "..."
	}
	return s
}

// maxValue bounds every integer the importer accepts. Real configs stay far
// below it; the bound keeps products of sizes inside int64 and keeps a
// corrupt file from asking for a model that cannot be lowered.
const maxValue = 1 << 24

func (c *config) parseInt(key, raw string, hi int64) (int64, bool) {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		if strings.HasPrefix(raw, `"`) || raw == "true" || raw == "false" || strings.HasPrefix(raw, "[") || strings.HasPrefix(raw, "{") {
			c.errorf("%s must be an integer, not %s", key, describe(raw))
		} else {
			c.errorf("%s must be an integer, not %s", key, short(raw))
		}
		return 0, false
	}
	if n < 1 || n > hi {
		c.errorf("%s = %d is out of range (1 to %d)", key, n, hi)
		return 0, false
	}
	c.sizes[key] = n
	return n, true
}

// need reads a required positive integer.
func (c *config) need(key string) int64 {
	raw, ok := c.raw(key)
	if !ok {
		if _, present := c.fields[key]; present {
			c.errorf("%s is null; it is required", key)
		} else {
			c.errorf("%s is missing; it is required", key)
		}
		return 0
	}
	n, _ := c.parseInt(key, raw, maxValue)
	return n
}

// optInt reads an optional positive integer; ok is false when it is absent
// or null.
func (c *config) optInt(key string) (n int64, ok bool) {
	return c.optIntUpTo(key, maxValue)
}

// optIntUpTo is optInt for a field that shapes no parameter and so may be
// larger.
func (c *config) optIntUpTo(key string, hi int64) (n int64, ok bool) {
	raw, present := c.raw(key)
	if !present {
		return 0, false
	}
	return c.parseInt(key, raw, hi)
}

// optBool reads an optional boolean; present is false when it is absent or
// null.
func (c *config) optBool(key string) (v, present bool) {
	raw, ok := c.raw(key)
	if !ok {
		return false, false
	}
	switch raw {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	c.errorf("%s must be true or false, not %s", key, describe(raw))
	return false, false
}

// optString reads an optional string.
func (c *config) optString(key string) (string, bool) {
	raw, ok := c.raw(key)
	if !ok {
		return "", false
	}
	var s string
	if !strings.HasPrefix(raw, `"`) || json.Unmarshal([]byte(raw), &s) != nil {
		c.errorf("%s must be a string, not %s", key, describe(raw))
		return "", false
	}
	return s, true
}

// stringList reads an optional array of strings, ignoring anything else: it
// is used only to describe the source.
func (c *config) stringList(key string) []string {
	raw, ok := c.raw(key)
	if !ok {
		return nil
	}
	var out []string
	if json.Unmarshal([]byte(raw), &out) != nil {
		return nil
	}
	return out
}

// optIntList reads an optional array of integers from 0 to below n (layer
// indices); present is false when it is absent or null.
func (c *config) optIntList(key string, n int64) (out []int64, present bool) {
	raw, ok := c.raw(key)
	if !ok {
		return nil, false
	}
	if json.Unmarshal([]byte(raw), &out) != nil {
		c.errorf("%s must be an array of integers, not %s", key, describe(raw))
		return nil, false
	}
	for _, v := range out {
		if v < 0 || v >= n {
			c.errorf("%s holds %d, which is not a layer index (0 to %d)", key, v, n-1)
			return nil, false
		}
	}
	return out, true
}

// optStringList reads an optional array of strings, each one of allowed;
// it must hold n of them.
func (c *config) optStringList(key string, n int64, allowed ...string) (out []string, present bool) {
	raw, ok := c.raw(key)
	if !ok {
		return nil, false
	}
	if json.Unmarshal([]byte(raw), &out) != nil {
		c.errorf("%s must be an array of strings, not %s", key, describe(raw))
		return nil, false
	}
	if int64(len(out)) != n {
		c.errorf("%s has %d entries; it needs one per layer (%d)", key, len(out), n)
		return nil, false
	}
	for _, v := range out {
		if !slices.Contains(allowed, v) {
			c.errorf("%s holds %q (allowed: %s)", key, clean(v), strings.Join(allowed, ", "))
			return nil, false
		}
	}
	return out, true
}

// largestSizes names the two largest sizes read, the likeliest culprits
// when the model is beyond fsdpc's limits.
func (c *config) largestSizes() string {
	keys := slices.SortedFunc(maps.Keys(c.sizes), func(a, b string) int {
		if c.sizes[a] != c.sizes[b] {
			return cmp.Compare(c.sizes[b], c.sizes[a])
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, k := range keys[:min(2, len(keys))] {
		out = append(out, fmt.Sprintf("%s = %d", k, c.sizes[k]))
	}
	return strings.Join(out, " and ")
}
