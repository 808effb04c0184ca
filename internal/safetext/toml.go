package safetext

import (
	"fmt"
	"strings"
)

// TOML is a TOML basic string whose value is s: double-quoted and pure
// ASCII, every character outside printable ASCII written as an escape that
// TOML 1.0 defines (\n, \t, \u001b, \U0001f600). TOML strings hold Unicode
// only, so a byte that is not UTF-8 becomes U+FFFD.
func TOML(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s { // invalid UTF-8 ranges as U+FFFD
		switch {
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
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TOMLComment is s for the text of a TOML comment, which runs to the end of
// the line: Escape'd, so no line break ends the comment early and no
// control character (which TOML forbids in comments) gets in.
func TOMLComment(s string) string { return Escape(s) }
