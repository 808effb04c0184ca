package safetext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// escapes is how one format's double-quoted ASCII string spells what is
// not printable ASCII; Python, TOML and YAML differ only in these.
type escapes struct {
	cr        bool   // \r is a short escape
	x         bool   // \xHH for characters below U+0100
	hex       string // "x" or "X": the case of \u and \U digits
	undecoded string // a byte that is not UTF-8, as a format with one %02x verb; "" reads it as U+FFFD
}

// quoted is s as a double-quoted, pure-ASCII string literal in the
// escapes of e: the quote and backslash escaped, \n and \t short, every
// other character outside printable ASCII an escape.
func quoted(s string, e escapes) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1 && e.undecoded != "":
			fmt.Fprintf(&b, e.undecoded, s[i])
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r' && e.cr:
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r >= ' ' && r < 0x7f:
			b.WriteRune(r)
		case r < 0x100 && e.x:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04`+e.hex, r)
		default:
			fmt.Fprintf(&b, `\U%08`+e.hex, r)
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}
