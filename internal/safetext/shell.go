package safetext

import "strings"

// Shell is a bash word whose value is s, for a generated shell script:
// bare when s is made of characters no shell treats specially (letters,
// digits and _ - . / : = @ % + ,), and does not start with = or ~;
// single-quoted ('it'\”s') when s is Printable, so nothing in it is
// expanded ($(), `, $VAR, globs) and it stays on one line; otherwise
// ANSI-C quoted ($'a\nb'), every byte outside printable ASCII, the quote
// and the backslash written as an escape, so a line break or a terminal
// escape in a path reads back byte for byte and cannot end the command.
// A NUL byte cannot be in an argument at all; it is written as \x00,
// which bash ends the word at, so callers refuse such strings first
// (ShellSafe).
func Shell(s string) string {
	if s == "" {
		return "''"
	}
	if plainWord(s) {
		return s
	}
	if Printable(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.Grow(len(s) + 3)
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c >= ' ' && c < 0x7f:
			b.WriteByte(c)
		default:
			b.WriteString(`\x`)
			b.WriteString(hex2(c))
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// ShellSafe reports whether s can be a process argument or environment
// value: it holds no NUL byte, which the kernel's argv cannot carry.
func ShellSafe(s string) bool { return !strings.Contains(s, "\x00") }

func plainWord(s string) bool {
	if s[0] == '=' || s[0] == '~' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-./:=@%+,", c) >= 0) {
			return false
		}
	}
	return true
}
