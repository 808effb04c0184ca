//go:build !cuda

// The worker's logic on the CPU device. Under the cuda tag the binary
// imports gorgonia.org/cu, whose init exits without a GPU, so these run
// untagged only.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// cpu is the worker's platform on the CPU device.
var cpu = platform{
	built: true,
	open:  func(int) (gpu.Device, error) { return gputest.New(gputest.WithName("cpu test device")), nil },
}

func planFile(t *testing.T, name string) string {
	t.Helper()
	src, file, ok := plans.Source(name)
	if !ok {
		t.Fatalf("no zoo model %s", name)
	}
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.bin")
	if err := schedule.WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

func runWorker(t *testing.T, plat platform, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	code := run(args, &out, &errOut, func(k string) string { return env[k] }, plat)
	return code, out.String(), errOut.String()
}

func TestWorkerRehearsal(t *testing.T) {
	bin := planFile(t, "gpt2-124m")
	trace := filepath.Join(t.TempDir(), "trace.json")
	code, out, errOut := runWorker(t, cpu, nil, "--virtual", "--scale=16", "--steps=2", "--calibrate-bytes=1MiB", "--trace="+trace, bin)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"device figures", "measured on cpu test device", "step time", "data check:", "collectives equal the host's recomputation"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(trace)
	if err != nil || !strings.Contains(string(b), `"traceEvents"`) {
		t.Errorf("trace: %v", err)
	}
}

func TestWorkerErrors(t *testing.T) {
	bin := planFile(t, "gpt2-124m")
	cases := []struct {
		name string
		plat platform
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"without the cuda tag", native, nil, []string{"--virtual", bin}, 1, "without CUDA"},
		{"no launcher environment", cpu, nil, []string{bin}, 1, "pass --virtual"},
		{"a world the plan is not for", cpu, map[string]string{"RANK": "0", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, []string{bin}, 1, "the launcher started 3"},
		{"a bad bandwidth", cpu, nil, []string{"--virtual", "--link-bandwidth=fast", bin}, 2, "--link-bandwidth"},
		{"a bad stand-in", cpu, nil, []string{"--virtual", "--stand-in=nap", bin}, 2, "spin or burn"},
		{"no plan", cpu, nil, []string{"--virtual"}, 2, "usage"},
		{"a missing plan", cpu, nil, []string{"--virtual", filepath.Join(t.TempDir(), "none.bin")}, 1, "none.bin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runWorker(t, c.plat, c.env, c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d (want %d), stderr lacks %q:\n%s", code, c.code, c.want, errOut)
			}
		})
	}
}

func TestBench(t *testing.T) {
	code, out, errOut := runWorker(t, cpu, nil, "bench", "--ranks=4", "--bytes=1MiB", "--repeats=3")
	if code != 0 || !strings.Contains(out, "% of memory bandwidth") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}
