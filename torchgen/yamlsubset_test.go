package torchgen

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseYAMLSubset reads the block YAML the TrainJob writer emits, and
// refuses anything else, so a string that escaped its quotes shows up as
// an error rather than a different document: comment lines, "key: value"
// and "key:" with a nested block at two more spaces, "- value" and "- key:
// value" list items; a value is a double-quoted scalar (YAML's escapes),
// a whole number, or a plain word of letters, digits and ./-. Duplicate
// keys and tabs are errors.
func parseYAMLSubset(text string) (any, error) {
	var lines []yamlLine
	for i, raw := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.Contains(raw, "\t") {
			return nil, fmt.Errorf("line %d: a tab", i+1)
		}
		trimmed := strings.TrimLeft(raw, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		lines = append(lines, yamlLine{no: i + 1, indent: len(raw) - len(trimmed), text: trimmed})
	}
	r := &yamlReader{lines: lines}
	v, err := r.block(0)
	if err != nil {
		return nil, err
	}
	if r.pos != len(r.lines) {
		l := r.lines[r.pos]
		return nil, fmt.Errorf("line %d: unexpected indentation %d", l.no, l.indent)
	}
	return v, nil
}

type yamlLine struct {
	no, indent int
	text       string
}

type yamlReader struct {
	lines []yamlLine
	pos   int
}

var yamlKey = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9./-]*):(?: (.*))?$`)

func (r *yamlReader) block(indent int) (any, error) {
	if r.pos >= len(r.lines) || r.lines[r.pos].indent != indent {
		return nil, fmt.Errorf("line %d: expected a block at indentation %d", r.lineNo(), indent)
	}
	if strings.HasPrefix(r.lines[r.pos].text, "- ") {
		var list []any
		for r.pos < len(r.lines) && r.lines[r.pos].indent == indent && strings.HasPrefix(r.lines[r.pos].text, "- ") {
			l := r.lines[r.pos]
			item := l.text[2:]
			if yamlKey.MatchString(item) {
				// "- key: value": a map whose first key sits two columns in.
				r.lines[r.pos] = yamlLine{no: l.no, indent: indent + 2, text: item}
				m, err := r.block(indent + 2)
				if err != nil {
					return nil, err
				}
				list = append(list, m)
				continue
			}
			v, err := yamlScalar(item, l.no)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			r.pos++
		}
		return list, nil
	}
	m := map[string]any{}
	for r.pos < len(r.lines) && r.lines[r.pos].indent == indent {
		l := r.lines[r.pos]
		g := yamlKey.FindStringSubmatch(l.text)
		if g == nil {
			return nil, fmt.Errorf("line %d: %q is not key: value", l.no, l.text)
		}
		if _, dup := m[g[1]]; dup {
			return nil, fmt.Errorf("line %d: key %s again", l.no, g[1])
		}
		r.pos++
		if g[2] == "" && !strings.HasSuffix(l.text, ": ") {
			v, err := r.block(indent + 2)
			if err != nil {
				return nil, err
			}
			m[g[1]] = v
			continue
		}
		v, err := yamlScalar(g[2], l.no)
		if err != nil {
			return nil, err
		}
		m[g[1]] = v
	}
	return m, nil
}

func (r *yamlReader) lineNo() int {
	if r.pos < len(r.lines) {
		return r.lines[r.pos].no
	}
	return -1
}

var yamlPlain = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9./-]*$`)

func yamlScalar(s string, line int) (any, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if yamlPlain.MatchString(s) && s != "true" && s != "false" && s != "null" && s != "yes" && s != "no" {
		return s, nil
	}
	if v, ok := yamlUnquote(s); ok {
		return v, nil
	}
	return nil, fmt.Errorf("line %d: %q is not a scalar of the subset", line, s)
}

// yamlUnquote reads one double-quoted scalar that is the whole of s.
func yamlUnquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			return "", false
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			return "", false
		}
		width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[i]]
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '"', '\\':
			b.WriteByte(s[i])
		case 'x', 'u', 'U':
			if i+width >= len(s)+0 && i+1+width > len(s) {
				return "", false
			}
			v, err := strconv.ParseUint(s[i+1:i+1+width], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", false
			}
			b.WriteRune(rune(v))
			i += width
		default:
			return "", false
		}
	}
	return b.String(), true
}
