package safetext

// Python is a Python 3 string literal whose value is s: double-quoted and
// pure ASCII, every character outside printable ASCII written as an escape
// (\n, \x1b, \u202e, \U0001f600). A byte that is not UTF-8 becomes the lone
// surrogate U+DC80+byte, as Python's os.fsdecode represents an undecodable
// byte in a file name, so a path round-trips through os.fsencode.
func Python(s string) string {
	return quoted(s, escapes{cr: true, x: true, hex: "x", undecoded: `\udc%02x`})
}
