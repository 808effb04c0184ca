package schedule_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/internal/forge"
	"github.com/fsdpc/fsdpc/internal/safetext"
	. "github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// TestForgedStrings puts each hostile string in each string field of a
// checksum-valid plan.bin: decode refuses every one a field's rule does
// not allow (a line break, an escape, invalid UTF-8 anywhere; anything but
// a module path in a name), with an error that is itself one printable
// line, and what it accepts (printable text in a label) reaches show's
// text and diff's views as printable lines.
func TestForgedStrings(t *testing.T) {
	base := zooPlanNamed(t, "gpt2-124m").plan
	var accepted int
	for _, f := range forge.StringFields() {
		for _, h := range forge.Hostile {
			b, err := forge.Bytes(base, f, h.S)
			if err != nil {
				t.Fatalf("%s = %q does not encode: %v", f.Name, h.S, err)
			}
			q, err := Decode(b)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalidPlan) {
					t.Errorf("%s = %q: refused with %v, want ErrMalformed or ErrInvalidPlan", f.Name, h.S, err)
				}
				if !safetext.Printable(err.Error()) {
					t.Errorf("%s = %q: the error echoes it raw: %q", f.Name, h.S, err)
				}
				continue
			}
			if !h.Printable || !f.Label && h.S != "evil_module" {
				t.Errorf("%s = %q: decode accepts it", f.Name, h.S)
				continue
			}
			accepted++
			var text bytes.Buffer
			if err := WriteText(&text, q); err != nil {
				t.Fatal(err)
			}
			d := diff.Compare("old", base, "new", q)
			var views bytes.Buffer
			diff.Text(&views, d, false)
			diff.Markdown(&views, d)
			for _, out := range []string{text.String(), views.String()} {
				for _, line := range strings.Split(out, "\n") {
					if !safetext.Printable(line) {
						t.Errorf("%s = %q: a line of output is not printable: %q", f.Name, h.S, line)
					}
				}
			}
		}
	}
	if accepted == 0 {
		t.Error("no forgery was accepted: the writers' side is not tested")
	}
}
