package safetext

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// hostile are the strings every test feeds each quoter: line breaks,
// terminal escapes, quotes of each format, a bidirectional override,
// invalid UTF-8, and text that means something in Markdown.
var hostile = []string{
	"",
	"plain-name_1.2",
	"x\nopen(\"pwned\",\"w\").write(\"1\")\n#",
	"x\nprofile.clock_ratio = 0.05\n#",
	"\x1b[2J\x1b]0;title\x07",
	`a"b'c\d` + "'''" + `"""`,
	"tab\there\rcr",
	"\u202eevil\u2066",
	"bad\xff\xfeutf8",
	"\x00nul\x7fdel\u0085nel",
	"# heading\n![img](https://evil.example/x.png) [link](http://x) <script>alert(1)</script> www.evil.com a@b.c `code` *em* _em_ |cell| ~~s~~ &amp;",
	"emoji \U0001F600 é 漢",
	"```",
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"", true}, {"NVIDIA A100 SXM4 80GB", true}, {"é 漢 …", true},
		{"a\nb", false}, {"a\tb", false}, {"\x1b", false}, {"\x7f", false}, {"\u0085", false},
		{"\u202e", false}, {"\u200b", false}, {"\xff", false}, {"\u00a0", false},
	} {
		if got := Printable(tc.s); got != tc.want {
			t.Errorf("Printable(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestTermAndEscape(t *testing.T) {
	for _, s := range hostile {
		for name, got := range map[string]string{"Term": Term(s), "Escape": Escape(s)} {
			if !Printable(got) {
				t.Errorf("%s(%q) = %q is not printable", name, s, got)
			}
		}
		if Printable(s) && (Term(s) != s || Escape(s) != s) {
			t.Errorf("a printable %q changed: Term %q, Escape %q", s, Term(s), Escape(s))
		}
		if !Printable(s) {
			if u, err := strconv.Unquote(Term(s)); err != nil || u != s {
				t.Errorf("Term(%q) = %q does not unquote to the string: %q, %v", s, Term(s), u, err)
			}
		}
	}
	if got, want := Escape("a\\b\nc\x1b\xffd\u202e"), `a\b\nc\x1b\xffd\u202e`; got != want {
		t.Errorf("Escape = %q, want %q", got, want)
	}
}

func TestPython(t *testing.T) {
	for _, s := range hostile {
		q := Python(s)
		checkASCIILiteral(t, "Python", s, q)
		if u, ok := unquotePython(q); !ok || u != s {
			t.Errorf("Python(%q) = %s reads back as %q", s, q, u)
		}
	}
}

// TestPythonInterpreter checks the literals with a real Python: each must
// evaluate to the string (os.fsencode gives back a path's bytes).
func TestPythonInterpreter(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	var prog strings.Builder
	prog.WriteString("import os, sys\nfor s in [\n")
	for _, s := range hostile {
		prog.WriteString("    " + Python(s) + ",\n")
	}
	prog.WriteString("]:\n    sys.stdout.buffer.write(os.fsencode(s).hex().encode() + b'\\n')\n")
	out, err := exec.Command(py, "-c", prog.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(hostile) {
		t.Fatalf("python3 printed %d lines for %d strings:\n%s", len(lines), len(hostile), out)
	}
	for i, s := range hostile {
		if want := hexOf(s); lines[i] != want {
			t.Errorf("Python(%q) evaluates to bytes %s, want %s", s, lines[i], want)
		}
	}
}

func TestTOML(t *testing.T) {
	for _, s := range hostile {
		q := TOML(s)
		checkASCIILiteral(t, "TOML", s, q)
		var v map[string]any
		if _, err := toml.Decode("k = "+q+"\n", &v); err != nil {
			t.Errorf("TOML(%q) = %s does not parse: %v", s, q, err)
			continue
		}
		if got := v["k"]; got != validRunes(s) || len(v) != 1 {
			t.Errorf("TOML(%q) = %s reads back as %v", s, q, v)
		}
		c := "# from " + TOMLComment(s) + "\nk = 1\n"
		if _, err := toml.Decode(c, &v); err != nil || len(v) != 1 {
			t.Errorf("comment %q: %v %v", c, v, err)
		}
	}
}

func TestMarkdown(t *testing.T) {
	for _, s := range hostile {
		m := Markdown(s)
		if !Printable(m) {
			t.Errorf("Markdown(%q) = %q is not printable", s, m)
		}
		for i := 0; i < len(m); i++ {
			if !strings.ContainsRune("`*_[]<>!#|~&{}@", rune(m[i])) ||
				m[i] == '_' && i > 0 && i+1 < len(m) && alnum(m[i-1]) && alnum(m[i+1]) {
				continue
			}
			if n := backslashesBefore(m, i); n%2 == 0 {
				t.Errorf("Markdown(%q) = %q: %q at %d is not escaped", s, m, m[i], i)
			}
		}
		if bareLink(m) {
			t.Errorf("Markdown(%q) = %q leaves a URL for GitHub to link", s, m)
		}
		c := MarkdownCode(s)
		if !Printable(c) {
			t.Errorf("MarkdownCode(%q) = %q is not printable", s, c)
		}
	}
	for _, tc := range []struct{ s, want string }{
		{"a", "`a`"}, {"", "` `"}, {"a`b", "``a`b``"}, {"`", "`` ` ``"}, {"a\nb", "`a\\nb`"},
	} {
		if got := MarkdownCode(tc.s); got != tc.want {
			t.Errorf("MarkdownCode(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// bareLink reports whether m has a "://" or "www." GitHub would link: one
// whose ':' or '.' is not backslash-escaped.
func bareLink(m string) bool {
	l := strings.ToLower(m)
	for _, pat := range []string{"://", "www."} {
		for i := strings.Index(l, pat); i >= 0; i = next(l, pat, i) {
			at := i
			if pat == "www." {
				at = i + 3
			}
			if backslashesBefore(m, at)%2 == 0 {
				return true
			}
		}
	}
	return false
}

func next(s, pat string, i int) int {
	j := strings.Index(s[i+1:], pat)
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func backslashesBefore(s string, i int) int {
	n := 0
	for i > 0 && s[i-1] == '\\' {
		n++
		i--
	}
	return n
}

func checkASCIILiteral(t *testing.T, name, s, q string) {
	t.Helper()
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		t.Errorf("%s(%q) = %s is not double-quoted", name, s, q)
	}
	for i := 0; i < len(q); i++ {
		if q[i] < ' ' || q[i] >= 0x7f {
			t.Errorf("%s(%q) = %q has byte %#x", name, s, q, q[i])
			return
		}
	}
}

// unquotePython reads back the literals Python writes (the escapes it
// uses, nothing more), giving undecodable bytes back from their surrogates.
func unquotePython(q string) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	q = q[1 : len(q)-1]
	var b []byte
	for i := 0; i < len(q); i++ {
		if q[i] == '"' {
			return "", false
		}
		if q[i] != '\\' {
			b = append(b, q[i])
			continue
		}
		if i+1 >= len(q) {
			return "", false
		}
		i++
		digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[q[i]]
		switch q[i] {
		case '\\', '"':
			b = append(b, q[i])
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'x', 'u', 'U':
			if i+1+digits > len(q) {
				return "", false
			}
			v, err := strconv.ParseUint(q[i+1:i+1+digits], 16, 32)
			if err != nil {
				return "", false
			}
			i += digits
			if v >= 0xdc80 && v <= 0xdcff {
				b = append(b, byte(v-0xdc00))
			} else {
				b = utf8.AppendRune(b, rune(v))
			}
		default:
			return "", false
		}
	}
	return string(b), true
}

// validRunes is s with each byte that is not UTF-8 replaced by U+FFFD.
func validRunes(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

func hexOf(s string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(digits[s[i]>>4])
		b.WriteByte(digits[s[i]&15])
	}
	return b.String()
}
