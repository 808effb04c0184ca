package torchgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultRoot is where .ci/install-torch builds its Debian root.
const DefaultRoot = "/var/cache/fsdpc/torch-forky"

// Python says how to start the harness: a python3 on this machine, or the
// python3 inside a chroot made by .ci/install-torch.
type Python struct {
	Path string // a python3 with torch; empty: use Root
	Root string // the chroot
}

// FindPython picks the interpreter: an explicit path, else the chroot.
func FindPython(path string) (Python, error) {
	if path != "" {
		if _, err := exec.LookPath(path); err != nil {
			return Python{}, fmt.Errorf("--python %s: %w", path, err)
		}
		return Python{Path: path}, nil
	}
	root := os.Getenv("FSDPC_TORCH_ROOT")
	if root == "" {
		root = DefaultRoot
	}
	// The root reaches mount(8) and chroot(8) as an argument: absolute, it
	// cannot be read as an option.
	root, err := filepath.Abs(root)
	if err != nil {
		return Python{}, fmt.Errorf("FSDPC_TORCH_ROOT: %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, ".fsdpc-torch-ready")); err != nil {
		return Python{}, fmt.Errorf("no PyTorch found: run `bash .ci/install-torch` (as root; builds Debian forky's python3-torch 2.14 under %s), or pass --python PATH naming a python3 with torch and FSDP2", root)
	}
	return Python{Root: root}, nil
}

// Record is what one rank's harness wrote.
type Record struct {
	Torch       string       `json:"torch"`
	Layouts     []Layout     `json:"layouts"`
	Collectives []Collective `json:"collectives"`
	// Events are what each parameter group did, in order (Event).
	Events []Event `json:"events"`
	// Checkpoint is DCP's metadata, on rank 0 of a spec with Checkpoint.
	Checkpoint *DCPMetadata `json:"checkpoint"`
}

// Layout is one FSDP2 parameter group as FSDP2 built it.
type Layout struct {
	Modules []string `json:"modules"`
	Params  []struct {
		FQN    string  `json:"fqn"`
		Padded []int64 `json:"padded"`
	} `json:"params"`
}

// Collective is one collective FSDP2 issued, with the op it asked for.
type Collective struct {
	Op        string `json:"op"`
	Phase     string `json:"phase"`
	In        int64  `json:"in"`
	Out       int64  `json:"out"`
	DType     string `json:"dtype"`
	Reduce    string `json:"reduce"`
	GroupSize int    `json:"group_size"`
}

// testHang, set by tests only, makes rank R stop before its Nth
// collective ("R:N"): what a timeout is tested against. It is a variable,
// not the environment, so nothing outside fsdpc's tests can make a run
// hang.
var testHang string

// Launch runs the harness on every rank and returns the ranks' records.
// A rank that fails or outlives timeout fails the run, named with its
// output's last lines; every rank's process group is killed before it
// returns, so none outlives the run.
func Launch(py Python, s *Spec, timeout time.Duration) ([]Record, error) {
	recs, err := LaunchAll(py, []*Spec{s}, timeout)
	if err != nil {
		return nil, err
	}
	return recs[0], nil
}

// LaunchAll runs several specs of one world size in one set of rank
// processes, one after another, so torch is imported once (seconds a rank
// on a loaded machine) rather than once a spec. It returns each spec's
// records; the first failure fails them all.
func LaunchAll(py Python, specs []*Spec, timeout time.Duration) ([][]Record, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	world := specs[0].World
	for _, s := range specs {
		if s.World != world {
			return nil, fmt.Errorf("specs of world sizes %d and %d cannot share a launch", world, s.World)
		}
	}
	work, hostWork, cleanup, err := py.workdir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if err := os.WriteFile(filepath.Join(hostWork, "harness.py"), []byte(harness), 0o644); err != nil {
		return nil, err
	}
	// The harness takes SPEC OUT_DIR pairs; the first OUT_DIR also gets
	// each rank's log of collectives issued.
	harnessArgs := []string{filepath.Join(work, "harness.py")}
	for i, s := range specs {
		spec, err := s.JSON()
		if err != nil {
			return nil, err
		}
		dir := fmt.Sprintf("case%d", i)
		if err := os.Mkdir(filepath.Join(hostWork, dir), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(hostWork, dir, "spec.json"), spec, 0o644); err != nil {
			return nil, err
		}
		harnessArgs = append(harnessArgs, filepath.Join(work, dir, "spec.json"), filepath.Join(work, dir))
	}
	s := specs[0]
	port := 20000 + os.Getpid()%20000
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		rank int
		err  error
		out  string
	}
	done := make(chan result, s.World)
	cmds := make([]*exec.Cmd, s.World)
	for r := 0; r < s.World; r++ {
		env := []string{"RANK=" + fmt.Sprint(r), "WORLD_SIZE=" + fmt.Sprint(s.World), "LOCAL_RANK=" + fmt.Sprint(r),
			"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port), "USE_LIBUV=0", "OMP_NUM_THREADS=1", "PATH=/usr/bin:/bin"}
		if testHang != "" {
			env = append(env, "FSDPC_TORCH_TEST_HANG="+testHang)
		}
		cmd := py.pythonCommand(env, harnessArgs)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			killAll(cmds)
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
		cmds[r] = cmd
		go func(r int, cmd *exec.Cmd, out *bytes.Buffer) {
			err := cmd.Wait()
			done <- result{r, err, out.String()}
		}(r, cmd, &out)
	}
	var failures []string
	for n := 0; n < s.World; n++ {
		select {
		case res := <-done:
			if res.err != nil {
				failures = append(failures, fmt.Sprintf("rank %d failed (%v):\n%s", res.rank, res.err, tail(res.out, 15)))
				killAll(cmds)
			}
		case <-ctx.Done():
			killAll(cmds)
			// Reap every rank before returning, so none outlives the run.
			for ; n < s.World; n++ {
				<-done
			}
			last := lastCollectives(filepath.Join(hostWork, "case0"), s.World)
			return nil, fmt.Errorf("the torch ranks did not finish within %v; killed every rank%s", timeout, last)
		}
	}
	if len(failures) > 0 {
		return nil, errors.New(strings.Join(failures, "\n"))
	}
	all := make([][]Record, len(specs))
	for i := range specs {
		recs := make([]Record, world)
		for r := range recs {
			b, err := os.ReadFile(filepath.Join(hostWork, fmt.Sprintf("case%d", i), fmt.Sprintf("rank%d.json", r)))
			if err != nil {
				return nil, fmt.Errorf("rank %d wrote no record: %w", r, err)
			}
			if err := json.Unmarshal(b, &recs[r]); err != nil {
				return nil, fmt.Errorf("rank %d record: %w", r, err)
			}
		}
		all[i] = recs
	}
	return all, nil
}

func killAll(cmds []*exec.Cmd) {
	for _, c := range cmds {
		// Each rank leads its own process group (Setpgid), so this ends
		// the rank and anything it started; a group already gone is ESRCH.
		if c != nil && c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
}

// lastCollectives names each rank's last collective from the logs the
// harness writes before issuing each one.
func lastCollectives(dir string, world int) string {
	var b strings.Builder
	for r := 0; r < world; r++ {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.log", r)))
		if err != nil {
			fmt.Fprintf(&b, "\n  rank %d had not started", r)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if last := lines[len(lines)-1]; last != "" {
			fmt.Fprintf(&b, "\n  rank %d last issued: %s", r, last)
		} else {
			fmt.Fprintf(&b, "\n  rank %d issued no collective", r)
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var keep []string
	for _, l := range lines {
		if strings.Contains(l, "UCX  ERROR") || strings.Contains(l, "Error in cpuinfo") || strings.Contains(l, "gloo/transport") || strings.Contains(l, "Unable to resolve hostname") {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return "  " + strings.Join(keep, "\n  ")
}

// workdir makes a scratch directory the harness can see; cleanup removes
// it. The directory holds a lock for as long as this process lives, so a
// run killed outright (SIGKILL, a timeout's kill) leaves a directory the
// next run finds unlocked and removes. A chroot's /proc, /dev and /dev/shm
// are not bound here: each process started in the root binds them in a
// mount namespace of its own (pythonCommand), so they vanish with it.
func (py Python) workdir() (inside, host string, cleanup func(), err error) {
	parent := os.TempDir()
	if py.Root != "" {
		parent = filepath.Join(py.Root, "tmp")
	}
	removeStaleScratch(parent)
	d, release, err := lockedScratch(parent)
	if err != nil {
		return "", "", nil, err
	}
	undo := func() {
		os.RemoveAll(d)
		release()
	}
	if py.Root == "" {
		return d, d, undo, nil
	}
	return "/tmp/" + filepath.Base(d), d, undo, nil
}

// scratchPrefix names the scratch directories workdir makes.
const scratchPrefix = "fsdpc-torch-"

// removeStaleScratch removes the scratch directories in parent whose run
// is gone: their lock can be taken. A directory still being set up, or
// one a live run holds, is left alone.
func removeStaleScratch(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), scratchPrefix) {
			continue
		}
		d := filepath.Join(parent, e.Name())
		if release, ok := tryLock(filepath.Join(d, scratchLock)); ok {
			os.RemoveAll(d)
			release()
		}
	}
}

// scratchLock is the file in a scratch directory its run holds locked.
const scratchLock = ".fsdpc-lock"

// lockedScratch makes a scratch directory in parent and takes its lock.
// A directory whose lock another run's sweep took first (it is being
// removed) is abandoned for a fresh one.
func lockedScratch(parent string) (dir string, release func(), err error) {
	for try := 0; try < 10; try++ {
		d, err := os.MkdirTemp(parent, scratchPrefix)
		if err != nil {
			return "", nil, err
		}
		if release, ok := createLocked(filepath.Join(d, scratchLock)); ok {
			return d, release, nil
		}
	}
	return "", nil, fmt.Errorf("cannot lock a scratch directory in %s", parent)
}

// pythonCommand starts python3 with args: directly, or inside the chroot.
// In the chroot, envArgs go to env(1) (NAME=value pairs, or options such as
// -C DIR); for a python3 on this machine they are added to its environment.
//
// A chroot rank runs in a private mount namespace (CLONE_NEWNS, see
// rankAttr) in which a shell binds the host's /proc, /dev and /dev/shm
// into the root and then becomes chroot, env and python3 (each execs the
// next, in one process). The mounts belong to that namespace: they are
// never seen on the host, two runs do not share (or unmount) each other's,
// and they vanish when the process ends however it ends. The root reaches
// the shell as an argument, never as part of its script.
func (py Python) pythonCommand(envArgs, args []string) *exec.Cmd {
	if py.Root == "" {
		cmd := exec.Command(py.Path, args...)
		cmd.Env = append(os.Environ(), envArgs...)
		cmd.SysProcAttr = rankAttr(false)
		return cmd
	}
	const bind = `mount --bind /proc "$1/proc" && mount --bind /dev "$1/dev" && mount --bind /dev/shm "$1/dev/shm" && exec chroot "$@"`
	argv := append([]string{"-c", bind, "sh", py.Root, "env"}, envArgs...)
	argv = append(append(argv, "python3"), args...)
	cmd := exec.Command("/bin/sh", argv...)
	cmd.SysProcAttr = rankAttr(true)
	return cmd
}
