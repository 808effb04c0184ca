package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/internal/atomicfile"
)

// TestMain lets the test binary act as fsdpc itself when FSDPC_TEST_MAIN is
// set, so tests can hand it to other programs (git's textconv).
func TestMain(m *testing.M) {
	// With FSDPC_TEST_FAKE_WORKER set it is a fake fsdpc-cuda worker
	// (run_cuda_test.go).
	// With FSDPC_TEST_LAUNCHER set it is fsdpc even so: the launcher whose
	// workers (not seeing FSDPC_TEST_LAUNCHER) are the fakes.
	if os.Getenv("FSDPC_TEST_LAUNCHER") == "1" {
		os.Unsetenv("FSDPC_TEST_LAUNCHER")
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if mode := os.Getenv("FSDPC_TEST_FAKE_WORKER"); mode != "" {
		os.Exit(fakeCUDAWorker(mode, os.Args[1:]))
	}
	// With FSDPC_TEST_BLOCK_BEFORE_RENAME set too, every atomic write
	// stops before its rename, saying where its temporary file is, so a
	// test can signal it mid-write (signal_test.go).
	if os.Getenv("FSDPC_TEST_BLOCK_BEFORE_RENAME") == "1" {
		atomicfile.TestHookBeforeRename = func(tmp string) {
			fmt.Fprintf(os.Stderr, "%s%s\n", blockedPrefix, tmp)
			for {
				time.Sleep(time.Hour)
			}
		}
	}
	if os.Getenv("FSDPC_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
