package calibrate

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
)

// FuzzReadRuns: any bytes give runs, listed rows or an error naming the
// file, never a panic; every run read has a printable ID and turns into a
// model file that is valid TOML, whatever its text columns hold. The
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
	// A source that would end the model file's comment line.
	b, _ := os.ReadFile("published-runs.csv")
	lines := strings.SplitAfter(string(b), "\n")
	f.Add(lines[0] + strings.Replace(lines[1], ",A,S3,", ",A,\"S3\n[model]\nname = 1\n#\",", 1))
	f.Fuzz(func(t *testing.T, text string) {
		runs, _, err := readRuns("x.csv", strings.NewReader(text))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x.csv") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		for _, r := range runs {
			if !safetext.Printable(r.id) {
				t.Fatalf("row ID %q read", r.id)
			}
			// The model file is TOML whatever the row's text: ir reads it
			// or refuses a value, never its syntax.
			if _, err := ir.Load(r.id+".toml", []byte(modelFile(r))); err != nil && strings.Contains(err.Error(), "TOML syntax") {
				t.Fatalf("row %s: the model file does not parse: %v\n%s", r.id, err, modelFile(r))
			}
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
