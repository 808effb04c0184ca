package main

import (
	"os"
	"runtime/debug"
)

// readerMemoryLimit is the Go runtime's soft memory limit while a command
// reads a plan (readerCommands). The readers must afford the largest plan
// the planner writes within 1 GiB (#28): gpt2-124m at grad_accum 6393, 4.19 M
// operations a rank (planner.MaxOpsPerRank), holds well under 900 MiB live
// in each of them (the decoded operations are 0.4 GB, 96 bytes each), but
// the collector's default pacing (GOGC=100) lets the heap grow to twice
// what is live, 1.4–2 GB of RSS. With this limit the collector runs before
// the runtime's memory (heap, stacks and its own metadata, which is what
// GOMEMLIMIT counts) passes 900 MiB: each reader then peaks at 903–970 MB
// of RSS on that plan (docs/trace.md). It is soft: a plan whose live data
// passed it would still be read, with the collector taking more of the
// CPU, and small plans never reach it.
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
