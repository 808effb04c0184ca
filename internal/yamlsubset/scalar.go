package yamlsubset

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Value is what a scalar resolves to under PyYAML's safe_load: nil, a
// bool, an int64, a float64 or a string.
func (n *Node) Value() any {
	if n.Quoted {
		return n.Text
	}
	s := n.Text
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil
	case "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return true
	case "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return false
	}
	if yamlInt.MatchString(s) {
		if v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64); err == nil {
			return v
		}
	}
	if yamlFloat.MatchString(s) {
		if v, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil {
			return v
		}
	}
	return s
}

// PyYAML's YAML 1.1 resolvers for decimal integers and floats: a float
// needs a dot, and an exponent needs its sign ("1e8" stays a string).
var (
	yamlInt   = regexp.MustCompile(`^[-+]?(0|[1-9][0-9_]*)$`)
	yamlFloat = regexp.MustCompile(`^[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?$`)
)

// unquote reads one single- or double-quoted scalar that is the whole of s.
func unquote(s string) (string, error) {
	q := s[0]
	body := s[1 : len(s)-1]
	if q == '\'' {
		return strings.ReplaceAll(body, "''", "'"), nil
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(body) {
			return "", errors.New("a backslash at the end of a double-quoted scalar")
		}
		switch body[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case '"', '\\', '/', ' ':
			b.WriteByte(body[i])
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[body[i]]
			if i+width >= len(body)+1 || i+1+width > len(body) {
				return "", errors.New("a short \\" + string(body[i]) + " escape")
			}
			v, err := strconv.ParseUint(body[i+1:i+1+width], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", errors.New("a bad \\" + string(body[i]) + " escape")
			}
			b.WriteRune(rune(v))
			i += width
		default:
			return "", errors.New("an unknown escape \\" + string(body[i]))
		}
	}
	return b.String(), nil
}
