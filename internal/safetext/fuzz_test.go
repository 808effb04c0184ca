package safetext

import (
	"strconv"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzQuoters checks every quoter on arbitrary strings: the Python and
// TOML literals read back as the string and stay on one ASCII line, and
// Term, Escape, Markdown and MarkdownCode are printable.
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
		if bareLink(Markdown(s)) {
			t.Fatalf("Markdown(%q) = %q keeps a URL scheme", s, Markdown(s))
		}
	})
}
