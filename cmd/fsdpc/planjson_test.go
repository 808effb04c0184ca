package main

import (
	"bytes"
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
