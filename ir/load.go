package ir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/fsdpc/fsdpc/internal/checked"
	"github.com/fsdpc/fsdpc/internal/inputfile"
)

// MaxFileSize bounds a model file; real models are a few kilobytes.
const MaxFileSize = 16 << 20

// LoadFile reads and lowers a model file.
func LoadFile(path string) (*Model, error) {
	// One byte past the limit is enough for Load to say the file is too
	// big; a FIFO, device or directory is refused (internal/inputfile).
	src, err := inputfile.ReadFile(path, "a model file", MaxFileSize)
	if err != nil {
		return nil, err
	}
	return Load(path, src)
}

// Load parses, checks and lowers a model file's contents. The error, when
// not nil, is Diagnostics listing every problem found, each with file, line
// and column. Load never panics on any input.
func Load(file string, src []byte) (*Model, error) { return load(file, src, nil, nil) }

// load is Load with a hook that may change the decoded settings before the
// modules are lowered (Relower uses it), and repeat counts that replace
// the declared ones, by the repeated module's name (Resized).
func load(file string, src []byte, override func(*Model), repeats map[string]int) (m *Model, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("%s: internal error while reading the model (please report): %v\n%s", file, r, debug.Stack())
		}
	}()
	fail := func(msg string, pos Pos) (*Model, error) {
		return nil, Diagnostics{{Severity: Error, File: file, Pos: pos, Msg: msg}}
	}
	// Editors hide a byte order mark; columns count from after it, as the
	// TOML parser's offsets do.
	text := bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	switch {
	case len(src) > MaxFileSize:
		return fail(fmt.Sprintf("the file is larger than %d MiB; a model file is a few kilobytes", MaxFileSize>>20), Pos{})
	case len(bytes.TrimSpace(text)) == 0:
		return fail("the file is empty: a model needs [train], [cluster] and [[module]] sections", Pos{})
	case bytes.HasPrefix(src, []byte("\xff\xfe")) || bytes.HasPrefix(src, []byte("\xfe\xff")):
		return fail("the file is UTF-16 text; save it as UTF-8", Pos{Line: 1, Col: 1})
	case !utf8.Valid(text):
		at := firstInvalidUTF8(text)
		return fail(fmt.Sprintf("the file is not UTF-8 text: byte 0x%02x is not valid here (is it a binary file, or saved in another encoding?)", text[at]), offsetPos(text, at))
	}
	syntaxErr := func(err error) (*Model, error) {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return fail("TOML syntax: "+syntaxHint(pe.Message, text), syntaxPos(text, pe.Position))
		}
		return fail("TOML: "+err.Error(), Pos{})
	}
	if pos, off, msg := checkNesting(text); msg != "" {
		// A syntax error on an earlier line comes first; the text up to
		// here is shallow enough to parse.
		var raw map[string]any
		if _, err := toml.Decode(string(text[:off]), &raw); err != nil {
			var pe toml.ParseError
			if !errors.As(err, &pe) || syntaxPos(text, pe.Position).Line < pos.Line {
				return syntaxErr(err)
			}
		}
		return fail(msg, pos)
	}

	var raw map[string]any
	if _, err := toml.Decode(string(text), &raw); err != nil {
		return syntaxErr(err)
	}
	if pos, msg := checkTOML10(string(text)); msg != "" {
		return fail("TOML 1.0: "+msg, pos)
	}

	d := &decoder{file: file, locs: locate(string(text))}
	m = &Model{File: file, src: src, repeats: repeats, locs: d.locs, changed: override}
	sum := sha256.Sum256(src)
	m.SourceHash = hex.EncodeToString(sum[:])

	root := d.table("", raw, "the model file", "model", "train", "cluster", "policy", "module", "param", "block", "register")
	defaultDType := d.modelSection(root, m)
	if m.Name == "" {
		m.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		if err := ValidLabel(m.Name); err != nil {
			d.keyErrorf("", "the model has no [model] name and its file name does not make one: %v; give [model] name", err)
		}
	}
	d.trainSection(root, m)
	d.clusterSection(root, m)
	d.policySection(root, m)
	if override != nil {
		override(m)
	}
	if m.Train.ActivationDType == DTypeInvalid {
		m.Train.ActivationDType = defaultDType
		if pd := m.Policy.Default.ParamDType; pd != DTypeInvalid {
			m.Train.ActivationDType = pd
		}
		if !m.Train.ActivationDType.IsFloat() {
			d.errorf("model.dtype", "model.dtype %s is not a floating-point type, so activations have no dtype: set train.activation_dtype or policy.param_dtype (and requires_grad = false on %s parameters)", m.Train.ActivationDType, m.Train.ActivationDType)
		}
	}
	if _, ok := checked.Mul(m.Train.MicroBatch, m.Train.SeqLen); !ok {
		d.errorf("train.seq_len", "micro_batch × seq_len overflows")
	}
	modules := d.moduleList(root, 0)
	params := d.paramList(root)
	rootReg := root.registration()
	blocks := d.blocks(root)
	if !root.has("module") && !root.has("param") {
		d.keyErrorf("", "the model declares no modules: add [[module]] entries")
	}
	if d.diags.HasErrors() {
		return nil, d.finish()
	}

	l := &lowerer{d: d, m: m, blocks: blocks, defaultDType: defaultDType,
		moduleByName: map[string]ModuleID{}, paramByName: map[string]ParamID{}}
	l.lowerModules(modules, params, rootReg)
	if !d.diags.HasErrors() {
		for _, name := range sortedKeys(repeats) {
			if !l.resized[name] {
				return nil, fmt.Errorf("%s: no repeated module %q to resize", file, name)
			}
		}
		l.resolveTies()
	}
	for _, name := range sortedKeys(blocks) {
		if !blocks[name].used && !d.diags.HasErrors() { // after errors, use is not fully known
			d.warnf(blocks[name].path, "block %q is never used", name)
		}
	}
	if !d.diags.HasErrors() && !root.has("module") {
		// Root parameters are read by the root's own forward around its
		// children (ViT's cls_token); with no module there is no forward
		// to read them, no gradient and nothing to plan.
		d.keyErrorf("param[0]", "the model declares parameters but no modules: root [[param]]s are used by the forward of the modules around them; add [[module]] entries")
	}
	if !d.diags.HasErrors() {
		l.buildDataflow()
	}
	if !d.diags.HasErrors() {
		l.computeCosts()
		l.checkPolicyPatterns()
	}
	if d.diags.HasErrors() {
		return nil, d.finish()
	}
	if m.CheckpointingUnused() {
		d.warnf("train.checkpointing", "%s", m.CheckpointingUnusedMessage())
	}
	m.Warnings = d.finish()
	if err := Verify(m); err != nil {
		return nil, fmt.Errorf("%s: internal error: the lowered model is invalid (please report): %w", file, err)
	}
	return m, nil
}

// syntaxHint adds to the TOML parser's terse messages what the writer most
// likely meant.
func syntaxHint(msg string, text []byte) string {
	first := bytes.TrimLeft(text, " \t\r\n")
	switch {
	case len(first) > 0 && first[0] == '{':
		return msg + " (this looks like JSON; a model file is TOML, with [train], [cluster] and [[module]] sections)"
	case strings.HasPrefix(msg, "strings cannot contain newlines"):
		return msg + " (is the closing quote missing? Use \"\"\" for text over several lines)"
	case strings.HasPrefix(msg, "expected value but found"):
		return msg + " (text values need quotes, as in kind = \"linear\")"
	case strings.HasPrefix(msg, "invalid escape in string"):
		return msg + ` (in "…" a backslash starts an escape: write \\ or use '…')`
	case strings.HasSuffix(msg, "but got ':' instead"):
		return msg + " (TOML writes key = value, not key: value)"
	case strings.HasPrefix(msg, "expected '.' or '='"):
		return msg + " (each line must be key = value, a [table] header or a # comment)"
	case strings.Contains(msg, "to end table name"):
		return msg + " (is the closing ] missing?)"
	case strings.Contains(msg, "has already been defined"):
		return msg + " (a key or table may be given only once)"
	}
	return msg
}

// offsetPos is the line and column (in characters) of a byte offset.
func offsetPos(src []byte, off int) Pos {
	off = min(max(off, 0), len(src))
	lineStart := bytes.LastIndexByte(src[:off], '\n') + 1
	return Pos{Line: 1 + bytes.Count(src[:off], []byte("\n")), Col: 1 + utf8.RuneCount(src[lineStart:off])}
}

// syntaxPos places a TOML syntax error. The parser's byte offset is exact;
// its line is off by one at the end of the file and its column counts bytes.
func syntaxPos(src []byte, p toml.Position) Pos {
	if off := p.Start; off >= 0 && off <= len(src) {
		for off > 0 && off < len(src) && !utf8.RuneStart(src[off]) {
			off-- // at the end of the file it can fall inside the last character
		}
		return offsetPos(src, off)
	}
	lines := bytes.Count(src, []byte("\n")) + 1
	return Pos{Line: min(max(p.Line, 1), lines), Col: 1}
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// finish sorts the diagnostics, keeps one per place (a block expanded 32
// times reports its problem once) and bounds their number.
func (d *decoder) finish() Diagnostics {
	return d.diags.collapse(d.dropped)
}

// checkPolicyPatterns rejects patterns that match no module: a typo there
// would silently leave the policy unapplied.
func (l *lowerer) checkPolicyPatterns() {
	p := &l.m.Policy
	check := func(pat Pattern, path string) {
		for i := range l.m.Modules {
			if pat.Glob.Match(l.m.Modules[i].Name) {
				return
			}
		}
		msg := fmt.Sprintf("pattern %q matches no module", pat.Glob)
		var names []string
		for i := range l.m.Modules {
			if len(names) < 10000 {
				names = append(names, l.m.Modules[i].Name)
			}
		}
		if s := suggest(pat.Glob.String(), names); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		l.d.errorf(path, "%s", msg)
	}
	for i, u := range p.Units {
		check(u, indexPath("policy.units", i))
	}
	for i, g := range p.Groups {
		for j, u := range g.Patterns {
			check(u, indexPath(indexPath("policy.units", i), j))
		}
	}
	for i, o := range p.Overrides {
		if o.Match.Glob.src != "" || o.Match.Pos.Line != 0 {
			check(o.Match, childPath(indexPath("policy.override", i), "match"))
		}
	}
}
