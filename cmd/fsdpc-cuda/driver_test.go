package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tagged worker on a machine where CUDA sees no GPU: cuda/driverinit's
// init, not gorgonia.org/cu's, reports it, on stderr, and the worker exits
// 1. CUDA_VISIBLE_DEVICES=-1 hides every GPU, so this holds on a GPU
// machine too. It builds the worker with the cuda tag, which needs the
// CUDA headers and libcuda (CI installs them, .ci/install-cuda); without
// them it skips, saying which is missing.
func TestTaggedWorkerWithoutGPU(t *testing.T) {
	worker := buildTaggedWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, worker, "--virtual", "plan.bin")
	cmd.Env = append(cmd.Environ(), "CUDA_VISIBLE_DEVICES=-1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out, errOut := stdout.String(), stderr.String()
	if strings.Contains(errOut, "error while loading shared libraries: libcuda.so.1") {
		t.Skipf("the worker links, but libcuda.so.1 cannot be loaded to run it:\n%s", errOut)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v; want exit status 1", err)
	}
	if strings.Contains(out+errOut, "Error in initialization") {
		t.Errorf("gorgonia.org/cu's init reported the failure, so it ran before cuda/driverinit's:\nstdout: %s\nstderr: %s", out, errOut)
	}
	if out != "" {
		t.Errorf("stdout: %q; want nothing", out)
	}
	for _, want := range []string{
		"fsdpc-cuda: no CUDA device: cuInit returned CUDA_ERROR_NO_DEVICE (100)",
		`CUDA_VISIBLE_DEVICES="-1" is set: CUDA sees only the GPUs it lists`,
		"fsdpc plan, fsdpc sim and fsdpc run --backend host need no GPU.\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// buildTaggedWorker builds this command with the cuda tag into a temporary
// directory, or skips the test when this machine cannot: no cgo, no C
// compiler, no cuda.h, no libcuda to link. Any other failure fails it.
func buildTaggedWorker(t *testing.T) string {
	t.Helper()
	if env, err := exec.Command("go", "env", "CGO_ENABLED").Output(); err != nil {
		t.Fatalf("go env: %v", err)
	} else if strings.TrimSpace(string(env)) != "1" {
		t.Skip("cgo is off (CGO_ENABLED=0): the cuda-tagged worker needs it")
	}
	worker := filepath.Join(t.TempDir(), "fsdpc-cuda")
	start := time.Now()
	out, err := exec.Command("go", "build", "-tags", "cuda", "-o", worker, ".").CombinedOutput()
	if err != nil {
		for _, c := range []struct{ sign, why string }{
			{"cuda.h: No such file", "no CUDA headers (cuda.h)"},
			{"cannot find -lcuda", "no libcuda to link"},
			{`C compiler "`, "no C compiler"},
		} {
			if bytes.Contains(out, []byte(c.sign)) {
				t.Skipf("cannot build the cuda-tagged worker here: %s; bash .ci/install-cuda installs what it needs (CI runs it)\n%s", c.why, out)
			}
		}
		t.Fatalf("go build -tags cuda: %v\n%s", err, out)
	}
	t.Logf("go build -tags cuda: %s", time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(worker); err != nil {
		t.Fatal(err)
	}
	return worker
}
