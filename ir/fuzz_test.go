package ir

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzLoad checks Load's promises on any input: it does not panic; it
// returns either a model that passes Verify or a non-empty, bounded
// Diagnostics whose entries name the file and, when placed, lie inside it;
// and the same input gives the same result twice.
//
// The seeds are the model zoo, every case of testdata/errors.txt and
// testdata/fuzz/FuzzLoad. Run it with
//
//	go test ./ir -run '^$' -fuzz FuzzLoad -fuzztime 5m -parallel 1
func FuzzLoad(f *testing.F) {
	zoo, err := filepath.Glob("../plans/*.toml")
	if err != nil || len(zoo) == 0 {
		f.Fatalf("no zoo models to seed with: %v", err)
	}
	for _, path := range zoo {
		src, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, c := range readErrorCorpus(f) {
		f.Add(c.src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		const file = "fuzz.toml"
		// A Load that never returns would stall the fuzzer silently: crash
		// the worker instead, so the input is kept as a failure.
		watchdog := time.AfterFunc(time.Minute, func() {
			panic(fmt.Sprintf("Load has not returned after a minute on %d bytes", len(src)))
		})
		start := time.Now()
		m, err := Load(file, src)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Load took %v on %d bytes", d, len(src))
		}
		watchdog.Stop()
		checkLoadResult(t, file, src, m, err)
		m2, err2 := Load(file, src)
		if (m == nil) != (m2 == nil) || errString(err) != errString(err2) {
			t.Fatalf("Load is not deterministic:\nfirst:  %v, %v\nsecond: %v, %v", m != nil, err, m2 != nil, err2)
		}
		if m != nil && !reflect.DeepEqual(m, m2) {
			t.Fatal("Load is not deterministic: two loads give different models")
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func checkLoadResult(t *testing.T, file string, src []byte, m *Model, err error) {
	t.Helper()
	if err == nil {
		if m == nil {
			t.Fatal("Load returned neither a model nor an error")
		}
		if verr := Verify(m); verr != nil {
			t.Fatalf("Load returned a model that fails Verify: %v", verr)
		}
		// Lowering counts modules and parameters before expanding (to
		// refuse a model too large at once) and allocates exactly that.
		if cap(m.Modules) != len(m.Modules) || cap(m.Params) != len(m.Params) {
			t.Fatalf("counted %d modules and %d parameters before expanding, made %d and %d",
				cap(m.Modules), cap(m.Params), len(m.Modules), len(m.Params))
		}
		return
	}
	if m != nil {
		t.Fatalf("Load returned a model and an error: %v", err)
	}
	var ds Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("Load returned %T, not Diagnostics: %v", err, err)
	}
	if len(ds) == 0 || !ds.HasErrors() {
		t.Fatalf("Load failed with no error diagnostics: %q", ds)
	}
	if len(ds) > maxDiagnostics+1 {
		t.Fatalf("%d diagnostics, more than %d", len(ds), maxDiagnostics+1)
	}
	lines := bytes.Split(bytes.TrimPrefix(src, []byte("\xef\xbb\xbf")), []byte("\n"))
	for _, d := range ds {
		if d.File != file {
			t.Errorf("%q does not name the file", d)
		}
		if strings.Contains(d.Msg, "internal error") {
			t.Errorf("%q", d)
		}
		if d.Pos == (Pos{}) {
			continue
		}
		if d.Pos.Line < 1 || d.Pos.Line > len(lines) || d.Pos.Col < 1 || d.Pos.Col > utf8.RuneCount(lines[d.Pos.Line-1])+1 {
			t.Errorf("%q: position outside the input (%d lines)", d, len(lines))
		}
	}
}
