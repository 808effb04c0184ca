package main

import (
	"fmt"
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
// planner writes (gpt2-124m at grad_accum 6393: 4.19 M operations per
// rank, the most planner.MaxOpsPerRank allows: one micro-batch more is
// refused, which the benchmark checks; a 183 MiB plan.bin) and of the
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
	big, bigModel := filepath.Join(dir, "big.bin"), write("big.toml", "grad_accum = 2", fmt.Sprintf("grad_accum = %d", largestGradAccum))
	if code, _, errOut := runCLI("plan", "-o", big, bigModel); code != 0 {
		b.Fatal(errOut)
	}
	over := fmt.Sprintf("grad_accum = %d", largestGradAccum+1)
	if code, _, errOut := runCLI("plan", "-o", filepath.Join(dir, "over.bin"), write("over.toml", "grad_accum = 2", over)); code != 1 ||
		!strings.Contains(errOut, "operations per rank") {
		b.Fatalf("gpt2-124m with %s: exit %d, %q; want the op limit's error: largestGradAccum is no longer the largest, update it", over, code, errOut)
	}
	wide := filepath.Join(dir, "wide.bin")
	if code, _, errOut := runCLI("plan", "-o", wide, write("wide.toml", "world_size = 8", "world_size = 1048576")); code != 0 {
		b.Fatal(errOut)
	}
	half := filepath.Join(dir, "half.bin")
	if code, _, errOut := runCLI("plan", "-o", half, write("half.toml", "world_size = 8", "world_size = 524288")); code != 0 {
		b.Fatal(errOut)
	}
	trace, html, export := filepath.Join(dir, "trace.json"), filepath.Join(dir, "r.html"), filepath.Join(dir, "export.json")
	for _, c := range []struct {
		name string
		args []string
		out  string // a file written, whose size is reported
		code int    // the exit status a full read gives
	}{
		{"show-json", []string{"show", "-json", big}, "", 0},
		{"sim-trace", []string{"sim", "-trace", trace, big}, trace, 0},
		{"diff", []string{"diff", "gpt2-124m", big}, "", 1}, // the plans differ
		{"report", []string{"report", "-o", html, big}, html, 0},
		{"textconv", []string{"textconv", big}, "", 0},
		{"verify", []string{"verify", big}, "", 0},
		// Without its model file export stops after decoding: the plan
		// holds the model's hash, and a changed zoo model is not found.
		{"export", []string{"export", "--model", bigModel, "-o", export, big}, export, 0},
		{"checkpoint-json", []string{"checkpoint", "-json", wide}, "", 0},
		{"reshard-reads-json", []string{"reshard", "-reads", "-format", "json", wide, half}, "", 0},
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
				var errOut strings.Builder
				if code := run(c.args, io.Discard, &errOut); code != c.code {
					b.Fatalf("exit %d, want %d: %s", code, c.code, errOut.String())
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

// largestGradAccum is the most micro-batches gpt2-124m plans with within
// planner.MaxOpsPerRank (one more needs more than 4,194,304 operations).
const largestGradAccum = 6393
