package jsonindent

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzCompact checks Compact against json.Indent on the
// compact form of any valid JSON, and that it never panics on the rest.
//
//	go test -run '^$' -fuzz FuzzCompact -fuzztime 60s ./internal/jsonindent
func FuzzCompact(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[],"b":{},"c":[1,2.5e-7,"x\"]:,{"],"d":null}`,
		`[{"k":"\u003c\\"},true,false,-0]`, `"unterminated`, `{"op":1,"uses":[3,4],"gemms":[{"m":1}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var got bytes.Buffer
		if !json.Valid(src) {
			_ = Compact(&got, src, "  ", " ") // no panic
			return
		}
		var compact, want bytes.Buffer
		if err := json.Compact(&compact, src); err != nil {
			t.Fatal(err)
		}
		if err := json.Indent(&want, compact.Bytes(), "      ", "  "); err != nil {
			t.Fatal(err)
		}
		if err := Compact(&got, compact.Bytes(), "      ", "  "); err != nil || got.String() != want.String() {
			t.Fatalf("Compact(%s) = %q, %v; json.Indent gives %q", compact.Bytes(), got.String(), err, want.String())
		}
	})
}
