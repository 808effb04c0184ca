package ir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// MaxFileSize bounds a model file; real models are a few kilobytes.
const MaxFileSize = 16 << 20

// LoadFile reads and lowers a model file.
func LoadFile(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a model file", path)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(&limitedReader{f, MaxFileSize + 1}); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return Load(path, buf.Bytes())
}

type limitedReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("EOF")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// Load parses, checks and lowers a model file's contents. The error, when
// not nil, is Diagnostics listing every problem found, each with file, line
// and column. Load never panics on any input.
func Load(file string, src []byte) (m *Model, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("%s: internal error while reading the model (please report): %v\n%s", file, r, debug.Stack())
		}
	}()
	fail := func(msg string, pos Pos) (*Model, error) {
		return nil, Diagnostics{{Severity: Error, File: file, Pos: pos, Msg: msg}}
	}
	switch {
	case len(src) > MaxFileSize:
		return fail(fmt.Sprintf("the file is larger than %d MiB; a model file is a few kilobytes", MaxFileSize>>20), Pos{})
	case len(bytes.TrimSpace(src)) == 0:
		return fail("the file is empty: a model needs [train], [cluster] and [[module]] sections", Pos{})
	case !utf8.Valid(src):
		line := 1 + bytes.Count(src[:firstInvalidUTF8(src)], []byte("\n"))
		return fail("the file is not UTF-8 text (is it a binary file?)", Pos{Line: line, Col: 1})
	}

	var raw map[string]any
	if _, err := toml.Decode(string(src), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			msg := pe.Message
			if pe.Usage != "" {
				msg += " (" + strings.TrimSpace(strings.SplitN(pe.Usage, "\n", 2)[0]) + ")"
			}
			return fail("TOML syntax: "+msg, Pos{Line: pe.Position.Line, Col: max(pe.Position.Col, 1)})
		}
		return fail("TOML: "+err.Error(), Pos{})
	}

	d := &decoder{file: file, locs: locate(string(src))}
	m = &Model{File: file}
	sum := sha256.Sum256(src)
	m.SourceHash = hex.EncodeToString(sum[:])

	root := d.table("", raw, "the model file", "model", "train", "cluster", "policy", "module", "param", "block")
	defaultDType := d.modelSection(root, m)
	if m.Name == "" {
		m.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	d.trainSection(root, m)
	d.clusterSection(root, m)
	d.policySection(root, m)
	if m.Train.ActivationDType == DTypeInvalid {
		m.Train.ActivationDType = defaultDType
		if pd := m.Policy.Default.ParamDType; pd != DTypeInvalid {
			m.Train.ActivationDType = pd
		}
	}
	if _, ok := mulInt64(m.Train.MicroBatch, m.Train.SeqLen); !ok {
		d.errorf("train.seq_len", "micro_batch × seq_len overflows")
	}
	modules := d.moduleList(root, 0)
	params := d.paramList(root)
	blocks := d.blocks(root)
	if !root.has("module") && !root.has("param") {
		d.keyErrorf("", "the model declares no modules: add [[module]] entries")
	}
	if d.diags.HasErrors() {
		return nil, d.finish()
	}

	l := &lowerer{d: d, m: m, blocks: blocks, defaultDType: defaultDType,
		moduleByName: map[string]ModuleID{}, paramByName: map[string]ParamID{}}
	l.lowerModules(modules, params)
	if !d.diags.HasErrors() {
		l.resolveTies()
	}
	for _, name := range sortedKeys(blocks) {
		if !blocks[name].used {
			d.warnf(blocks[name].path, "block %q is never used", name)
		}
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
	m.Warnings = d.finish()
	if err := Verify(m); err != nil {
		return nil, fmt.Errorf("%s: internal error: the lowered model is invalid (please report): %w", file, err)
	}
	return m, nil
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
	all := d.diags.sorted()
	var out Diagnostics
	seen := map[string]bool{}
	for _, x := range all {
		key := fmt.Sprintf("%d:%d:%s:%d", x.Pos.Line, x.Pos.Col, x.Path, x.Severity)
		if x.Pos.Line == 0 {
			key += x.Msg
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, x)
	}
	if len(out) > maxDiagnostics {
		n := len(out) - maxDiagnostics
		out = append(out[:maxDiagnostics], Diagnostic{Severity: Error, File: d.file, Msg: fmt.Sprintf("%d more problems not shown", n)})
	}
	return out
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
	for i, o := range p.Overrides {
		if o.Match.Glob.src != "" || o.Match.Pos.Line != 0 {
			check(o.Match, childPath(indexPath("policy.override", i), "match"))
		}
	}
}
