package calibrate

import (
	"os"
	"strings"
	"testing"
)

// FuzzReadRuns: any bytes give runs, listed rows or an error naming the
// file, never a panic, and every run read turns into a model file. The
// seeds are the two sets' header and first rows.
//
//	go test -run '^$' -fuzz FuzzReadRuns -fuzztime 60s ./calibrate
func FuzzReadRuns(f *testing.F) {
	for _, name := range []string{"published-runs.csv", "memory-runs.csv"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.SplitAfter(string(b), "\n")
		f.Add(strings.Join(lines[:min(4, len(lines))], ""))
	}
	f.Fuzz(func(t *testing.T, text string) {
		runs, _, err := readRuns("x.csv", strings.NewReader(text))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x.csv") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		for _, r := range runs {
			modelFile(r)
		}
	})
}
