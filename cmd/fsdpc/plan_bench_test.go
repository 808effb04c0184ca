package main

import (
	"path/filepath"
	"testing"
)

// BenchmarkPlanCommand times `fsdpc plan llama3.1-405b`, the whole command:
// load, plan (which simulates the plan once, in its predict pass), write
// plan.bin, print the summary from that simulation.
//
//	go test -run XXX -bench PlanCommand -benchtime 10x ./cmd/fsdpc
func BenchmarkPlanCommand(b *testing.B) {
	b.ReportAllocs()
	out := filepath.Join(b.TempDir(), "plan.bin")
	for i := 0; i < b.N; i++ {
		if code, _, errOut := runCLI("plan", "-o", out, "llama3.1-405b"); code != 0 {
			b.Fatal(errOut)
		}
	}
}
