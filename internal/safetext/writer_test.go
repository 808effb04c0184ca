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

// TestASCII8: the eight-byte test of printableLines agrees with the byte
// by byte one for every byte value in every position.
func TestASCII8(t *testing.T) {
	for pos := range 8 {
		for v := range 256 {
			b := []byte("abcdefgh")
			b[pos] = byte(v)
			want := v == '\n' || v >= ' ' && v < 0x7f
			if got := ascii8(b); got != want {
				t.Errorf("ascii8(%q) = %v, want %v", b, got, want)
			}
			if got := ascii8(string(b)); got != want {
				t.Errorf("ascii8 of string %q = %v, want %v", b, got, want)
			}
		}
	}
	// Every byte a line feed, or a mix that sits at the bounds.
	for _, s := range []string{"\n\n\n\n\n\n\n\n", " ~\n ~\n ~", "\x1f~~~~~~~", "~~~~~~~\x7f", "\n\n\n\n\n\n\n\x0b"} {
		want := printableLinesSlow(s)
		if got := ascii8(s); got != want {
			t.Errorf("ascii8(%q) = %v, want %v", s, got, want)
		}
	}
}

func printableLinesSlow(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\n' && (c < ' ' || c >= 0x7f) {
			return false
		}
	}
	return true
}
