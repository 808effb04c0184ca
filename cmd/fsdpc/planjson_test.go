package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// The streamed plan JSON is byte for byte what encoding the whole
// document gives, for plans with and without buffers and operations.
func TestWritePlanJSONStreams(t *testing.T) {
	for _, name := range []string{"gpt2-124m", "llama3-8b", "mixtral-8x7b"} {
		p, err := loadPlan(name)
		if err != nil {
			t.Fatal(err)
		}
		empty := *p
		empty.Ops, empty.Buffers = nil, []schedule.Buffer{}
		for _, q := range []*schedule.Plan{p, &empty} {
			var want, got bytes.Buffer
			doc := struct {
				Schema  string         `json:"schema"`
				Command string         `json:"command"`
				Plan    *schedule.Plan `json:"plan"`
			}{diff.Schema, "show", q}
			if err := writeJSON(&want, doc); err != nil {
				t.Fatal(err)
			}
			if err := writePlanJSON(&got, "show", q, nil); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				i := 0
				for i < min(got.Len(), want.Len()) && got.Bytes()[i] == want.Bytes()[i] {
					i++
				}
				t.Fatalf("%s (%d ops): the streamed JSON differs at byte %d: %q, want %q", name, len(q.Ops), i,
					got.Bytes()[max(i-40, 0):min(i+40, got.Len())], want.Bytes()[max(i-40, 0):min(i+40, want.Len())])
			}
		}
	}
}

// FuzzIndentCompact checks indentCompact against json.Indent on the
// compact form of any valid JSON, and that it never panics on the rest.
//
//	go test -run '^$' -fuzz FuzzIndentCompact -fuzztime 60s ./cmd/fsdpc
func FuzzIndentCompact(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[],"b":{},"c":[1,2.5e-7,"x\"]:,{"],"d":null}`,
		`[{"k":"\u003c\\"},true,false,-0]`, `"unterminated`, `{"op":1,"uses":[3,4],"gemms":[{"m":1}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var got bytes.Buffer
		if !json.Valid(src) {
			_ = indentCompact(&got, src, "  ", " ") // no panic
			return
		}
		var compact, want bytes.Buffer
		if err := json.Compact(&compact, src); err != nil {
			t.Fatal(err)
		}
		if err := json.Indent(&want, compact.Bytes(), "      ", "  "); err != nil {
			t.Fatal(err)
		}
		if err := indentCompact(&got, compact.Bytes(), "      ", "  "); err != nil || got.String() != want.String() {
			t.Fatalf("indentCompact(%s) = %q, %v; json.Indent gives %q", compact.Bytes(), got.String(), err, want.String())
		}
	})
}
