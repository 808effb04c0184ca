package docs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// TestPlanFormatPage: docs/plan-format.md states the format version the
// code writes, lists every version in its history, shows example bytes
// that are the fixture's, and quotes the decoder's errors as it prints
// them. The page once said version 3 of a version-6 format.
func TestPlanFormatPage(t *testing.T) {
	page := readFile(t, "plan-format.md")
	fixture := readFile(t, "../schedule/testdata/tiny.plan.hex")
	v := schedule.FormatVersion

	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`specifies the bytes of\s+format version (\d+)`),
		regexp.MustCompile("`schedule.FormatVersion` \\((\\d+)\\)"),
	} {
		m := re.FindStringSubmatch(page)
		if m == nil {
			t.Errorf("plan-format.md no longer matches %q: keep the version stated where this test can read it", re)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n != v {
			t.Errorf("plan-format.md: %q says version %d; schedule.FormatVersion is %d", m[0], n, v)
		}
	}
	for n := 2; n <= v; n++ {
		if !regexp.MustCompile(fmt.Sprintf(`(?i)\bversion %d (added|changed)\b`, n)).MatchString(page) {
			t.Errorf("plan-format.md: the version history does not say what version %d added", n)
		}
	}

	// Every example line (offset, bytes | field) is a line of the fixture.
	lineRE := regexp.MustCompile(`(?m)^    ([0-9a-f]{4}  [0-9a-f ]+\| .+)$`)
	fixtureLines := map[string]bool{}
	for _, l := range strings.Split(fixture, "\n") {
		fixtureLines[strings.Join(strings.Fields(l), " ")] = true
	}
	examples := lineRE.FindAllStringSubmatch(page, -1)
	if len(examples) < 5 {
		t.Fatalf("plan-format.md: only %d example byte lines found", len(examples))
	}
	for _, m := range examples {
		if !fixtureLines[strings.Join(strings.Fields(m[1]), " ")] {
			t.Errorf("plan-format.md: example line %q is not in schedule/testdata/tiny.plan.hex", m[1])
		}
	}

	// The quoted errors are the decoder's own.
	plan := fixtureBytes(t, fixture)
	newer := bytes.Clone(plan)
	binary.LittleEndian.PutUint32(newer[4:], uint32(v+1))
	for name, b := range map[string][]byte{
		"a newer version": newer,
		"a TOML model":    []byte("[model]\nname = \"x\"\n"),
	} {
		_, err := schedule.Decode(b)
		if err == nil {
			t.Fatalf("%s decodes", name)
		}
		if !strings.Contains(page, "    "+err.Error()+"\n") {
			t.Errorf("plan-format.md does not quote the error for %s as the decoder prints it:\n    %s", name, err)
		}
	}
}

// fixtureBytes parses the hex fixture: each line's bytes after the offset,
// up to the "|" label.
func fixtureBytes(t *testing.T, text string) []byte {
	t.Helper()
	var out []byte
	for _, l := range strings.Split(text, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		data, _, _ := strings.Cut(l, "|")
		f := strings.Fields(data)
		if len(f) < 2 {
			continue
		}
		b, err := hex.DecodeString(strings.Join(f[1:], ""))
		if err != nil {
			t.Fatalf("tiny.plan.hex: %q: %v", l, err)
		}
		out = append(out, b...)
	}
	return out
}
