package main

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLargestPlanReaders runs the readers of the largest plan the
// planner writes (gpt2-124m at grad_accum 6390: 4.19 M operations per
// rank, within 0.1% of planner.MaxOpsPerRank, a 183 MiB plan.bin) and of the
// largest world size (gpt2-124m on 2²⁰ ranks), reporting each command's
// peak heap in use (sampled every 5 ms), time and the size of the file it
// writes (sim's trace, report's page). Set FSDPC_BENCH_BIG=1:
// planning the big plan alone takes about 10 s.
//
//	FSDPC_BENCH_BIG=1 go test -run XXX -bench LargestPlanReaders -benchtime 1x ./cmd/fsdpc
func BenchmarkLargestPlanReaders(b *testing.B) {
	if os.Getenv("FSDPC_BENCH_BIG") != "1" {
		b.Skip("set FSDPC_BENCH_BIG=1")
	}
	dir := b.TempDir()
	src, err := os.ReadFile("../../plans/gpt2-124m.toml")
	if err != nil {
		b.Fatal(err)
	}
	write := func(name, old, new string) string {
		s := strings.Replace(string(src), old, new, 1)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			b.Fatal(err)
		}
		return path
	}
	big := filepath.Join(dir, "big.bin")
	if code, _, errOut := runCLI("plan", "-o", big, write("big.toml", "grad_accum = 2", "grad_accum = 6390")); code != 0 {
		b.Fatal(errOut)
	}
	wide := filepath.Join(dir, "wide.bin")
	if code, _, errOut := runCLI("plan", "-o", wide, write("wide.toml", "world_size = 8", "world_size = 1048576")); code != 0 {
		b.Fatal(errOut)
	}
	half := filepath.Join(dir, "half.bin")
	if code, _, errOut := runCLI("plan", "-o", half, write("half.toml", "world_size = 8", "world_size = 524288")); code != 0 {
		b.Fatal(errOut)
	}
	trace, html := filepath.Join(dir, "trace.json"), filepath.Join(dir, "r.html")
	for _, c := range []struct {
		name string
		args []string
		out  string // a file written, whose size is reported
	}{
		{"show-json", []string{"show", "-json", big}, ""},
		{"sim-trace", []string{"sim", "-trace", trace, big}, trace},
		{"diff", []string{"diff", "gpt2-124m", big}, ""},
		{"report", []string{"report", "-o", html, big}, html},
		{"textconv", []string{"textconv", big}, ""},
		{"verify", []string{"verify", big}, ""},
		{"export", []string{"export", big}, ""},
		{"checkpoint-json", []string{"checkpoint", "-json", wide}, ""},
		{"reshard-reads-json", []string{"reshard", "-reads", "-format", "json", wide, half}, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			// The last reader's garbage is not this one's peak.
			runtime.GC()
			var peak atomic.Uint64
			done := make(chan struct{})
			go func() {
				var m runtime.MemStats
				for {
					select {
					case <-done:
						return
					case <-time.After(5 * time.Millisecond):
						runtime.ReadMemStats(&m)
						if m.HeapInuse > peak.Load() {
							peak.Store(m.HeapInuse)
						}
					}
				}
			}()
			for b.Loop() {
				if code := run(c.args, io.Discard, io.Discard); code > 1 {
					b.Fatalf("exit %d", code)
				}
			}
			close(done)
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
			if c.out != "" {
				fi, err := os.Stat(c.out)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(fi.Size())/(1<<20), "output-MB")
				os.Remove(c.out)
			}
		})
	}
}
