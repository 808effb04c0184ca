// Package yamlsubset reads the block YAML of configuration files (an
// accelerate config, what `accelerate config` and PyYAML's safe_dump
// write) into a tree of nodes that remember their line and column, so a
// reader can name the place of a bad value. It is a subset: block
// mappings and sequences, plain, single- and double-quoted scalars on one
// line, and one-line flow sequences and mappings of scalars. Anchors,
// aliases, tags, block scalars (| and >), multi-line flow collections and
// several documents are refused with an error saying so, never guessed
// at. Scalars resolve as PyYAML's safe_load (YAML 1.1) resolves them:
// yes/no/on/off are booleans, 1e8 is a string, 1.0e+8 a float.
package yamlsubset

import (
	"fmt"
	"strings"
)

// Kind says what a node is.
type Kind uint8

const (
	Scalar Kind = iota
	Mapping
	Sequence
)

// Node is one value of a document.
type Node struct {
	Kind Kind
	// Text is a scalar's value after unquoting; Quoted marks a scalar
	// written in quotes, which is always a string.
	Text   string
	Quoted bool
	// Keys and Values are a mapping's entries in file order.
	Keys   []*Node
	Values []*Node
	// Items are a sequence's items.
	Items []*Node
	// Line and Col are 1-based, the first character of the value (of the
	// key, for a mapping's key node).
	Line, Col int
}

// Get returns the value of key in a mapping, or nil.
func (n *Node) Get(key string) *Node {
	for i, k := range n.Keys {
		if k.Text == key {
			return n.Values[i]
		}
	}
	return nil
}

// Error is a syntax error at a place in the text.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

type line struct {
	no, indent int
	text       string // without indentation and comment, right-trimmed
}

type parser struct {
	lines []line
	pos   int
}

// Parse reads one document. An empty document is a nil node.
func Parse(src []byte) (*Node, error) {
	text := string(src)
	text = strings.TrimPrefix(text, "\ufeff")
	var lines []line
	for i, raw := range strings.Split(text, "\n") {
		raw = strings.TrimSuffix(raw, "\r")
		no := i + 1
		body := strings.TrimLeft(raw, " ")
		indent := len(raw) - len(body)
		if strings.HasPrefix(body, "\t") {
			return nil, &Error{no, indent + 1, "a tab in indentation (YAML indents with spaces)"}
		}
		body, err := stripComment(body, no, indent)
		if err != nil {
			return nil, err
		}
		if body == "" {
			continue
		}
		if body == "---" && len(lines) == 0 && indent == 0 {
			continue // the start of the one document
		}
		if indent == 0 && (body == "---" || strings.HasPrefix(body, "--- ") || body == "...") {
			return nil, &Error{no, 1, "a second document or a document end marker: one document only"}
		}
		if strings.HasPrefix(body, "%") && indent == 0 {
			return nil, &Error{no, 1, "YAML directives are not supported"}
		}
		lines = append(lines, line{no: no, indent: indent, text: body})
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p := &parser{lines: lines}
	n, err := p.block(lines[0].indent)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.lines) {
		l := p.lines[p.pos]
		return nil, &Error{l.no, l.indent + 1, "unexpected indentation"}
	}
	return n, nil
}

// stripComment removes a comment (a # at the start or after a space,
// outside quotes) and trailing spaces.
func stripComment(s string, no, indent int) (string, error) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					i++
				} else {
					quote = 0
				}
			}
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimRight(s[:i], " \t"), nil
		case (c == '\'' || c == '"') && startsScalar(s, i):
			quote = c
		}
	}
	if quote != 0 {
		return "", &Error{no, indent + 1, "a quoted scalar that does not end on its line (multi-line scalars are not supported)"}
	}
	return strings.TrimRight(s, " \t"), nil
}

// startsScalar reports whether a quote at s[i] opens a quoted scalar: at
// the start, after "- ", after ": ", or inside a flow collection after
// "[", "{" or ", ".
func startsScalar(s string, i int) bool {
	if i == 0 {
		return true
	}
	prev := strings.TrimRight(s[:i], " ")
	return prev == "" || strings.HasSuffix(prev, ":") || strings.HasSuffix(prev, "-") ||
		strings.HasSuffix(prev, "[") || strings.HasSuffix(prev, "{") || strings.HasSuffix(prev, ",")
}

func (p *parser) errAt(l line, col int, format string, args ...any) error {
	return &Error{l.no, col, fmt.Sprintf(format, args...)}
}

// block reads the mapping or sequence whose lines start at indent.
func (p *parser) block(indent int) (*Node, error) {
	l := p.lines[p.pos]
	if isItem(l.text) {
		return p.sequence(indent)
	}
	if _, _, ok := splitKey(l.text); ok {
		return p.mapping(indent)
	}
	// A lone scalar document.
	n, err := p.value(l, l.text, l.indent)
	if err != nil {
		return nil, err
	}
	p.pos++
	return n, nil
}

func isItem(s string) bool { return s == "-" || strings.HasPrefix(s, "- ") }

func (p *parser) sequence(indent int) (*Node, error) {
	first := p.lines[p.pos]
	seq := &Node{Kind: Sequence, Line: first.no, Col: indent + 1}
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.indent < indent {
			break
		}
		if l.indent > indent {
			return nil, p.errAt(l, l.indent+1, "unexpected indentation")
		}
		if !isItem(l.text) {
			break
		}
		rest := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		inner := l.indent + len(l.text) - len(rest)
		switch {
		case rest == "":
			p.pos++
			if p.pos < len(p.lines) && p.lines[p.pos].indent > indent {
				n, err := p.block(p.lines[p.pos].indent)
				if err != nil {
					return nil, err
				}
				seq.Items = append(seq.Items, n)
			} else {
				seq.Items = append(seq.Items, &Node{Kind: Scalar, Line: l.no, Col: l.indent + 2})
			}
		case isItem(rest):
			return nil, p.errAt(l, inner+1, "nested sequences on one line are not supported")
		default:
			if _, _, ok := splitKey(rest); ok {
				// "- key: value": a mapping whose first key sits at inner.
				p.lines[p.pos] = line{no: l.no, indent: inner, text: rest}
				n, err := p.mapping(inner)
				if err != nil {
					return nil, err
				}
				seq.Items = append(seq.Items, n)
				continue
			}
			n, err := p.value(l, rest, inner)
			if err != nil {
				return nil, err
			}
			seq.Items = append(seq.Items, n)
			p.pos++
		}
	}
	return seq, nil
}

func (p *parser) mapping(indent int) (*Node, error) {
	first := p.lines[p.pos]
	m := &Node{Kind: Mapping, Line: first.no, Col: indent + 1}
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.indent < indent {
			break
		}
		if l.indent > indent {
			return nil, p.errAt(l, l.indent+1, "unexpected indentation")
		}
		if isItem(l.text) {
			return nil, p.errAt(l, l.indent+1, "a sequence item where a key was expected")
		}
		rawKey, rest, ok := splitKey(l.text)
		if !ok {
			return nil, p.errAt(l, l.indent+1, "%q is not key: value", l.text)
		}
		if strings.TrimSpace(rawKey) == "" {
			return nil, p.errAt(l, l.indent+1, "an empty key")
		}
		key, err := p.value(l, rawKey, l.indent)
		if err != nil {
			return nil, err
		}
		if key.Kind != Scalar {
			return nil, p.errAt(l, l.indent+1, "a key must be a scalar")
		}
		if prev := m.Get(key.Text); prev != nil {
			for i, k := range m.Keys {
				if k.Text == key.Text {
					return nil, p.errAt(l, l.indent+1, "key %s again (first at line %d)", quoteKey(key.Text), m.Keys[i].Line)
				}
			}
		}
		m.Keys = append(m.Keys, key)
		p.pos++
		if rest == "" {
			var v *Node
			switch {
			case p.pos < len(p.lines) && p.lines[p.pos].indent > indent:
				v, err = p.block(p.lines[p.pos].indent)
			case p.pos < len(p.lines) && p.lines[p.pos].indent == indent && isItem(p.lines[p.pos].text):
				// PyYAML writes a key's sequence at the key's indentation.
				v, err = p.sequence(indent)
			default:
				v = &Node{Kind: Scalar, Line: l.no, Col: l.indent + len(rawKey) + 2}
			}
			if err != nil {
				return nil, err
			}
			m.Values = append(m.Values, v)
			continue
		}
		col := l.indent + len(l.text) - len(rest)
		v, err := p.value(l, rest, col)
		if err != nil {
			return nil, err
		}
		m.Values = append(m.Values, v)
	}
	return m, nil
}

func quoteKey(s string) string {
	if s == "" || strings.ContainsAny(s, " :#'\"") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// splitKey splits "key: value" (or "key:") at the first ": " outside
// quotes; the key may be quoted.
func splitKey(s string) (key, rest string, ok bool) {
	if s == "" || s[0] == '[' || s[0] == '{' {
		return "", "", false
	}
	i := 0
	if s[0] == '\'' || s[0] == '"' {
		end := closingQuote(s)
		if end < 0 {
			return "", "", false
		}
		i = end + 1
	}
	for ; i < len(s); i++ {
		if s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ') {
			return s[:i], strings.TrimLeft(s[i+1:], " "), true
		}
	}
	return "", "", false
}

// closingQuote returns the index of the quote closing the quoted scalar
// that starts s, or -1.
func closingQuote(s string) int {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++
		case s[i] == q:
			return i
		}
	}
	return -1
}

// value reads one scalar or one-line flow collection s, which starts at
// 0-based column col of line l.
func (p *parser) value(l line, s string, col int) (*Node, error) {
	at := func(format string, args ...any) error { return p.errAt(l, col+1, format, args...) }
	if s == "" {
		return &Node{Kind: Scalar, Line: l.no, Col: col + 1}, nil
	}
	switch s[0] {
	case '&', '*':
		return nil, at("anchors and aliases are not supported")
	case '!':
		return nil, at("tags are not supported")
	case '|', '>':
		return nil, at("block scalars (| and >) are not supported")
	case '[', '{':
		n, rest, err := p.flow(l, s, col)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(rest) != "" {
			return nil, at("text after a flow collection: %q", rest)
		}
		return n, nil
	case '\'', '"':
		end := closingQuote(s)
		if end < 0 {
			return nil, at("a quoted scalar that does not end on its line")
		}
		if end != len(s)-1 {
			return nil, at("text after a quoted scalar: %q", s[end+1:])
		}
		text, err := unquote(s)
		if err != nil {
			return nil, at("%v", err)
		}
		return &Node{Kind: Scalar, Text: text, Quoted: true, Line: l.no, Col: col + 1}, nil
	}
	if strings.HasPrefix(s, "- ") || s == "-" {
		return nil, at("a sequence item where a value was expected")
	}
	if _, _, ok := splitKey(s); ok {
		return nil, at("a mapping on the line of its key is not supported; put it on the next lines, indented")
	}
	return &Node{Kind: Scalar, Text: s, Line: l.no, Col: col + 1}, nil
}

// flow reads a one-line flow sequence or mapping of scalars.
func (p *parser) flow(l line, s string, col int) (*Node, string, error) {
	open := s[0]
	closeCh := byte(']')
	n := &Node{Kind: Sequence, Line: l.no, Col: col + 1}
	if open == '{' {
		closeCh, n.Kind = '}', Mapping
	}
	i := 1
	skip := func() {
		for i < len(s) && s[i] == ' ' {
			i++
		}
	}
	for {
		skip()
		if i >= len(s) {
			return nil, "", p.errAt(l, col+1, "a flow collection that does not end on its line")
		}
		if s[i] == closeCh {
			return n, s[i+1:], nil
		}
		if s[i] == '[' || s[i] == '{' {
			return nil, "", p.errAt(l, col+i+1, "nested flow collections are not supported")
		}
		// One item: up to the next , or the closing bracket outside quotes.
		start := i
		if s[i] == '\'' || s[i] == '"' {
			end := closingQuote(s[i:])
			if end < 0 {
				return nil, "", p.errAt(l, col+i+1, "a quoted scalar that does not end on its line")
			}
			i += end + 1
		}
		for i < len(s) && s[i] != ',' && s[i] != closeCh {
			i++
		}
		item := strings.TrimRight(s[start:i], " ")
		if n.Kind == Mapping {
			k, v, ok := splitKey(item)
			if !ok {
				return nil, "", p.errAt(l, col+start+1, "%q is not key: value", item)
			}
			kn, err := p.value(l, k, col+start)
			if err != nil {
				return nil, "", err
			}
			var vn *Node
			if v == "" {
				vn = &Node{Kind: Scalar, Line: l.no, Col: col + start + len(k) + 2}
			} else if vn, err = p.value(l, v, col+start+len(item)-len(v)); err != nil {
				return nil, "", err
			}
			n.Keys, n.Values = append(n.Keys, kn), append(n.Values, vn)
		} else {
			if item == "" {
				return nil, "", p.errAt(l, col+start+1, "an empty item in a flow sequence")
			}
			vn, err := p.value(l, item, col+start)
			if err != nil {
				return nil, "", err
			}
			n.Items = append(n.Items, vn)
		}
		if i < len(s) && s[i] == ',' {
			i++
		}
	}
}
