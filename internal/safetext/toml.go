package safetext

// TOML is a TOML basic string whose value is s: double-quoted and pure
// ASCII, every character outside printable ASCII written as an escape that
// TOML 1.0 defines (\n, \t, \u001b, \U0001f600). TOML strings hold Unicode
// only, so a byte that is not UTF-8 becomes U+FFFD.
func TOML(s string) string {
	return quoted(s, escapes{cr: true, hex: "X"})
}

// TOMLComment is s for the text of a TOML comment, which runs to the end of
// the line: Escape'd, so no line break ends the comment early and no
// control character (which TOML forbids in comments) gets in.
func TOMLComment(s string) string { return Escape(s) }
