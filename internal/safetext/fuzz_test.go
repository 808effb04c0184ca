package safetext

import (
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzQuoters checks every quoter on arbitrary strings: the Python and
// TOML literals read back as the string and stay on one ASCII line, and
// Term, Escape, Markdown and MarkdownCode are printable, and Writer's
// escaping without escape sequences is Escape between line breaks.
func FuzzQuoters(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := Python(s)
		checkASCIILiteral(t, "Python", s, p)
		if u, ok := unquotePython(p); !ok || u != s {
			t.Fatalf("Python(%q) = %s reads back as %q", s, p, u)
		}
		q := TOML(s)
		checkASCIILiteral(t, "TOML", s, q)
		var v map[string]any
		if _, err := toml.Decode("k = "+q, &v); err != nil || v["k"] != validRunes(s) {
			t.Fatalf("TOML(%q) = %s reads back as %v (%v)", s, q, v, err)
		}
		if _, err := toml.Decode("# "+TOMLComment(s)+"\n", &v); err != nil {
			t.Fatalf("TOMLComment(%q): %v", s, err)
		}
		for name, out := range map[string]string{"Term": Term(s), "Escape": Escape(s), "Markdown": Markdown(s), "MarkdownCode": MarkdownCode(s)} {
			if !Printable(out) {
				t.Fatalf("%s(%q) = %q is not printable", name, s, out)
			}
		}
		if !Printable(s) {
			if u, err := strconv.Unquote(Term(s)); err != nil || u != s {
				t.Fatalf("Term(%q) = %q unquotes to %q, %v", s, Term(s), u, err)
			}
		}
		if !strings.Contains(s, "\x1b") {
			// Without escape sequences, what Writer prints is each run
			// between line breaks and tabs Escape'd; escapeTerm's fast path
			// must agree.
			var want strings.Builder
			run := 0
			for i := 0; i <= len(s); i++ {
				if i == len(s) || s[i] == '\n' || s[i] == '\t' || s[i] == '\r' {
					want.WriteString(Escape(s[run:i]))
					if i < len(s) {
						want.WriteByte(s[i])
					}
					run = i + 1
				}
			}
			if got := escapeTerm(s); got != want.String() {
				t.Fatalf("escapeTerm(%q) = %q, want %q", s, got, want.String())
			}
			if got, b := printableLines(s), printableLines([]byte(s)); got != b || got != (want.String() == s) {
				t.Fatalf("printableLines(%q) = %v, of its bytes %v; escapeTerm changes it: %v", s, got, b, want.String() != s)
			}
		}
		if bareLink(Markdown(s)) {
			t.Fatalf("Markdown(%q) = %q keeps a URL scheme", s, Markdown(s))
		}
	})
}
