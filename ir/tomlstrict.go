package ir

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The TOML parser (BurntSushi/toml v1.6.0, the newest) reads TOML 1.1 and
// lets through a few documents that TOML 1.0 and 1.1 both forbid: a
// [table] header that reopens a table dotted keys defined, and dotted keys
// that add to a table a header, an inline table or an array of tables
// defined (toml-test's invalid/table/append-with-dotted-keys-*,
// duplicate-key-04/05, redefine-02/03, inline-table/overwrite-02/08). The
// first is how a line injected into a file's comment could add a constant
// to a [profile] (issue 28, H3). checkTOML10 re-reads text the parser
// accepted and refuses those, and what TOML 1.1 added that 1.0 does not
// allow (line breaks and a trailing comma in an inline table, \e and \x
// escapes, times without seconds), so a model or profile file means the
// same to every TOML 1.0 reader. TestTOMLSpecInvalid runs toml-test's
// invalid cases through the loader.

// tomlNode is a table, an array of tables or a value, with how it was
// defined: the rules for reopening and extending depend on it.
type tomlNode struct {
	kind     byte // 't' table, 'a' array of tables, 'v' value
	how      byte // tables: 'i' implied by a header, 'h' a header, 'd' dotted keys, 'l' inline
	at       Pos
	children map[string]*tomlNode
	last     *tomlNode // an array of tables' current element
}

func newTable(how byte, at Pos) *tomlNode {
	return &tomlNode{kind: 't', how: how, at: at, children: map[string]*tomlNode{}}
}

type strictScanner struct {
	locator
	err     string
	errAt   Pos
	current *tomlNode
}

// tomlError stops the scan at the first problem.
type tomlError struct{}

func (s *strictScanner) fail(at Pos, format string, args ...any) {
	s.err, s.errAt = fmt.Sprintf(format, args...), at
	panic(tomlError{})
}

// checkTOML10 returns the first place where text, which the TOML parser
// accepted, is not TOML 1.0, and what is wrong there; msg is "" when it is.
func checkTOML10(text string) (pos Pos, msg string) {
	s := &strictScanner{locator: locator{src: text, line: 1, col: 1, locs: map[string]location{}, aotLen: map[string]int{}}}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(tomlError); ok {
				pos, msg = s.errAt, s.err
			} else {
				pos, msg = Pos{}, "" // text this scan cannot follow: the parser's verdict stands
			}
		}
	}()
	s.document()
	return s.errAt, s.err
}

func (n *tomlNode) String() string {
	switch {
	case n.kind == 'a':
		return fmt.Sprintf("an array of tables ([[…]] on line %d)", n.at.Line)
	case n.kind == 'v':
		return fmt.Sprintf("a value (line %d)", n.at.Line)
	case n.how == 'h':
		return fmt.Sprintf("a table its [header] on line %d defined", n.at.Line)
	case n.how == 'd':
		return fmt.Sprintf("a table dotted keys on line %d defined", n.at.Line)
	case n.how == 'l':
		return fmt.Sprintf("an inline table (line %d)", n.at.Line)
	}
	return "a table"
}

func (s *strictScanner) document() {
	root := newTable('h', Pos{1, 1})
	s.current = root
	for {
		s.skipSpace(true)
		if s.eof() {
			return
		}
		if s.peek() != '[' {
			s.keyValue(s.current)
			continue
		}
		start := s.pos()
		s.advance()
		aot := s.peek() == '['
		if aot {
			s.advance()
		}
		keys, at := s.dottedKey()
		s.skipSpace(false)
		s.advance()
		if aot {
			s.advance()
		}
		name := strings.Join(keys, ".")
		t := root
		for i, k := range keys[:len(keys)-1] {
			c := t.children[k]
			switch {
			case c == nil:
				c = newTable('i', at[i])
				t.children[k] = c
			case c.kind == 'a':
				c = c.last
			case c.kind == 'v' || c.how == 'l':
				s.fail(start, "[%s]: %s is %s, which a header cannot extend", name, strings.Join(keys[:i+1], "."), c)
			}
			t = c
		}
		k := keys[len(keys)-1]
		c := t.children[k]
		switch {
		case c == nil && aot:
			c = &tomlNode{kind: 'a', at: start}
			t.children[k] = c
			fallthrough
		case c != nil && aot && c.kind == 'a':
			c.last = newTable('h', start)
			s.current = c.last
		case c == nil:
			c = newTable('h', start)
			t.children[k] = c
			s.current = c
		case !aot && c.kind == 't' && c.how == 'i':
			c.how, c.at = 'h', start
			s.current = c
		default:
			s.fail(start, "[%s] defines %s again: it is already %s (TOML 1.0 defines a table once: put its keys together)", name, name, c)
		}
	}
}

// keyValue reads key = value in table t, dotted keys creating or
// extending only tables dotted keys made.
func (s *strictScanner) keyValue(t *tomlNode) {
	keys, at := s.dottedKey()
	name := strings.Join(keys, ".")
	for i, k := range keys[:len(keys)-1] {
		c := t.children[k]
		switch {
		case c == nil:
			c = newTable('d', at[i])
			t.children[k] = c
		case c.kind == 't' && (c.how == 'd' || c.how == 'i'):
			c.how = 'd' // a later [header] may not reopen it
		default:
			s.fail(at[i], "%s: dotted keys cannot add to %s, which is %s", name, strings.Join(keys[:i+1], "."), c)
		}
		t = c
	}
	k := keys[len(keys)-1]
	if c := t.children[k]; c != nil {
		s.fail(at[len(at)-1], "%s is defined twice: it is already %s", name, c)
	}
	s.skipSpace(false)
	s.advance() // =
	s.skipSpace(false)
	t.children[k] = s.value(at[len(at)-1])
}

var (
	// A time, and a date-time's time and offset, as the scalar's text.
	timeRE   = regexp.MustCompile(`^(?:\d{4}-\d{2}-\d{2}[Tt ])?(\d{2}):(\d{2})(:\d{2}(?:\.\d+)?)?([Zz]|[+-](\d{2}):(\d{2}))?$`)
	escapeRE = regexp.MustCompile(`\\(?:[btnfr"\\]|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[ \t]*\r?\n)`)
)

func (s *strictScanner) value(at Pos) *tomlNode {
	start := s.pos()
	switch s.peek() {
	case '"', '\'':
		raw := s.stringLit()
		if raw[0] == '"' {
			rest := escapeRE.ReplaceAllString(raw, "")
			if i := strings.IndexByte(rest, '\\'); i >= 0 {
				s.fail(start, "the string %s has the escape %s, which TOML 1.0 does not have (it has \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX)",
					clip(raw), clip(rest[i:min(i+4, len(rest))]))
			}
		}
	case '[':
		s.advance()
		for {
			s.skipSpace(true)
			if s.peek() == ']' {
				s.advance()
				break
			}
			p := s.i
			s.value(s.pos())
			s.skipSpace(true)
			if s.peek() == ',' {
				s.advance()
			}
			if s.i == p {
				panic("lost in an array")
			}
		}
	case '{':
		s.advance()
		t := newTable('d', at) // its keys may be dotted while it is written
		for first := true; ; first = false {
			s.inlineSpace(start)
			if s.peek() == '}' {
				if !first {
					s.fail(s.pos(), "an inline table ends with a comma, which TOML 1.0 does not allow")
				}
				s.advance()
				break
			}
			s.keyValue(t)
			s.inlineSpace(start)
			if s.peek() != ',' {
				s.advance() // }
				break
			}
			s.advance()
		}
		t.how = 'l'
		return t
	default:
		p := s.i
		for !s.eof() {
			c := s.peek()
			if c == ',' || c == ']' || c == '}' || c == '\n' || c == '#' {
				break
			}
			s.advance()
		}
		scalar := strings.TrimRight(s.src[p:s.i], " \t\r")
		if m := timeRE.FindStringSubmatch(scalar); m != nil {
			hour, _ := strconv.Atoi(m[1])
			minute, _ := strconv.Atoi(m[2])
			switch {
			case m[3] == "":
				s.fail(start, "the time %s has no seconds, which TOML 1.0 requires (write %s:00)", scalar, scalar[:len(m[0])-len(m[4])])
			case hour > 23 || minute > 59:
				s.fail(start, "the time %s is not a time of day", scalar)
			case m[5] != "":
				if oh, _ := strconv.Atoi(m[5]); oh > 23 {
					s.fail(start, "the offset in %s is more than 23 hours", scalar)
				}
				if om, _ := strconv.Atoi(m[6]); om > 59 {
					s.fail(start, "the offset in %s has more than 59 minutes", scalar)
				}
			}
		}
	}
	return &tomlNode{kind: 'v', at: at}
}

// inlineSpace skips spaces in an inline table, which TOML 1.0 keeps on one
// line (values such as arrays may span lines).
func (s *strictScanner) inlineSpace(start Pos) {
	s.skipSpace(false)
	if s.peek() == '\n' {
		s.fail(start, "an inline table spans lines, which TOML 1.0 does not allow: keep it on one line or make it a [table]")
	}
}

func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}
