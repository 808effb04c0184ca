package torchgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Script is one Python program run once, in a scratch directory of its
// own: `fsdpc import torch`, the Python package's tests. (Launch runs one
// process per rank instead.)
type Script struct {
	// Setup writes what the program needs into its scratch directory,
	// given as a path on this machine.
	Setup func(dir string) error
	// Args are python3's arguments; relative paths are relative to the
	// scratch directory, which is the program's working directory.
	Args []string
	// Env adds NAME=value pairs to the program's environment.
	Env []string
	// Timeout ends the program and everything it started.
	Timeout time.Duration
	// Stderr, when set, receives the program's standard error as it is
	// written (progress); otherwise it is kept for the error message.
	Stderr io.Writer
	// Collect, when set, reads what a program that succeeded wrote into
	// its scratch directory, before the directory is removed.
	Collect func(dir string) error
}

// RunScript runs s under py and returns its standard output. A program
// that fails or outlives its timeout is an error quoting the end of its
// standard error; its process group is killed before RunScript returns.
func (py Python) RunScript(s Script) ([]byte, error) {
	inside, host, cleanup, err := py.workdir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if s.Setup != nil {
		if err := s.Setup(host); err != nil {
			return nil, err
		}
	}
	env := append([]string{"PYTHONPATH=" + inside, "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1", "USE_LIBUV=0"}, s.Env...)
	if py.Root != "" {
		env = append([]string{"-C", inside, "PATH=/usr/bin:/bin"}, env...)
	}
	cmd := py.pythonCommand(env, s.Args)
	if py.Root == "" {
		cmd.Dir = host
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if s.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, s.Stderr)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start python3: %w", err)
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		return nil, fmt.Errorf("python3 did not finish within %v; killed it:\n%s", timeout, tail(stderr.String(), 15))
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return stdout.Bytes(), fmt.Errorf("python3 %s: %w:\n%s", filepath.Base(firstArg(s.Args)), err, tail(stderr.String(), 20))
		}
		return nil, err
	}
	if s.Collect != nil {
		if err := s.Collect(host); err != nil {
			return stdout.Bytes(), err
		}
	}
	return stdout.Bytes(), nil
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
