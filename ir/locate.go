package ir

import (
	"strconv"
	"strings"
)

// The TOML decoder reports positions for syntax errors only. Semantic errors
// need the position of the key they are about, so locate re-scans source that
// is already known to be valid TOML and records where every key and value
// starts, keyed by the same path strings the decoder walk builds (childPath,
// indexPath). Array-of-tables elements get their index, so module[3].kind and
// module[4].kind are told apart.

func childPath(parent, key string) string {
	if !isBareKey(key) {
		key = strconv.Quote(key)
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

func isBareKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// KeyPos is where the model's file writes the key at path, a TOML key path
// as the front end's diagnostics name them (train.grad_accum,
// policy.override[1].reshard_after_forward, policy.units[0]); the zero Pos
// when the file does not write it. Later stages place their diagnostics
// with it.
func (m *Model) KeyPos(path string) Pos { return m.locs[path].key }

// BudgetPos is where the file sets the memory budget: memory_budget in
// [cluster], else the GPU it follows from; the zero Pos when neither is
// written. Diagnostics about memory (a plan over the budget, or near it)
// are placed there.
func (m *Model) BudgetPos() Pos {
	if pos := m.KeyPos("cluster.memory_budget"); pos.Line > 0 {
		return pos
	}
	return m.KeyPos("cluster.gpu")
}

// location is where a key and its value start.
type location struct {
	key, val Pos
}

type locator struct {
	src  string
	i    int
	line int
	col  int
	locs map[string]location
	// aotLen counts the elements of each array of tables seen so far, by
	// resolved path.
	aotLen map[string]int
}

// locate scans valid TOML source and returns key and value positions by path.
// On input it cannot follow it stops early and returns what it found; the
// caller falls back to path-only diagnostics.
func locate(src string) map[string]location {
	l := &locator{src: src, line: 1, col: 1, locs: map[string]location{}, aotLen: map[string]int{}}
	defer func() { recover() }() // positions are a convenience; never fail on them
	l.document()
	return l.locs
}

func (l *locator) eof() bool { return l.i >= len(l.src) }
func (l *locator) peek() byte {
	if l.eof() {
		return 0
	}
	return l.src[l.i]
}
func (l *locator) pos() Pos { return Pos{l.line, l.col} }

func (l *locator) advance() {
	if l.src[l.i] == '\n' {
		l.line++
		l.col = 1
	} else if l.src[l.i]&0xC0 != 0x80 { // count runes, not bytes
		l.col++
	}
	l.i++
}

func (l *locator) skipSpace(newlines bool) {
	for !l.eof() {
		switch c := l.peek(); {
		case c == ' ' || c == '\t' || c == '\r':
			l.advance()
		case c == '\n' && newlines:
			l.advance()
		case c == '#':
			for !l.eof() && l.peek() != '\n' {
				l.advance()
			}
		default:
			return
		}
	}
}

func (l *locator) document() {
	table := ""
	for {
		l.skipSpace(true)
		if l.eof() {
			return
		}
		if l.peek() == '[' {
			start := l.pos()
			l.advance()
			aot := l.peek() == '['
			if aot {
				l.advance()
			}
			l.skipSpace(false)
			keys, at := l.dottedKey()
			l.skipSpace(false)
			l.advance() // ]
			if aot {
				l.advance()
			}
			for i := range keys[:len(keys)-1] { // [a.b] also places a
				if p := l.resolve(keys[:i+1]); l.locs[p] == (location{}) {
					l.locs[p] = location{key: at[i], val: at[i]}
				}
			}
			table = l.resolve(keys[:len(keys)-1])
			table = childPath(table, keys[len(keys)-1])
			if aot {
				n := l.aotLen[table]
				l.aotLen[table] = n + 1
				table = indexPath(table, n)
			}
			if _, ok := l.locs[table]; !ok {
				l.locs[table] = location{key: start, val: start}
			}
			continue
		}
		l.keyValue(table)
	}
}

// resolve turns header key segments into a path, stepping into the last
// element of every array of tables on the way, as TOML does.
func (l *locator) resolve(keys []string) string {
	p := ""
	for _, k := range keys {
		p = childPath(p, k)
		if n, ok := l.aotLen[p]; ok {
			p = indexPath(p, n-1)
		}
	}
	return p
}

// keyValue records a key = value line. A dotted key a.b.c is placed at its
// last segment, the tables a and a.b it implies at theirs.
func (l *locator) keyValue(table string) {
	keys, at := l.dottedKey()
	p := table
	for i, k := range keys {
		p = childPath(p, k)
		if i < len(keys)-1 && l.locs[p] == (location{}) {
			l.locs[p] = location{key: at[i], val: at[i]}
		}
	}
	l.skipSpace(false)
	l.advance() // =
	l.skipSpace(false)
	l.locs[p] = location{key: at[len(at)-1], val: l.pos()}
	l.value(p)
}

// dottedKey reads a key's segments and where each starts.
func (l *locator) dottedKey() (keys []string, at []Pos) {
	for {
		l.skipSpace(false)
		at = append(at, l.pos())
		keys = append(keys, l.simpleKey())
		l.skipSpace(false)
		if l.peek() != '.' {
			return keys, at
		}
		l.advance()
	}
}

func (l *locator) simpleKey() string {
	switch l.peek() {
	case '"', '\'':
		raw := l.stringLit()
		if s, err := strconv.Unquote(raw); err == nil && raw[0] == '"' {
			return s
		}
		return strings.Trim(raw, "'\"")
	}
	start := l.i
	for !l.eof() && isBareKey(string(l.peek())) {
		l.advance()
	}
	if start == l.i {
		panic("locate: expected key")
	}
	return l.src[start:l.i]
}

// stringLit consumes any of the four TOML string forms and returns its raw
// text.
func (l *locator) stringLit() string {
	start := l.i
	q := l.peek()
	if strings.HasPrefix(l.src[l.i:], strings.Repeat(string(q), 3)) {
		l.advance()
		l.advance()
		l.advance()
		for !l.eof() {
			if q == '"' && l.peek() == '\\' {
				l.advance()
				l.advance()
				continue
			}
			if strings.HasPrefix(l.src[l.i:], strings.Repeat(string(q), 3)) {
				l.advance()
				l.advance()
				l.advance()
				for l.peek() == q { // up to two quotes may close the content
					l.advance()
				}
				return l.src[start:l.i]
			}
			l.advance()
		}
		return l.src[start:l.i]
	}
	l.advance()
	for !l.eof() && l.peek() != q && l.peek() != '\n' {
		if q == '"' && l.peek() == '\\' {
			l.advance()
		}
		l.advance()
	}
	l.advance()
	return l.src[start:l.i]
}

func (l *locator) value(p string) {
	switch l.peek() {
	case '"', '\'':
		l.stringLit()
	case '[':
		l.advance()
		for n := 0; ; n++ {
			l.skipSpace(true)
			if l.peek() == ']' {
				l.advance()
				return
			}
			ep := indexPath(p, n)
			l.locs[ep] = location{key: l.pos(), val: l.pos()}
			start := l.i
			l.value(ep)
			l.skipSpace(true)
			if l.peek() == ',' {
				l.advance()
			}
			if l.i == start {
				panic("locate: lost in an array") // never loop without progress
			}
		}
	case '{':
		l.advance()
		for {
			l.skipSpace(true) // TOML 1.1 allows newlines in inline tables
			if l.peek() == '}' {
				l.advance()
				return
			}
			l.keyValue(p)
			l.skipSpace(true)
			if l.peek() == ',' {
				l.advance()
			}
		}
	default:
		for !l.eof() {
			c := l.peek()
			if c == ',' || c == ']' || c == '}' || c == '\n' || c == '#' {
				return
			}
			l.advance()
		}
	}
}
