// Package inputfile opens the files fsdpc reads (models, plans, configs,
// profiles, logs) the one way every command does: only a regular file is
// read. A FIFO nobody writes to would block the open, or the read, for
// ever; a device such as /dev/zero never ends; a directory is a mistake.
// Each is refused with an error naming the file and what it is.
package inputfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Open opens path for reading if it is a regular file; what names the
// kind of file the command wanted ("a model file") for the error. The open
// itself is non-blocking, so a FIFO without a writer cannot stall it, and
// the check is on the opened file (fstat), so the file cannot be swapped
// between check and read.
func Open(path, what string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := regular(path, what, st.Mode()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads a regular file of at most limit bytes. A larger file is
// read no further than limit+1 bytes, so the caller can say it is too
// large (len(data) > limit) without holding it whole.
func ReadFile(path, what string, limit int64) ([]byte, error) {
	f, err := Open(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// regular refuses every mode but a regular file's.
func regular(path, what string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch t := mode.Type(); {
	case t&fs.ModeDir != 0:
		return fmt.Errorf("%s is a directory, not %s", path, what)
	case t&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		kind = "a socket"
	case t&fs.ModeCharDevice != 0:
		kind = "a character device"
	case t&fs.ModeDevice != 0:
		kind = "a block device"
	}
	return fmt.Errorf("%s is %s, not %s: fsdpc reads only regular files", path, kind, what)
}
