// Package forge makes forged plans for the hostile-input tests of every
// package that reads plan.bin: each string field of a plan, set to what an
// attacker would put there. schedule.Encode lays such a plan out (it checks
// structure, not Check's rules), so the bytes are checksum-valid and only
// the readers stand between them and every writer.
package forge

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// A StringField is one string of a plan: where it is, and whether the
// model format allows any printable text there (a label) or only a name.
type StringField struct {
	Name  string
	Label bool // printable free text is valid here
	Set   func(p *schedule.Plan, s string)
	// placeholder is a valid value no zoo plan has, which Bytes
	// replaces in the encoded string table.
	placeholder string
}

// StringFields lists every string field of a plan, for a plan with at
// least two groups (the second with a parameter), a module, a buffer, an
// event and a warning, as every zoo plan has. Set copies what it changes,
// so the plan it was cloned from keeps its strings.
func StringFields() []StringField {
	group := func(p *schedule.Plan) *schedule.Group {
		p.Groups = slices.Clone(p.Groups)
		g := &p.Groups[1]
		g.Modules = slices.Clone(g.Modules)
		g.Params = slices.Clone(g.Params)
		return g
	}
	return []StringField{
		{"header fsdpc version", true, func(p *schedule.Plan, s string) { p.Header.FsdpcVersion = s }, "forged-label"},
		{"header input sha256", false, func(p *schedule.Plan, s string) { p.Header.InputSHA256 = s }, "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0"},
		{"header model", true, func(p *schedule.Plan, s string) { p.Header.Model = s }, "forged-label"},
		{"header semantics", true, func(p *schedule.Plan, s string) { p.Header.Semantics = s }, "forged-label"},
		{"cluster GPU", true, func(p *schedule.Plan, s string) { p.Cluster.GPU = s }, "forged-label"},
		{"cluster profile name", false, func(p *schedule.Plan, s string) {
			p.Cluster.Profile = append(slices.Clone(p.Cluster.Profile), ir.ProfileValue{Name: s, Value: 0.5})
		}, "overlap"},
		{"train checkpointing", false, func(p *schedule.Plan, s string) { p.Train.Checkpointing = s }, "selective-layer"},
		{"train optimizer", false, func(p *schedule.Plan, s string) { p.Train.Optimizer, p.Train.OptimizerImplementation = s, "" }, "lion"},
		{"train optimizer implementation", false, func(p *schedule.Plan, s string) { p.Train.OptimizerImplementation = s }, "foreach"},
		{"group name", false, func(p *schedule.Plan, s string) { group(p).Name = s }, "forged_name"},
		{"group module", false, func(p *schedule.Plan, s string) { group(p).Modules[0] = s }, "forged_name"},
		{"parameter name", false, func(p *schedule.Plan, s string) { group(p).Params[0].Name = s }, "forged_name"},
		{"parameter alias", false, func(p *schedule.Plan, s string) {
			gp := &group(p).Params[0]
			gp.Aliases = append(slices.Clone(gp.Aliases), s)
		}, "forged_name"},
		{"module", false, func(p *schedule.Plan, s string) {
			p.Modules = slices.Clone(p.Modules)
			p.Modules[0] = s
		}, "forged_name"},
		{"buffer name", true, func(p *schedule.Plan, s string) {
			p.Buffers = slices.Clone(p.Buffers)
			p.Buffers[0].Name = s
		}, "forged-label"},
		{"event name", true, func(p *schedule.Plan, s string) {
			p.EventNames = slices.Clone(p.EventNames)
			p.EventNames[0] = s
		}, "forged-label"},
		{"warning", true, func(p *schedule.Plan, s string) {
			p.Warnings = append(slices.Clone(p.Warnings), s)
		}, "forged-label"},
	}
}

// Hostile are the strings the forgeries put in each field: code and TOML
// for generated files, terminal escapes, Markdown and HTML for a review
// comment or report, a bidirectional override, invalid UTF-8. Printable
// reports whether each is printable, so a label field may hold it.
var Hostile = []struct {
	S         string
	Printable bool
}{
	{"x\nopen(\"pwned\", \"w\").write(\"1\")\n#", false},
	{"x\n[experimental]\ncustom_import = \"evil_module\"\n#", false},
	{"\x1b[2J\x1b]0;pwned\x07", false},
	{"\u202egnp.live", false},
	{"bad\xff\xfe", false},
	{"\r\n# fsdpc plan (format 6): generated, do not edit", false},
	{"# Heading ![x](https://evil.example/p.png) [l](http://x) <img src=x onerror=alert(1)> `code` |a|b| @someone", true},
	{"a\"b'c\\d''' \"\"\"", true},
	{"evil_module", true}, // a valid name: where a name is allowed, so is this
}

// Bytes is base with the field set to s, as a checksum-valid plan.bin.
// schedule.Encode refuses to write a plan Check refuses, so the field is
// encoded as a valid placeholder and the placeholder's bytes in the string
// table are then replaced by s, the size and checksum fixed: what a forger
// with a hex editor makes.
func Bytes(base *schedule.Plan, f StringField, s string) ([]byte, error) {
	p := *base
	f.Set(&p, f.placeholder)
	b, err := schedule.Encode(&p)
	if err != nil {
		return nil, fmt.Errorf("forging %s: %w", f.Name, err)
	}
	const header = 16 // magic, version, size (schedule/wire.go)
	n, k := binary.Uvarint(b[header:])
	at := header + k
	for range n {
		l, k := binary.Uvarint(b[at:])
		if string(b[at+k:at+k+int(l)]) == f.placeholder {
			out := slices.Concat(b[:at], binary.AppendUvarint(nil, uint64(len(s))), []byte(s), b[at+k+int(l):])
			binary.LittleEndian.PutUint64(out[8:], uint64(len(out)))
			binary.LittleEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], crc32.MakeTable(crc32.Castagnoli)))
			return out, nil
		}
		at += k + int(l)
	}
	return nil, fmt.Errorf("forging %s: the placeholder %q is not in the string table", f.Name, f.placeholder)
}
