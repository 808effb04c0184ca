package safetext

// YAML is a YAML double-quoted scalar whose value is s, for a generated
// manifest: pure ASCII, the quote and the backslash escaped, every
// character outside printable ASCII written as an escape both YAML 1.1
// and 1.2 define (\n, \t, \x1b, \u202e, \U0001f600), so a line break
// cannot start a new key and a string never becomes a number, a boolean
// or null. YAML strings hold Unicode only, so a byte that is not UTF-8
// becomes U+FFFD.
func YAML(s string) string {
	return quoted(s, escapes{x: true, hex: "x"})
}
