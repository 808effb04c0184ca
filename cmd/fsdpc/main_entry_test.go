package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as fsdpc itself when FSDPC_TEST_MAIN is
// set, so tests can hand it to other programs (git's textconv).
func TestMain(m *testing.M) {
	if os.Getenv("FSDPC_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
