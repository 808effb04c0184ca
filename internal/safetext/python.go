package safetext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Python is a Python 3 string literal whose value is s: double-quoted and
// pure ASCII, every character outside printable ASCII written as an escape
// (\n, \x1b, \u202e, \U0001f600). A byte that is not UTF-8 becomes the lone
// surrogate U+DC80+byte, as Python's os.fsdecode represents an undecodable
// byte in a file name, so a path round-trips through os.fsencode.
func Python(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\udc%02x`, s[i])
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r >= ' ' && r < 0x7f:
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}
