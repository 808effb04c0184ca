package main

import (
	"os"
	"runtime/debug"
)

// readerMemoryLimit is the Go runtime's soft memory limit while a command
// reads a plan (readerCommands). The readers must afford the largest plan
// the planner writes within 1 GiB (#28): gpt2-124m at grad_accum 5000, 3.28 M
// operations a rank, holds 0.7–0.8 GB live in each of them (the decoded
// operations alone are 0.5 GB), and the collector's default pacing
// (GOGC=100) lets the heap grow to twice that, 1.4–1.6 GB of RSS. With
// this limit the collector runs before the runtime's memory (heap, stacks
// and its own metadata, which is what GOMEMLIMIT counts) passes 900 MiB:
// each reader then peaks at 932 MB of RSS on that plan, for up to 20% more
// CPU (docs/trace.md). It is soft: a plan whose live data passes it is
// still read, with the collector taking up to half the CPU (the 4.19 M
// operations planner.MaxOpsPerRank allows: about 1.13 GB of RSS, 1.5–2.5
// times the CPU), and small plans never reach it.
const readerMemoryLimit = 900 << 20

// readerCommands are the commands readerMemoryLimit applies to: those
// that hold a whole plan and its simulation, measured on the largest plan.
var readerCommands = map[string]bool{"show": true, "sim": true, "diff": true, "report": true, "textconv": true, "verify": true, "export": true}

// limitReaderMemory sets readerMemoryLimit for a reader command, unless the
// user set GOMEMLIMIT (theirs stands) or a lower limit is already set; the
// function it returns restores the previous limit (tests and the benchmark
// run commands in one process).
func limitReaderMemory(command string) (restore func()) {
	if !readerCommands[command] || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	old := debug.SetMemoryLimit(-1) // reads the current limit
	if old <= readerMemoryLimit {
		return func() {}
	}
	debug.SetMemoryLimit(readerMemoryLimit)
	return func() { debug.SetMemoryLimit(old) }
}
