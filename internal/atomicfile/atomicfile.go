// Package atomicfile replaces output files the way every fsdpc command
// writes them: readers see the old file or the complete new one, never a
// part, and nothing but a regular file is ever replaced.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file in the same directory
// (so the rename stays on one file system), synced, then renamed over
// path. An existing path must be a regular file: renaming over a device
// node, FIFO, socket or symlink would replace it with a plain file (as
// root, -o /dev/null would destroy /dev/null).
func Write(path string, data []byte) (err error) {
	if err := replaceable(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := createTemp(func() (*os.File, error) { return os.CreateTemp(dir, "."+base+".tmp*") })
	if err != nil {
		return err
	}
	// Every way out removes or renames the temporary file through done,
	// which also forgets it for the signal cleanup (signal.go).
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			done(tmp.Name(), func() error { return os.Remove(tmp.Name()) })
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	// CreateTemp makes the file private; fsdpc's outputs are ordinary files.
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if TestHookBeforeRename != nil {
		TestHookBeforeRename(tmp.Name())
	}
	renamed = true
	err = done(tmp.Name(), func() error {
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Make the rename itself durable; not every system can sync a
	// directory, and the file is complete either way.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// TestHookBeforeRename, when set (by tests only), runs with the complete
// temporary file's name just before it is renamed over the output: tests
// block there to signal a process in the middle of a Write.
var TestHookBeforeRename func(tmp string)

// replaceable refuses an existing path that is not a regular file.
func replaceable(path string) error {
	st, err := os.Lstat(path)
	switch {
	case err != nil:
		return nil // a new file (or an error the create will report)
	case st.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case st.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: fsdpc replaces only regular files (write to the link's target instead)", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s): fsdpc replaces only regular files", path, st.Mode().Type())
	}
	return nil
}

// NotAnInput refuses an output path that is the same file as one of the
// command's inputs, so -o never silently overwrites what was read.
func NotAnInput(out string, inputs ...string) error {
	ost, err := os.Stat(out)
	if err != nil {
		return nil
	}
	for _, in := range inputs {
		if ist, err := os.Stat(in); err == nil && os.SameFile(ost, ist) {
			return fmt.Errorf("output %s is the input %s: choose another output file", out, in)
		}
	}
	return nil
}
