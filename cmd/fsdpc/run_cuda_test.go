package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor/launch"
)

// fakeCUDAWorker stands in for fsdpc-cuda: it takes the worker's command
// line and rank environment, meets the other ranks at the rendezvous with
// its plan's hash, and reports what it got. Mode "fail": rank 1 exits 3
// after the rendezvous while the others wait to be stopped.
func fakeCUDAWorker(mode string, args []string) int {
	fl := flag.NewFlagSet("fsdpc-cuda", flag.ContinueOnError)
	scale := fl.Int("scale", 0, "")
	steps := fl.Int("steps", 0, "")
	timeout := fl.Duration("timeout", 0, "")
	if err := fl.Parse(args); err != nil || fl.NArg() != 1 || !filepath.IsAbs(fl.Arg(0)) {
		fmt.Fprintf(os.Stderr, "fake worker: bad command line %q\n", args)
		return 2
	}
	e, err := launch.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hash, err := launch.HashFile(fl.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c := launch.Config{Rank: e.Rank, World: e.World, Addr: e.Addr(), PlanHash: hash, Timeout: 20 * time.Second}
	rand.Read(c.ID[:])
	s, err := launch.Rendezvous(context.Background(), c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	if mode == "hang" {
		// Say who it is, then run until killed (or, should nothing kill
		// it, for long past any test's guard).
		fmt.Printf("fake worker: hanging, pid %d\n", os.Getpid())
		time.Sleep(5 * time.Minute)
		return 0
	}
	if mode == "fail" {
		if e.Rank == 1 {
			fmt.Println("fake worker: failing")
			return 3
		}
		time.Sleep(time.Minute)
		return 0
	}
	if err := s.Barrier(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("fake worker: rank %d of %d (local %d of %d), scale %d, steps %d, timeout %s, plan %s sha256 %x, id %x\n",
		s.Rank, s.World, e.LocalRank, e.LocalWorld, *scale, *steps, *timeout, filepath.Base(fl.Arg(0)), hash[:8], s.ID[:8])
	return 0
}

const tinyModel = `[model]
name = "tiny"

[train]
seq_len = 4

[cluster]
gpu = "h100-sxm"
world_size = 2

[[module]]
name = "emb"
kind = "embedding"
num = 16
dim = 4
`

// tinyPlan writes a two-rank plan.
func tinyPlan(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.toml")
	bin := filepath.Join(dir, "tiny.bin")
	if err := os.WriteFile(model, []byte(tinyModel), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("plan", model, "-o", bin); code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut)
	}
	return bin
}

func testBinary(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// The constant that words the missing-worker message follows the tree.
func TestCUDAWorkerInTree(t *testing.T) {
	_, err := os.Stat(filepath.Join("..", workerName))
	if inTree := err == nil; inTree != cudaWorkerInTree {
		t.Errorf("cmd/%s exists: %v, but cudaWorkerInTree is %v: update it (run_cuda.go)", workerName, inTree, cudaWorkerInTree)
	}
}

func TestRunCUDAWorkerMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no fsdpc-cuda there
	bin := tinyPlan(t)
	code, out, errOut := runCLI("run", "--backend", "cuda", bin)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	dir := filepath.Dir(testBinary(t))
	for _, want := range []string{
		"fsdpc run: --backend cuda runs one fsdpc-cuda worker process per GPU, and there is none\nnext to fsdpc (in " + dir + ") or on PATH.\n",
		"Build it\non a machine with",
		"the CUDA headers and the driver's libcuda (Debian non-free:\nnvidia-cuda-dev)",
		"\n  go build -tags cuda -o " + filepath.Join(dir, "fsdpc-cuda") + " ./cmd/fsdpc-cuda\n",
		"or name it with --worker PATH.\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the message lacks %q:\n%s", want, errOut)
		}
	}
	// A --worker that is not there.
	code, _, errOut = runCLI("run", "--backend", "cuda", "--worker", filepath.Join(dir, "nothing"), bin)
	if code != 1 || !strings.Contains(errOut, "fsdpc run: --worker "+filepath.Join(dir, "nothing")+": ") {
		t.Errorf("a missing --worker: exit %d, %s", code, errOut)
	}
}

func TestRunCUDAUsage(t *testing.T) {
	bin := tinyPlan(t)
	worker := testBinary(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--worker", worker}, 2, "fsdpc run: --worker is for --backend cuda only"},
		{[]string{"--backend", "host", "--nproc-per-node", "2", "--nnodes", "1"}, 2, "--nnodes, --nproc-per-node are for --backend cuda only"},
		{[]string{"--backend", "tpu"}, 2, `unknown backend "tpu": host, cuda or torch`},
		{[]string{"--backend", "cuda", "--worker", worker, "--nnodes", "2"}, 2, "--nnodes 2 needs --master-addr (rank 0's node) and --master-port"},
		{[]string{"--backend", "cuda", "--worker", worker, "--nnodes", "2", "--node-rank", "2"}, 2, "--node-rank 2 of --nnodes 2"},
		{[]string{"--backend", "cuda", "--worker", worker, "--master-port", "65536"}, 2, "--master-port 65536 is not a TCP port"},
		{[]string{"--backend", "cuda", "--worker", worker, "--nproc-per-node", "-1"}, 2, "--nproc-per-node -1"},
		{[]string{"--backend", "cuda", "--worker", worker, "--nproc-per-node", "4"}, 1, "the plan is for 2 ranks, and 1 node(s) × 4 processes per node make 4"},
		{[]string{"--backend", "cuda", "--worker", worker, "--nnodes", "2", "--node-rank", "1", "--master-addr", "h", "--master-port", "9", "--nproc-per-node", "2"}, 1, "2 node(s) × 2 processes per node make 4"},
		{[]string{"--backend", "cuda", "--worker", worker, "--ranks", "4"}, 1, "--ranks 4, but the plan is for 2 ranks"},
	} {
		code, _, errOut := runCLI(append(append([]string{"run"}, c.args...), bin)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, %s\nwant exit %d, %q", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
	// A plan that is not there, with a worker.
	if code, _, errOut := runCLI("run", "--backend", "cuda", "--worker", worker, "no-such.bin"); code != 1 || !strings.Contains(errOut, "no-such.bin") {
		t.Errorf("a missing plan: exit %d, %s", code, errOut)
	}
}

// fsdpc run --backend cuda starts a worker per rank with the rank
// environment; the workers meet and agree on the plan and the ID.
func TestRunCUDAFakeWorker(t *testing.T) {
	bin := tinyPlan(t)
	t.Setenv("FSDPC_TEST_FAKE_WORKER", "ok")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	hash, err := launch.HashFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, code int, out, errOut string) {
		t.Helper()
		if code != 0 {
			t.Fatalf("%s: exit %d:\n%s\n%s", name, code, out, errOut)
		}
		if !strings.Contains(errOut, "fsdpc run: tiny on the cuda backend: ranks 0-1 of 2 on this node, worker ") {
			t.Errorf("%s: stderr:\n%s", name, errOut)
		}
		line := regexp.MustCompile(`(?m)^\[rank (\d)\] fake worker: rank (\d) of 2 \(local (\d) of 2\), scale 4, steps 3, timeout 7s, plan tiny.bin sha256 ` + fmt.Sprintf("%x", hash[:8]) + `, id ([0-9a-f]{16})$`)
		ms := line.FindAllStringSubmatch(out, -1)
		if len(ms) != 2 {
			t.Fatalf("%s: stdout:\n%s", name, out)
		}
		for _, m := range ms {
			if m[1] != m[2] || m[2] != m[3] || m[4] != ms[0][4] {
				t.Errorf("%s: %q", name, m[0])
			}
		}
	}
	code, out, errOut := runCLI("run", "--backend", "cuda", "--worker", testBinary(t), "--scale", "4", "--steps", "3", "--timeout", "7s", bin)
	check("--worker", code, out, errOut)

	// Found on PATH.
	dir := t.TempDir()
	if err := os.Symlink(testBinary(t), filepath.Join(dir, "fsdpc-cuda")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	t.Setenv("PATH", dir)
	code, out, errOut = runCLI("run", bin, "--backend", "cuda", "--scale", "4", "--steps", "3", "--timeout", "7s")
	check("PATH", code, out, errOut)
	if !strings.Contains(errOut, "worker "+filepath.Join(dir, "fsdpc-cuda")) {
		t.Errorf("not the worker on PATH:\n%s", errOut)
	}
}

// A failing worker fails the run, naming its rank; the others are stopped.
func TestRunCUDAWorkerFails(t *testing.T) {
	bin := tinyPlan(t)
	t.Setenv("FSDPC_TEST_FAKE_WORKER", "fail")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	start := time.Now()
	code, out, errOut := runCLI("run", "--backend", "cuda", "--worker", testBinary(t), bin)
	if code != 1 || !strings.Contains(out, "[rank 1] fake worker: failing\n") ||
		!strings.Contains(errOut, "fsdpc run "+bin+": rank 1 failed (exit status 3); then rank 0 stopped (SIGTERM)\n") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	if strings.Contains(errOut, "libcuda.so.1") {
		t.Errorf("a worker's own failure is not a missing driver:\n%s", errOut)
	}
}

// A worker the dynamic loader cannot start for want of libcuda.so.1 (no
// NVIDIA driver) fails the run, and fsdpc says what the loader's line
// means and what to do.
func TestRunCUDANoLibcuda(t *testing.T) {
	bin := tinyPlan(t)
	worker := filepath.Join(t.TempDir(), "fsdpc-cuda")
	// What the loader prints, and its exit status, when a library is missing.
	script := "#!/bin/sh\necho \"$0: error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory\" >&2\nexit 127\n"
	if err := os.WriteFile(worker, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("run", "--backend", "cuda", "--worker", worker, bin)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	// Whichever rank fails first, the launcher stops the other, which may
	// not get to print its line.
	if !regexp.MustCompile(`\[rank [01]\] ` + regexp.QuoteMeta(worker+": error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory\n")).MatchString(errOut) {
		t.Errorf("stderr lacks a rank's loader line:\n%s", errOut)
	}
	for _, want := range []string{
		"fsdpc run " + bin + ": rank ",
		" failed (exit status 127)",
		"\nfsdpc run: the worker could not load libcuda.so.1, the user-space part of the NVIDIA\n" +
			"driver: this machine has no NVIDIA driver (or its libraries are not where the loader\n" +
			"looks: ldconfig -p | grep libcuda). Run on a GPU node, or install the driver (nvidia-smi\n" +
			"and fsdpc devices then list the GPUs). Without a GPU, run the plan with --backend host.\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.HasSuffix(errOut, "with --backend host.\n") {
		t.Errorf("the explanation is not last:\n%s", errOut)
	}
}
