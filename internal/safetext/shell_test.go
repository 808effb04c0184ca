package safetext

import (
	"encoding/hex"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestShellBash has bash read back every hostile string from its Shell
// word, byte for byte, with nothing expanded or run.
func TestShellBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	in := append(append([]string{}, hostile...), "$(touch pwned)", "`id`", "${HOME}", "*", "a b", "'", `\`, "-n", "x\ny")
	var script strings.Builder
	var want []string
	for _, s := range in {
		if !ShellSafe(s) {
			continue
		}
		q := Shell(s)
		if strings.ContainsAny(q, "\n\r") {
			t.Errorf("Shell(%q) = %q spans lines", s, q)
		}
		script.WriteString("printf '%s' " + q + " | od -An -tx1 | tr -d ' \\n'; echo\n")
		want = append(want, hex.EncodeToString([]byte(s)))
	}
	dir := t.TempDir()
	cmd := exec.Command(bash, "--norc", "-c", script.String())
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("bash printed %d words for %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("word %d reads back as %s, want %s", i, got[i], want[i])
		}
	}
	if out, _ := exec.Command("ls", dir).Output(); len(out) > 0 {
		t.Errorf("a quoted word ran a command: %s", out)
	}
	if ShellSafe("a\x00b") {
		t.Error("ShellSafe accepts a NUL byte")
	}
}

// TestYAML reads each YAML scalar back with the escapes YAML defines and
// checks it is one ASCII line.
func TestYAML(t *testing.T) {
	for _, s := range hostile {
		q := YAML(s)
		checkASCIILiteral(t, "YAML", s, q)
		u, ok := unquoteYAML(q)
		if !ok || u != validRunes(s) {
			t.Errorf("YAML(%q) = %s reads back as %q", s, q, u)
		}
	}
}

// unquoteYAML reads a double-quoted scalar using only the escapes YAML
// 1.1 and 1.2 both define.
func unquoteYAML(q string) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	q = q[1 : len(q)-1]
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c == '"' {
			return "", false
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(q) {
			return "", false
		}
		width := 0
		switch q[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '"', '\\':
			b.WriteByte(q[i])
		case 'x':
			width = 2
		case 'u':
			width = 4
		case 'U':
			width = 8
		default:
			return "", false
		}
		if width > 0 {
			if i+width >= len(q)+1 || i+1+width > len(q) {
				return "", false
			}
			v, err := strconv.ParseUint(q[i+1:i+1+width], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", false
			}
			b.WriteRune(rune(v))
			i += width
		}
	}
	return b.String(), true
}
