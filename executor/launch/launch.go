package launch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultGrace is how long a worker has between SIGTERM and SIGKILL.
const DefaultGrace = 10 * time.Second

// Options configure Launch. The zero value runs one node with rank 0's
// rendezvous on a free loopback port.
type Options struct {
	// NNodes and NodeRank place this node among several (default 1 and
	// 0): its workers are ranks NodeRank·nproc … NodeRank·nproc + nproc−1
	// of NNodes·nproc.
	NNodes, NodeRank int
	// MasterAddr and MasterPort are where rank 0 holds the rendezvous:
	// by default 127.0.0.1 and a free port; required with several nodes.
	MasterAddr string
	MasterPort int
	// Stdout and Stderr receive the workers' output, each line prefixed
	// with "[rank N] " (default os.Stdout and os.Stderr).
	Stdout, Stderr io.Writer
	// Env is the workers' environment before the rank variables are set
	// (default os.Environ()).
	Env []string
	// Grace is how long a worker has to exit after SIGTERM before it is
	// killed (default DefaultGrace).
	Grace time.Duration
	// Watchdog, when positive, tears the job down once no worker has
	// written any output for this long: progress is output.
	Watchdog time.Duration
}

// Cause says why a launch failed.
type Cause uint8

const (
	// RankFailed: a worker exited with a non-zero status or a signal.
	RankFailed Cause = iota + 1
	// StartFailed: a worker could not be started.
	StartFailed
	// Interrupted: the context was cancelled (Ctrl-C).
	Interrupted
	// WatchdogExpired: no worker wrote anything for Options.Watchdog.
	WatchdogExpired
)

// Exit is how one worker ended.
type Exit struct {
	Rank int
	// Status is the process state: "exit status 3", "signal: killed".
	Status string
	// Code is the exit code, -1 when a signal ended the worker.
	Code int
	// Signal is the signal that ended it, if one did.
	Signal syscall.Signal
	// Stopped: it ended after the launcher began tearing the job down.
	Stopped bool
}

// Error is a failed launch: why, the first rank that failed, and how every
// started worker ended.
type Error struct {
	Cause Cause
	// Rank is the first rank that failed (RankFailed) or could not start
	// (StartFailed); -1 otherwise. Status is its exit status.
	Rank   int
	Status string
	// Err is what interrupted the launch (Interrupted) or the start error
	// (StartFailed).
	Err      error
	Watchdog time.Duration
	Grace    time.Duration
	// Exits lists the started workers, in rank order.
	Exits []Exit
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	var b strings.Builder
	switch e.Cause {
	case RankFailed:
		fmt.Fprintf(&b, "rank %d failed (%s)", e.Rank, e.Status)
	case StartFailed:
		fmt.Fprintf(&b, "rank %d could not start: %v", e.Rank, e.Err)
	case Interrupted:
		fmt.Fprintf(&b, "interrupted (%v)", e.Err)
	case WatchdogExpired:
		fmt.Fprintf(&b, "watchdog: no rank wrote any output for %s", e.Watchdog)
	}
	// How the others ended, grouped: "ranks 0, 2 terminated; rank 3 had finished".
	var order []string
	groups := map[string][]int{}
	for _, x := range e.Exits {
		if e.Cause == RankFailed && x.Rank == e.Rank {
			continue
		}
		d := x.describe(e.Grace)
		if _, ok := groups[d]; !ok {
			order = append(order, d)
		}
		groups[d] = append(groups[d], x.Rank)
	}
	if len(order) > 0 {
		b.WriteString("; then ")
		for i, d := range order {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %s", rankList(groups[d]), d)
		}
	}
	return b.String()
}

func (x Exit) describe(grace time.Duration) string {
	switch {
	case !x.Stopped && x.Code == 0:
		return "had finished"
	case x.Signal == syscall.SIGTERM:
		return "stopped (SIGTERM)"
	case x.Signal == syscall.SIGKILL && x.Stopped:
		return fmt.Sprintf("killed after the %s grace period", grace)
	case x.Stopped:
		return "stopped (" + x.Status + ")"
	}
	return "ended (" + x.Status + ")"
}

// Launch runs nprocPerNode workers, `worker args…`, on this node, one per
// local rank, each with the rank environment of Env.Environ (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT) added to Options.Env. Their output goes to
// Options.Stdout and Stderr line by line, each line prefixed "[rank N] ".
//
// Launch returns nil when every worker exits 0. When one fails, when ctx is
// cancelled, or when the watchdog expires, it tears the job down: every
// running worker gets SIGTERM and, Options.Grace later, SIGKILL; it then
// returns an *Error naming the cause, the first rank that failed with its
// exit status, and how every worker ended.
func Launch(ctx context.Context, worker string, args []string, nprocPerNode int, o Options) error {
	if nprocPerNode < 1 {
		return fmt.Errorf("launch: %d processes per node; at least 1", nprocPerNode)
	}
	if o.NNodes == 0 {
		o.NNodes = 1
	}
	if o.NNodes < 1 || o.NodeRank < 0 || o.NodeRank >= o.NNodes {
		return fmt.Errorf("launch: node rank %d of %d nodes; expected 0 ≤ node rank < nodes", o.NodeRank, o.NNodes)
	}
	if o.NNodes > 1 && (o.MasterAddr == "" || o.MasterPort == 0) {
		return fmt.Errorf("launch: %d nodes need the master address and port, rank 0's node and a port free there, the same on every node", o.NNodes)
	}
	if o.MasterPort < 0 || o.MasterPort > 65535 {
		return fmt.Errorf("launch: master port %d is not a TCP port (1 to 65535)", o.MasterPort)
	}
	if o.MasterAddr == "" {
		o.MasterAddr = "127.0.0.1"
	}
	if o.MasterPort == 0 {
		port, err := freePort(o.MasterAddr)
		if err != nil {
			return fmt.Errorf("launch: finding a free port on %s for the rendezvous: %w", o.MasterAddr, err)
		}
		o.MasterPort = port
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}

	if err := ctx.Err(); err != nil {
		return &Error{Cause: Interrupted, Rank: -1, Err: context.Cause(ctx), Grace: o.Grace}
	}
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	out := &output{}
	out.touch()
	type result struct {
		local int
		state *os.ProcessState
		err   error
	}
	results := make(chan result, nprocPerNode)
	var fail *Error
	teardown := func(e *Error) {
		if fail == nil {
			fail = e
			stop()
		}
	}
	exits := make([]Exit, 0, nprocPerNode)
	for local := range nprocPerNode {
		e := Env{
			Rank: o.NodeRank*nprocPerNode + local, World: o.NNodes * nprocPerNode,
			LocalRank: local, LocalWorld: nprocPerNode,
			NodeRank: o.NodeRank, NNodes: o.NNodes,
			MasterAddr: o.MasterAddr, MasterPort: o.MasterPort,
		}
		cmd := exec.CommandContext(runCtx, worker, args...)
		cmd.Env = mergeEnv(o.Env, e.Environ())
		stdout, stderr := out.writer(e.Rank, o.Stdout), out.writer(e.Rank, o.Stderr)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.SysProcAttr = workerAttr() // they die with the launcher
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = o.Grace
		if err := cmd.Start(); err != nil {
			teardown(&Error{Cause: StartFailed, Rank: e.Rank, Err: err})
			break
		}
		exits = append(exits, Exit{Rank: e.Rank})
		go func() {
			err := cmd.Wait()
			stdout.flush()
			stderr.flush()
			results <- result{local, cmd.ProcessState, err}
		}()
	}

	var tick <-chan time.Time
	if o.Watchdog > 0 {
		t := time.NewTicker(max(min(o.Watchdog/8, time.Second), time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	done := ctx.Done()
	for running := len(exits); running > 0; {
		select {
		case r := <-results:
			running--
			x := &exits[r.local]
			x.Stopped = fail != nil
			x.Code = -1
			if r.state != nil {
				x.Status, x.Code = r.state.String(), r.state.ExitCode()
				if ws, ok := r.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					x.Signal = ws.Signal()
				}
			} else {
				x.Status = r.err.Error()
			}
			if x.Code != 0 {
				teardown(&Error{Cause: RankFailed, Rank: x.Rank, Status: x.Status})
			}
		case <-done:
			done = nil
			teardown(&Error{Cause: Interrupted, Rank: -1, Err: context.Cause(ctx)})
		case <-tick:
			if fail == nil && time.Since(out.lastWrite()) >= o.Watchdog {
				teardown(&Error{Cause: WatchdogExpired, Rank: -1, Watchdog: o.Watchdog})
			}
		}
	}
	if fail == nil {
		return nil
	}
	fail.Grace, fail.Exits = o.Grace, exits
	return fail
}

// freePort asks the system for a port that is free on host now.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// mergeEnv returns base with the variables of set replacing any of the same
// name.
func mergeEnv(base, set []string) []string {
	names := map[string]bool{}
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !names[name] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// output serialises the workers' lines and notes when the last arrived.
type output struct {
	mu   sync.Mutex
	last atomic.Int64 // unix ns
}

func (o *output) touch()               { o.last.Store(time.Now().UnixNano()) }
func (o *output) lastWrite() time.Time { return time.Unix(0, o.last.Load()) }

func (o *output) writer(rank int, w io.Writer) *lineWriter {
	return &lineWriter{o: o, w: w, prefix: []byte("[rank " + strconv.Itoa(rank) + "] ")}
}

// maxLine bounds a line kept waiting for its end; a longer one is broken.
const maxLine = 64 << 10

// lineWriter prefixes each line of one worker's stream. Write is called by
// one goroutine (os/exec's copier); flush after it is done.
type lineWriter struct {
	o      *output
	w      io.Writer
	prefix []byte
	buf    []byte // an unfinished line
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.o.touch()
	l.buf = append(l.buf, p...)
	var chunk []byte
	rest := l.buf
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		chunk = append(append(chunk, l.prefix...), rest[:i+1]...)
		rest = rest[i+1:]
	}
	if len(rest) >= maxLine {
		chunk = append(append(append(chunk, l.prefix...), rest...), '\n')
		rest = nil
	}
	l.buf = append(l.buf[:0], rest...)
	l.emit(chunk)
	return len(p), nil
}

func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		l.emit(append(append(append([]byte(nil), l.prefix...), l.buf...), '\n'))
		l.buf = nil
	}
}

func (l *lineWriter) emit(chunk []byte) {
	if len(chunk) == 0 {
		return
	}
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	l.w.Write(chunk) // a closed terminal must not stop the workers
}
