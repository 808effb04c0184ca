//go:build !linux

package executor

// prefault does nothing off Linux: the poison fill faults the pages in.
func prefault(b []byte) {}
