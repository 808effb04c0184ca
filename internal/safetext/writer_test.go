package safetext

import (
	"bytes"
	"testing"
)

func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		writes []string
		quote  []string
		want   string
	}{
		{[]string{"plain → text\n\tindented\n"}, nil, "plain → text\n\tindented\n"},
		{[]string{"\x1b[31mold\x1b[0m → \x1b[32mnew\x1b[0m\n"}, nil, "\x1b[31mold\x1b[0m → \x1b[32mnew\x1b[0m\n"},
		{[]string{"\r[###] 50%", "\r\x1b[K"}, nil, "\r[###] 50%\r\x1b[K"},
		{[]string{"title \x1b]0;pwned\x07 clear \x1b[2J \x1b[H\n"}, nil, `title \x1b]0;pwned\a clear \x1b[2J \x1b[H` + "\n"},
		{[]string{"bidi \u202eevil\n"}, nil, `bidi \u202eevil` + "\n"},
		// A rune split between writes is kept whole.
		{[]string{"a\xe2\x86", "\x92b"}, nil, "a→b"},
		{[]string{"cut \xe2\x86"}, nil, `cut \xe2\x86`},
		// An argument with a line break is quoted where it appears.
		{[]string{"open x\nfsdpc: ok.toml: no such file\n"}, []string{"x\nfsdpc: ok.toml"}, `open "x\nfsdpc: ok.toml": no such file` + "\n"},
	} {
		var b bytes.Buffer
		w := &Writer{W: &b, Quote: tc.quote}
		for _, s := range tc.writes {
			if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
				t.Fatalf("Write(%q) = %d, %v", s, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != tc.want {
			t.Errorf("%q: wrote %q, want %q", tc.writes, got, tc.want)
		}
	}
}
