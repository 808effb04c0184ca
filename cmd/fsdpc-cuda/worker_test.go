//go:build !cuda

// The worker's logic on the CPU device. Under the cuda tag the binary
// imports gorgonia.org/cu, whose init stops the process without a GPU
// (after cuda/driverinit says why), so these run untagged only.

package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
	count: func() (int, error) { return 1, nil },
}

func planFile(t *testing.T, name string) string {
	t.Helper()
	src, file, ok := plans.Source(name)
	if !ok {
		t.Fatalf("no zoo model %s", name)
	}
	return compileTo(t, file, src)
}

// compileTo plans a model and writes its plan.bin into a temporary
// directory.
func compileTo(t *testing.T, file string, src []byte) string {
	t.Helper()
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
	if testing.Short() {
		t.Skip("a whole worker rehearsal of gpt2-124m with a trace; .ci/run's go test runs it")
	}
	bin := planFile(t, "gpt2-124m")
	trace := filepath.Join(t.TempDir(), "trace.json")
	// With a sampler, as on a GPU with NVML (memory_test.go).
	plat := cpu
	closed := 0
	plat.memory = func(d gpu.Device) (gpu.MemorySampler, func() error, error) {
		return memInfo{d}, func() error { closed++; return nil }, nil
	}
	code, out, errOut := runWorker(t, plat, nil, "--virtual", "--scale=16", "--steps=2", "--calibrate-bytes=1MiB", "--trace="+trace, bin)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"device figures", "measured on cpu test device", "step time", "data check:", "collectives equal the host's recomputation", "per rank and step (run average",
		"NVML peak − at open", "NVML peak, this process", "samples every 2ms: device peak"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if closed != 1 || strings.Contains(errOut, "NVML") {
		t.Errorf("NVML shut down %d times; stderr:\n%s", closed, errOut)
	}
	b, err := os.ReadFile(trace)
	if err != nil || !strings.Contains(string(b), `"traceEvents"`) {
		t.Errorf("trace: %v", err)
	}
}

// unprovenPlanFile is gpt2-124m's plan with a memory budget it cannot
// fit: schedule.Prove refuses it.
func unprovenPlanFile(t *testing.T) string {
	t.Helper()
	p, err := schedule.ReadFile(planFile(t, "gpt2-124m"))
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster.MemoryBudget = 1 << 20
	path := filepath.Join(t.TempDir(), "unproven.bin")
	if err := schedule.WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWorkerErrors(t *testing.T) {
	bin := planFile(t, "gpt2-124m")
	unproven := unprovenPlanFile(t)
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
		{"a trace over the plan", cpu, nil, []string{"--virtual", "--trace=" + bin, bin}, 1, "is the input"},
		{"a missing plan", cpu, nil, []string{"--virtual", filepath.Join(t.TempDir(), "none.bin")}, 1, "none.bin"},
		{"a plan fsdpc verify refuses", cpu, nil, []string{"--virtual", unproven}, 1, "refusing to run a plan that fsdpc verify refuses: the plan reserves"},
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
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, dt := range []string{"fp32", "bf16", "fp16"} {
		if !regexp.MustCompile(`reduction ` + dt + ` +[0-9.]+ GB/s += [0-9]+% of memory bandwidth`).MatchString(out) {
			t.Errorf("no %s reduction figure:\n%s", dt, out)
		}
	}
}

// fabricPlatform is the worker's platform with NCCL played by a fabric
// of CPU devices, non-blocking as cuda's communicators are: each worker
// opens its own device.
func fabricPlatform(f *gputest.Fabric) platform {
	f.NonBlocking()
	return platform{
		built:    true,
		open:     func(int) (gpu.Device, error) { return gputest.New(gputest.WithName("cpu test device")), nil },
		count:    func() (int, error) { return 8, nil },
		uniqueID: func(string) ([128]byte, error) { return f.UniqueID(), nil },
		comm: func(dev gpu.Device, _ string, id [128]byte, n, rank int, _ time.Duration) (gpu.Comm, error) {
			return f.NewComm(dev.(*gputest.Device), id, n, rank)
		},
	}
}

// meshPlanFile compiles gpt2-124m, two blocks, on a replicate × shard
// mesh: HSDP, whose groups over NCCL are split from the world's.
func meshPlanFile(t *testing.T, replicate, shard int) string {
	t.Helper()
	src, file, _ := plans.Source("gpt2-124m")
	text := regexp.MustCompile(`(?m)^repeat = \d+`).ReplaceAllString(string(src), "repeat = 2")
	text = strings.Replace(text, "world_size = 8\n", fmt.Sprintf("world_size = %d\nmesh = { replicate = %d, shard = %d }\n", replicate*shard, replicate, shard), 1)
	return compileTo(t, file, []byte(text))
}

// runRanks runs world workers as torchrun would start them, meeting over
// loopback TCP, and returns each one's exit code, stdout and stderr.
func runRanks(t *testing.T, plat platform, world int, args ...string) (codes []int, outs, errs []string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	codes, outs, errs = make([]int, world), make([]string, world), make([]string, world)
	var wg sync.WaitGroup
	for r := range world {
		env := map[string]string{"RANK": strconv.Itoa(r), "WORLD_SIZE": strconv.Itoa(world), "LOCAL_RANK": strconv.Itoa(r),
			"LOCAL_WORLD_SIZE": strconv.Itoa(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
		wg.Go(func() { codes[r], outs[r], errs[r] = runWorker(t, plat, env, args...) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(6 * time.Minute):
		// A hang guard, not a timing check: the run takes seconds on a
		// quiet machine but minutes when every core is oversubscribed
		// (it once passed 2 minutes so), and a rendezvous that fails
		// reports itself after launch.DefaultTimeout (5 minutes), before
		// this fires.
		t.Fatal("the workers hung")
	}
	return codes, outs, errs
}

// TestWorkerNCCLMesh: four worker processes (goroutines) meet at rank 0
// over TCP, make their communicators from rank 0's id and split HSDP's
// groups from it, and run a 2×2 mesh plan with the data check.
func TestWorkerNCCLMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("four whole worker rehearsals; .ci/run's go test runs it")
	}
	bin := meshPlanFile(t, 2, 2)
	// --timeout: the collective watchdog's default minute once fired when
	// the four ranks crawled on an oversubscribed machine (CPU issue 51 s
	// for 614 ops, against 6 s for the whole test on a quiet one); the test
	// checks the mesh, not speed.
	codes, outs, errs := runRanks(t, fabricPlatform(gputest.NewFabric()), 4, "--scale=16", "--steps=2", "--calibrate-bytes=1MiB", "--timeout=5m", bin)
	for r := range codes {
		if codes[r] != 0 {
			t.Fatalf("rank %d: exit %d\n%s\n%s", r, codes[r], outs[r], errs[r])
		}
		if !strings.Contains(outs[r], "data check:") || !strings.Contains(outs[r], "step time") {
			t.Errorf("rank %d: no report:\n%s", r, outs[r])
		}
	}
}

// TestWorkerWatchdog: a collective that never finishes fails every
// worker within --timeout, naming it, instead of hanging the job.
func TestWorkerWatchdog(t *testing.T) {
	bin := meshPlanFile(t, 1, 2)
	f := gputest.NewFabric()
	f.Hang(2)
	codes, outs, errs := runRanks(t, fabricPlatform(f), 2, "--scale=16", "--steps=2", "--calibrate-bytes=1MiB", "--timeout=300ms", bin)
	for r := range codes {
		if codes[r] != 1 || !strings.Contains(errs[r]+outs[r], "watchdog: op ") || !strings.Contains(errs[r]+outs[r], "has not finished within the timeout of 300ms; aborted the communicators") {
			t.Errorf("rank %d: exit %d, want 1 and the watchdog naming the collective:\n%s\n%s", r, codes[r], outs[r], errs[r])
		}
	}
}
