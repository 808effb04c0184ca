package calibrate

import (
	"math"
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

// FuzzTitanLog: whatever a torchtitan log holds, the reader gives sorted,
// finite, positive throughputs and a finite positive memory peak, or an
// error naming the file; it never panics. Seeds: log_test.go's log and
// lines cut from it.
//
//	go test -run '^$' -fuzz FuzzTitanLog -fuzztime 2m ./calibrate
func FuzzTitanLog(f *testing.F) {
	f.Add(titanLog)
	f.Add("step: 2 memory: 1GiB tps: 1\n")
	f.Add("step: 2 loss: 1 memory: 99999999999999999999999999999999999999999999GiB(1%) tps: 1,0,0\n")
	f.Fuzz(func(t *testing.T, text string) {
		tps, mem, err := readTitanLog("x.log", strings.NewReader(text))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x.log") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if len(tps) == 0 || !(mem > 0) || math.IsInf(mem, 0) {
			t.Fatalf("tps %v, memory %v", tps, mem)
		}
		for i, v := range tps {
			if !(v > 0) || math.IsInf(v, 0) || i > 0 && v < tps[i-1] {
				t.Fatalf("tps %v: not sorted, finite and positive", tps)
			}
		}
	})
}
