package launch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a fake worker: with LAUNCHTEST_WORKER set it
// runs the behaviour the spec gives its rank ("1:exit3,*:hang") and exits.
func TestMain(m *testing.M) {
	if spec := os.Getenv("LAUNCHTEST_WORKER"); spec != "" {
		os.Exit(fakeWorker(spec))
	}
	os.Exit(m.Run())
}

func fakeWorker(spec string) int {
	rank := os.Getenv(EnvRank)
	behaviour := ""
	for _, item := range strings.Split(spec, ",") {
		who, what, _ := strings.Cut(item, ":")
		if who == rank || who == "*" && behaviour == "" {
			behaviour = what
		}
	}
	dir := os.Getenv("LAUNCHTEST_DIR")
	forever := func() int {
		time.Sleep(time.Hour)
		return 0
	}
	switch behaviour {
	case "ok":
		e, err := FromEnv(os.Getenv)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("hello from %s\n", e)
		fmt.Fprintln(os.Stderr, "to stderr")
		return 0
	case "exit3":
		fmt.Println("failing on purpose")
		return 3
	case "exit3-when-ready": // once rank 0 ignores SIGTERM
		for {
			if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
				return 3
			}
			time.Sleep(5 * time.Millisecond)
		}
	case "hang":
		fmt.Println("hanging")
		return forever()
	case "silent":
		return forever()
	case "ignoreterm":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		fmt.Println("ignoring SIGTERM")
		os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644)
		return forever()
	case "chatty":
		for i := range 12 {
			fmt.Printf("step %d\n", i)
			time.Sleep(40 * time.Millisecond)
		}
		return 0
	case "partial":
		os.Stdout.WriteString("one ")
		time.Sleep(20 * time.Millisecond)
		os.Stdout.WriteString("line\ntwo\nthr")
		time.Sleep(20 * time.Millisecond)
		os.Stdout.WriteString("ee\n" + strings.Repeat("x", maxLine+10) + "\nno newline at the end")
		return 0
	case "rendezvous":
		return rendezvousWorker(dir)
	}
	fmt.Fprintf(os.Stderr, "fake worker: no behaviour for rank %s in %q\n", rank, spec)
	return 2
}

// rendezvousWorker meets the other ranks as a CUDA worker will: plan hash,
// rendezvous, two barriers.
func rendezvousWorker(dir string) int {
	e, err := FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	plan := filepath.Join(dir, "plan.bin")
	if other := os.Getenv("LAUNCHTEST_OTHER_PLAN_RANK"); other == strconv.Itoa(e.Rank) {
		plan = filepath.Join(dir, "other.bin")
	}
	hash, err := HashFile(plan)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c := Config{Rank: e.Rank, World: e.World, Addr: e.Addr(), PlanHash: hash, Timeout: 10 * time.Second}
	id := sha256.Sum256([]byte("the id"))
	copy(c.ID[:], id[:]) // only rank 0's counts
	copy(c.ID[32:], "rank "+strconv.Itoa(e.Rank))
	s, err := Rendezvous(context.Background(), c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	for range 2 {
		if err := s.Barrier(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Printf("rank %d of %d met, id %x %q\n", s.Rank, s.World, s.ID[:4], bytes.TrimRight(s.ID[32:], "\x00"))
	return 0
}

// syncBuffer is a buffer the launcher's writers and the test share; notify,
// if set, sees every write.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	notify func(string)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.notify != nil {
		s.notify(s.b.String())
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fake struct {
	spec     string
	nproc    int
	opts     Options
	ctx      context.Context
	extraEnv []string
}

// launch runs the test binary as nproc fake workers.
func launch(t *testing.T, f fake) (err error, stdout, stderr *syncBuffer, took time.Duration) {
	t.Helper()
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	if f.opts.Stdout == nil {
		f.opts.Stdout = stdout
	} else {
		stdout = f.opts.Stdout.(*syncBuffer)
	}
	f.opts.Stderr = stderr
	dir := t.TempDir()
	// A race-enabled worker sleeps a second at exit unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	f.opts.Env = append(os.Environ(), append([]string{"LAUNCHTEST_WORKER=" + f.spec, "LAUNCHTEST_DIR=" + dir, "GORACE=" + gorace}, f.extraEnv...)...)
	if f.opts.Grace == 0 {
		f.opts.Grace = 5 * time.Second
	}
	if f.ctx == nil {
		f.ctx = context.Background()
	}
	os.WriteFile(filepath.Join(dir, "plan.bin"), []byte("the plan"), 0o644)
	os.WriteFile(filepath.Join(dir, "other.bin"), []byte("another plan"), 0o644)
	start := time.Now()
	err = Launch(f.ctx, os.Args[0], nil, f.nproc, f.opts)
	return err, stdout, stderr, time.Since(start)
}

func TestLaunchOK(t *testing.T) {
	err, stdout, stderr, _ := launch(t, fake{spec: "*:ok", nproc: 3})
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	addr := regexp.MustCompile(`rendezvous at 127\.0\.0\.1:(\d+) \(torchrun\)`)
	ports := map[string]bool{}
	for r := range 3 {
		want := fmt.Sprintf("[rank %d] hello from rank %d of 3 (local rank %d of 3, node 0 of 1), rendezvous at 127.0.0.1:", r, r, r)
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
		if !strings.Contains(stderr.String(), fmt.Sprintf("[rank %d] to stderr\n", r)) {
			t.Errorf("stderr lacks rank %d:\n%s", r, stderr)
		}
	}
	for _, m := range addr.FindAllStringSubmatch(stdout.String(), -1) {
		ports[m[1]] = true
	}
	if len(ports) != 1 {
		t.Errorf("the ranks disagree on the port: %v", ports)
	}
}

func TestLaunchMultiNodeEnv(t *testing.T) {
	err, stdout, stderr, _ := launch(t, fake{spec: "*:ok", nproc: 2, opts: Options{NNodes: 3, NodeRank: 1, MasterAddr: "head", MasterPort: 4321}})
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	for _, want := range []string{
		"[rank 2] hello from rank 2 of 6 (local rank 0 of 2, node 1 of 3), rendezvous at head:4321 (torchrun)\n",
		"[rank 3] hello from rank 3 of 6 (local rank 1 of 2, node 1 of 3), rendezvous at head:4321 (torchrun)\n",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout.String(), "[rank 0]") {
		t.Errorf("node 1 ran rank 0:\n%s", stdout)
	}
}

func TestLaunchBadOptions(t *testing.T) {
	for _, c := range []struct {
		nproc int
		o     Options
		want  string
	}{
		{0, Options{}, "0 processes per node"},
		{2, Options{NNodes: 2}, "2 nodes need the master address and port"},
		{2, Options{NNodes: 2, NodeRank: 2, MasterAddr: "a", MasterPort: 1}, "node rank 2 of 2 nodes"},
		{2, Options{MasterPort: 70000}, "master port 70000 is not a TCP port"},
	} {
		if err := Launch(context.Background(), os.Args[0], nil, c.nproc, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c, err, c.want)
		}
	}
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v (%T), want a *launch.Error", err, err)
	}
	return e
}

// One rank fails: the others are stopped and the error names it.
func TestLaunchRankFails(t *testing.T) {
	err, stdout, _, took := launch(t, fake{spec: "1:exit3,*:hang", nproc: 3})
	e := asError(t, err)
	if e.Cause != RankFailed || e.Rank != 1 || e.Status != "exit status 3" {
		t.Errorf("%+v", e)
	}
	if got := err.Error(); !strings.HasPrefix(got, "rank 1 failed (exit status 3); then ") || !strings.Contains(got, "stopped (SIGTERM)") {
		t.Errorf("%s", got)
	}
	for _, x := range e.Exits {
		if x.Rank != 1 && (!x.Stopped || x.Signal != syscall.SIGTERM && x.Code != 0) {
			t.Errorf("rank %d: %+v", x.Rank, x)
		}
	}
	if !strings.Contains(stdout.String(), "[rank 1] failing on purpose\n") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if took > 3*time.Second {
		t.Errorf("took %s", took)
	}
}

// A rank that ignores SIGTERM is killed after the grace period.
func TestLaunchKillsAfterGrace(t *testing.T) {
	grace := 300 * time.Millisecond
	err, _, _, took := launch(t, fake{spec: "0:ignoreterm,1:exit3-when-ready", nproc: 2, opts: Options{Grace: grace}})
	e := asError(t, err)
	if e.Cause != RankFailed || e.Rank != 1 || len(e.Exits) != 2 {
		t.Fatalf("%+v", e)
	}
	if x := e.Exits[0]; !x.Stopped || x.Signal != syscall.SIGKILL {
		t.Errorf("rank 0: %+v", x)
	}
	if want := "rank 1 failed (exit status 3); then rank 0 killed after the 300ms grace period"; err.Error() != want {
		t.Errorf("%v\nwant %s", err, want)
	}
	if took < grace || took > 3*time.Second {
		t.Errorf("took %s", took)
	}
}

// Cancelling the context (Ctrl-C) stops every rank.
func TestLaunchInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{notify: func(s string) {
		if strings.Count(s, "hanging") == 3 {
			cancel()
		}
	}}
	err, _, _, took := launch(t, fake{spec: "*:hang", nproc: 3, ctx: ctx, opts: Options{Stdout: out}})
	e := asError(t, err)
	if e.Cause != Interrupted || !errors.Is(err, context.Canceled) || e.Rank != -1 {
		t.Errorf("%+v", e)
	}
	if want := "interrupted (context canceled); then ranks 0-2 stopped (SIGTERM)"; err.Error() != want {
		t.Errorf("%v\nwant %s", err, want)
	}
	if took > 3*time.Second {
		t.Errorf("took %s", took)
	}
	// Already cancelled: nothing starts.
	if err := Launch(ctx, "/nonexistent", nil, 2, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v", err)
	}
}

// The watchdog stops ranks that say nothing, and lets ranks that talk run.
func TestLaunchWatchdog(t *testing.T) {
	err, _, _, took := launch(t, fake{spec: "*:silent", nproc: 2, opts: Options{Watchdog: 300 * time.Millisecond}})
	e := asError(t, err)
	if e.Cause != WatchdogExpired || err.Error() != "watchdog: no rank wrote any output for 300ms; then ranks 0, 1 stopped (SIGTERM)" {
		t.Errorf("%v (%+v)", err, e)
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("took %s", took)
	}
	err, stdout, _, took := launch(t, fake{spec: "*:chatty", nproc: 2, opts: Options{Watchdog: 300 * time.Millisecond}})
	if err != nil || !strings.Contains(stdout.String(), "[rank 1] step 11\n") {
		t.Errorf("chatty ranks: %v\n%s", err, stdout)
	}
	if took < 400*time.Millisecond {
		t.Errorf("the chatty ranks took only %s", took)
	}
}

// Output is prefixed line by line, however it arrives.
func TestLaunchLines(t *testing.T) {
	err, stdout, _, _ := launch(t, fake{spec: "*:partial", nproc: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := "[rank 0] one line\n[rank 0] two\n[rank 0] three\n[rank 0] " + strings.Repeat("x", maxLine+10) + "\n[rank 0] no newline at the end\n"
	if got := stdout.String(); got != want {
		if len(got) > 200 {
			got = got[:100] + "…" + got[len(got)-100:]
		}
		t.Errorf("got %q", got)
	}
}

func TestLaunchStartFails(t *testing.T) {
	err := Launch(context.Background(), filepath.Join(t.TempDir(), "no-such-worker"), nil, 2, Options{})
	e := asError(t, err)
	if e.Cause != StartFailed || e.Rank != 0 || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "rank 0 could not start") {
		t.Errorf("%v (%+v)", err, e)
	}
}

// Real processes meet at the rendezvous, and refuse to when one holds
// another plan.
func TestLaunchRendezvousProcesses(t *testing.T) {
	err, stdout, stderr, _ := launch(t, fake{spec: "*:rendezvous", nproc: 4})
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	id := sha256.Sum256([]byte("the id"))
	for r := range 4 {
		if want := fmt.Sprintf("[rank %d] rank %d of 4 met, id %x \"rank 0\"\n", r, r, id[:4]); !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}

	err, _, stderr, took := launch(t, fake{spec: "*:rendezvous", nproc: 3, extraEnv: []string{"LAUNCHTEST_OTHER_PLAN_RANK=2"}})
	e := asError(t, err)
	if e.Cause != RankFailed || e.Status != "exit status 1" {
		t.Errorf("%v", err)
	}
	hashOf := func(s string) string { h := sha256.Sum256([]byte(s)); return fmt.Sprintf("%x", h[:8]) }
	// Every rank gets the verdict; the launcher may stop some before they
	// print it.
	want := "ranks hold different plans: rank 2 holds a different plan.bin than rank 0 (sha256 " + hashOf("the plan") + "… on ranks 0, 1; " + hashOf("another plan") + "… on rank 2)"
	line := regexp.MustCompile(`^\[rank (\d)\] rank (\d): rendezvous at 127\.0\.0\.1:\d+: `)
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if m := line.FindStringSubmatch(l); m == nil || m[1] != m[2] || !strings.Contains(l, want) {
			t.Errorf("stderr line %q, want [rank N] rank N: rendezvous at …: %s", l, want)
		}
		n++
	}
	if n == 0 {
		t.Errorf("no rank said why")
	}
	if took > 5*time.Second {
		t.Errorf("took %s", took)
	}
}
