// Package safetext quotes and escapes strings that come from a file, a path
// or a plan for each format fsdpc writes: Python string literals, TOML basic
// strings, Markdown, and text for a terminal. Such a string is data: a
// newline in a file name must not add a line to generated code, a profile or
// a review comment, and an escape sequence must not reach the terminal.
// Every writer of those formats goes through here, so there is one rule per
// format (HTML is html/template's job).
package safetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable reports whether s is valid UTF-8 made of printable characters
// only (unicode.IsPrint: letters, marks, numbers, punctuation, symbols and
// the ASCII space). It excludes control characters, line breaks, tabs, the
// bidirectional overrides and other format characters, so a printable string
// looks like what it is wherever it is shown.
func Printable(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < ' ' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || !unicode.IsPrint(r) {
			return false
		}
		i += n
	}
	return true
}

// Term is s for a terminal or any line-oriented text: unchanged when it is
// Printable, otherwise quoted as Go quotes strings ("x\n\x1b[2J"), so that
// neither a line break nor an escape sequence reaches the output and the
// reader sees the string is unusual.
func Term(s string) string {
	if Printable(s) {
		return s
	}
	return strconv.Quote(s)
}

// Escape replaces every character Printable refuses with a Go escape (\n,
// \x1b, \u202e; an invalid UTF-8 byte as \xff) and leaves the rest, the
// backslash included, as it is. It is for text that mixes fsdpc's own words
// with strings from elsewhere and keeps its own line breaks: apply it line
// by line.
func Escape(s string) string {
	if Printable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r < utf8.RuneSelf && (r < ' ' || r == 0x7f), !unicode.IsPrint(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}
