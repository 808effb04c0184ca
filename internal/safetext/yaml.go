package safetext

import (
	"fmt"
	"strings"
)

// YAML is a YAML double-quoted scalar whose value is s, for a generated
// manifest: pure ASCII, the quote and the backslash escaped, every
// character outside printable ASCII written as an escape both YAML 1.1
// and 1.2 define (\n, \t, \x1b, \u202e, \U0001f600), so a line break
// cannot start a new key and a string never becomes a number, a boolean
// or null. YAML strings hold Unicode only, so a byte that is not UTF-8
// becomes U+FFFD.
func YAML(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
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
	}
	b.WriteByte('"')
	return b.String()
}
