package hf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzConvert feeds config.json files to the importer. Whatever the input,
// it must return (no panic, no hang) and never call its own result an
// internal error: a config either imports into a model file that loads, or
// gets an error about the config. Every successful import is loaded by
// Convert itself, so "loads" is checked on each output.
//
// The seeds are every config in testdata and testdata/fuzz/FuzzConvert.
// Run it with
//
//	go test ./ir/hf -run '^$' -fuzz FuzzConvert -fuzztime 5m -parallel 1
func FuzzConvert(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*.json")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no configs to seed with: %v", err)
	}
	for _, path := range seeds {
		src, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		watchdog := time.AfterFunc(time.Minute, func() {
			panic(fmt.Sprintf("Convert has not returned after a minute on %d bytes", len(src)))
		})
		defer watchdog.Stop()
		out, err := Convert("config.json", src)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("an internal error on a config: %v", err)
			}
			return
		}
		if len(out) == 0 {
			t.Fatal("no error and no model file")
		}
	})
}
