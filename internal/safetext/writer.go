package safetext

import (
	"bytes"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Writer passes text to a terminal (or a file a person will read) with
// every character Printable refuses Escape'd, except what fsdpc's own
// output uses: line feeds, tabs, carriage returns (progress lines), and the
// CSI sequences ESC [ digits m (colour) and ESC [ K (erase the line). So no
// string a command prints, wherever it came from, can move the cursor,
// retitle the window, write to the clipboard or hide text behind a
// bidirectional override. Quote, for its part, lists strings (a command's
// own arguments) whose raw appearance is replaced by their Term form, so a
// file name with a line break does not forge a line of an error message.
//
// A write may end inside a UTF-8 sequence (a bufio.Writer flushes at its
// size); those bytes wait for the next Write, or Flush.
type Writer struct {
	W     io.Writer
	Quote []string
	tail  []byte
}

// Write escapes p and writes it; it reports len(p) when the escaped text
// was written whole.
func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	if len(w.tail) > 0 {
		p = append(w.tail, p...)
		w.tail = nil
	}
	if cut := incompleteTail(p); cut < len(p) {
		w.tail = append([]byte(nil), p[cut:]...)
		p = p[:cut]
	}
	quoted := false
	for _, q := range w.Quote {
		if q != "" && !Printable(q) && bytes.Contains(p, []byte(q)) {
			quoted = true
			break
		}
	}
	if !quoted && printableLines(p) {
		// Nothing to escape: p as it is, without copying it to a string.
		if _, err := w.W.Write(p); err != nil {
			return 0, err
		}
		return n, nil
	}
	s := string(p)
	for _, q := range w.Quote {
		if q != "" && !Printable(q) && strings.Contains(s, q) {
			s = strings.ReplaceAll(s, q, Term(q))
		}
	}
	if _, err := io.WriteString(w.W, escapeTerm(s)); err != nil {
		return 0, err
	}
	return n, nil
}

// Flush writes what a Write left waiting (an incomplete UTF-8 sequence),
// escaped.
func (w *Writer) Flush() error {
	if len(w.tail) == 0 {
		return nil
	}
	t := string(w.tail)
	w.tail = nil
	_, err := io.WriteString(w.W, Escape(t))
	return err
}

// incompleteTail is where a UTF-8 sequence that p cuts short starts, or
// len(p).
func incompleteTail(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if p[i] >= utf8.RuneSelf && !utf8.FullRune(p[i:]) {
				return i
			}
			break
		}
	}
	return len(p)
}

// escapeTerm is Escape but for the control characters Writer lets through.
func escapeTerm(s string) string {
	if printableLines(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n' || c == '\t' || c == '\r':
			b.WriteByte(c)
			i++
			continue
		case c == 0x1b:
			if n := csi(s[i:]); n > 0 {
				b.WriteString(s[i : i+n])
				i += n
				continue
			}
		}
		// The run up to the next allowed control character.
		j := i + 1
		for j < len(s) && strings.IndexByte("\n\t\r\x1b", s[j]) < 0 {
			j++
		}
		b.WriteString(Escape(s[i:j]))
		i = j
	}
	return b.String()
}

// printableLines reports whether s is Printable but for line breaks and
// tabs, which escapeTerm passes through: then it is s. This is the common
// case (every line of output), checked in one pass; the loop below would
// look at each byte twice and copy the text (9 s of show -json's 29 on a
// 3.28 M-operation plan). Eight bytes of printable ASCII or line feeds
// are checked at once (ascii8): the readers of the largest plans write
// gigabytes of JSON.
func printableLines[T string | []byte](s T) bool {
	for i := 0; i < len(s); {
		if i+8 <= len(s) && ascii8(s[i:i+8]) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < ' ' && c != '\n' && c != '\t' && c != '\r') || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && n == 1 || !unicode.IsPrint(r) {
			return false
		}
		i += n
	}
	return true
}

// ascii8 reports whether each of the 8 bytes of s is printable ASCII
// (' ' to '~') or a line feed. Each test is exact per byte (no carry
// crosses a byte): for a byte b < 0x80, b+0x60 has its top bit set iff
// b >= 0x20, b+0x01 iff b == 0x7f, and (b^'\n')+0x7f iff b != '\n'.
func ascii8[T string | []byte](s T) bool {
	_ = s[7]
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	const ones, high = 0x0101010101010101, 0x8080808080808080
	if w&high != 0 {
		return false
	}
	control := ^(w + 0x60*ones) & high // b < 0x20
	del := (w + ones) & high           // b == 0x7f
	lf := ^((w ^ '\n'*ones) + 0x7f*ones) & high
	return del == 0 && control&^lf == 0
}

// csi is the length of an ESC [ digits/semicolons m or K sequence at the
// start of s, or 0.
func csi(s string) int {
	if len(s) < 3 || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s) && i < 32; i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9' || c == ';':
		case c == 'm' || c == 'K':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}
