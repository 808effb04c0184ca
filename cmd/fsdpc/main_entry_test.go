package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as fsdpc itself when FSDPC_TEST_MAIN is
// set, so tests can hand it to other programs (git's textconv).
func TestMain(m *testing.M) {
	// With FSDPC_TEST_FAKE_WORKER set it is a fake fsdpc-cuda worker
	// (run_cuda_test.go).
	if mode := os.Getenv("FSDPC_TEST_FAKE_WORKER"); mode != "" {
		os.Exit(fakeCUDAWorker(mode, os.Args[1:]))
	}
	if os.Getenv("FSDPC_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
