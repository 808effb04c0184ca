// Package atomicfile replaces output files the way every fsdpc command
// writes them: readers see the old file or the complete new one, never a
// part, and nothing but a regular file is ever replaced.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsdpc/fsdpc/internal/safetext"
)

// Write replaces path with data: a temporary file in the same directory
// (so the rename stays on one file system), synced, then renamed over
// path. An existing path must be a regular file: renaming over a device
// node, FIFO, socket or symlink would replace it with a plain file (as
// root, -o /dev/null would destroy /dev/null).
func Write(path string, data []byte) (err error) {
	return WriteFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc replaces path as Write does with what write writes, streamed
// through a buffer into the temporary file: an output far larger than
// the memory it is made from (a trace, the JSON of a plan of millions of
// operations) is never held whole. An error from write leaves path as it
// was.
func WriteFunc(path string, write func(w io.Writer) error) (err error) {
	if err := Check(path); err != nil {
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
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
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

// maxName is the longest output file name Write can replace: the
// temporary file beside it is "." + name + ".tmp" and up to 10 digits, and
// Linux and macOS file systems allow 255 bytes in a name.
const maxName = 255 - len("..tmp") - 10

// Check is what Write requires of an output path, checked before a command
// does its work so that an unusable name fails at once and clearly: not
// empty, a name short enough for Write's temporary file, in a directory
// that exists, and not an existing directory, link or non-regular file.
func Check(path string) error {
	if path == "" {
		return fmt.Errorf("the output file name is empty")
	}
	base := filepath.Base(path)
	if len(base) > maxName {
		return fmt.Errorf("output file name %s is %d bytes long; the limit is %d (a file system allows 255, and fsdpc writes a temporary file beside it)",
			safetext.Term(path), len(base), maxName)
	}
	if strings.HasSuffix(path, "/") {
		return fmt.Errorf("output %s names a directory, not a file", safetext.Term(path))
	}
	if dir := filepath.Dir(path); dir != "." {
		if st, err := os.Stat(dir); err != nil {
			return fmt.Errorf("output %s: its directory: %w", safetext.Term(path), err)
		} else if !st.IsDir() {
			return fmt.Errorf("output %s: %s is not a directory", safetext.Term(path), safetext.Term(dir))
		}
	}
	return replaceable(path)
}

// CheckDir is Check for an output directory a command will create (with
// os.MkdirAll) or write files into: not empty, and either an existing
// directory fsdpc can create files in, or a path whose nearest existing
// ancestor is a directory.
func CheckDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("the output directory name is empty")
	}
	st, err := os.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return fmt.Errorf("output directory %s is not a directory", safetext.Term(dir))
		}
		f, err := os.CreateTemp(dir, ".fsdpc-check*")
		if err != nil {
			return fmt.Errorf("output directory %s: %w", safetext.Term(dir), err)
		}
		f.Close()
		return os.Remove(f.Name())
	}
	for up := filepath.Dir(filepath.Clean(dir)); ; up = filepath.Dir(up) {
		if st, err := os.Stat(up); err == nil {
			if !st.IsDir() {
				return fmt.Errorf("output directory %s: %s is not a directory", safetext.Term(dir), safetext.Term(up))
			}
			return nil
		}
		if up == "." || up == "/" || up == filepath.Dir(up) {
			return nil
		}
	}
}

// Same reports whether two output paths name one file: the same file when
// both exist (a hard link, a symlinked directory, "./x" and "x"), or, when
// one does not exist yet, the same name in the same directory.
func Same(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	if filepath.Base(a) != filepath.Base(b) {
		return false
	}
	da, errA := os.Stat(filepath.Dir(a))
	db, errB := os.Stat(filepath.Dir(b))
	if errA == nil && errB == nil {
		return os.SameFile(da, db)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// replaceable refuses an existing path that is not a regular file.
func replaceable(path string) error {
	st, err := os.Lstat(path)
	switch {
	case err != nil:
		return nil // a new file (or an error the create will report)
	case st.IsDir():
		return fmt.Errorf("%s is a directory", safetext.Term(path))
	case st.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: fsdpc replaces only regular files (write to the link's target instead)", safetext.Term(path))
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s): fsdpc replaces only regular files", safetext.Term(path), st.Mode().Type())
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
			return fmt.Errorf("output %s is the input %s: choose another output file", safetext.Term(out), safetext.Term(in))
		}
	}
	return nil
}
