package executor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/fsdpc/fsdpc/internal/atomicfile"
)

// A checkpoint directory (docs/checkpoint.md, "The directory") holds one
// checkpoint per save, each in a directory of its own named after its step
// (step-N, as torchtitan's DCP checkpoints are), and a pointer file,
// LatestName, naming the complete one to load. A save writes its files
// into a staging directory beside the checkpoints, renames it to its
// step-N name once every file is synced, and only then replaces the
// pointer (atomicfile: a rename). The last complete checkpoint is never
// touched before the switch, so a save killed at any moment leaves the
// old checkpoint or the new one loadable. After the switch the save keeps
// the checkpoint it replaced (a reader that resolved the pointer just
// before still finds its files) and removes older ones and what killed
// saves left.

// LatestName is the pointer file of a checkpoint directory: it holds the
// name of the last complete checkpoint's directory and a newline.
const LatestName = "latest"

// stagingPrefix names a save's directory until it is complete.
const stagingPrefix = ".partial-"

// generation matches the directories saves name: step-N, or step-N.K for
// the K-th later save at the same step.
var generation = regexp.MustCompile(`^step-[0-9]{1,19}(\.[0-9]{1,9})?$`)

// testHookSave, when set (by tests only), runs before each step of a save
// that changes the directory; a test panics there to stop the save as a
// kill would, without any cleanup.
var testHookSave func(point string)

func hook(point string) {
	if testHookSave != nil {
		testHookSave(point)
	}
}

// PrepareCheckpointDir checks, before a run, that its checkpoint can be
// saved into dir: it creates dir, refuses a pointer that is not a regular
// file, and makes and removes a staging directory.
func PrepareCheckpointDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if st, err := os.Lstat(filepath.Join(dir, LatestName)); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("checkpoint: %s is not a regular file", filepath.Join(dir, LatestName))
	}
	stage, err := os.MkdirTemp(dir, stagingPrefix)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return os.Remove(stage)
}

// ckptFileData is one file of a checkpoint to write.
type ckptFileData struct {
	name string
	data []byte
}

// commitCheckpoint writes a checkpoint of files (the metadata last) into
// a new directory of dir and switches the pointer to it; it returns the
// new directory's path.
func commitCheckpoint(dir string, step int, files []ckptFileData) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	prev, _ := readLatest(dir)
	sweep(dir, func(name string) bool {
		return strings.HasPrefix(name, stagingPrefix) || strings.HasPrefix(name, "."+LatestName+".tmp")
	})
	stage, err := os.MkdirTemp(dir, stagingPrefix)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Chmod(stage, 0o755); err != nil {
		os.RemoveAll(stage)
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	for _, f := range files {
		hook("write " + f.name)
		if err := writeSynced(filepath.Join(stage, f.name), f.data); err != nil {
			os.RemoveAll(stage)
			return "", fmt.Errorf("checkpoint: %w", err)
		}
	}
	syncDir(stage)
	name := fmt.Sprintf("step-%d", step)
	for k := 1; exists(filepath.Join(dir, name)); k++ {
		name = fmt.Sprintf("step-%d.%d", step, k)
	}
	hook("rename")
	if err := os.Rename(stage, filepath.Join(dir, name)); err != nil {
		os.RemoveAll(stage)
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	syncDir(dir)
	hook("switch")
	if err := atomicfile.Write(filepath.Join(dir, LatestName), []byte(name+"\n")); err != nil {
		return "", fmt.Errorf("checkpoint: %s is complete but %s still names %q: %w", filepath.Join(dir, name), filepath.Join(dir, LatestName), prev, err)
	}
	hook("prune")
	sweep(dir, func(n string) bool { return generation.MatchString(n) && n != name && n != prev })
	return filepath.Join(dir, name), nil
}

// sweep removes the directories in dir whose names drop says, and the
// files among them (a killed pointer write's temporary file).
func sweep(dir string, drop func(string) bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if drop(e.Name()) {
			hook("remove " + e.Name())
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// writeSynced writes a new file and syncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes the renames and creations in dir durable; not every
// system can sync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// readLatest returns the checkpoint directory the pointer of dir names.
func readLatest(dir string) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	return latestIn(root, dir)
}

// latestIn reads the pointer in root (the checkpoint directory dir); a
// pointer that names anything but a checkpoint directory is an error.
func latestIn(root *os.Root, dir string) (string, error) {
	path := filepath.Join(dir, LatestName)
	b, err := readIn(root, LatestName, path, "a checkpoint's pointer", 64)
	if err != nil {
		return "", err
	}
	name, ok := strings.CutSuffix(string(b), "\n")
	if !ok || !generation.MatchString(name) {
		return "", fmt.Errorf("%s: names %s, not a checkpoint directory (step-N) of %s", path, strconv.Quote(string(b)), dir)
	}
	return name, nil
}

// openCheckpoint opens the checkpoint a load reads: the one the pointer
// of dir names, or dir itself when it holds metadata.json and no pointer
// (a step-N directory named directly, or the single-directory layout of
// earlier fsdpc). Every file is then read through the returned root, so
// no symlink leads a load outside the checkpoint's directory.
func openCheckpoint(dir string) (root *os.Root, path string, err error) {
	top, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint: %w", err)
	}
	defer top.Close()
	name, err := latestIn(top, dir)
	switch {
	case err == nil:
		path = filepath.Join(dir, name)
		sub, err := top.OpenRoot(name)
		if err != nil {
			return nil, "", fmt.Errorf("%s names %s: %w", filepath.Join(dir, LatestName), name, rootErr(err))
		}
		return sub, path, nil
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := top.Lstat(MetadataName); serr != nil {
			return nil, "", fmt.Errorf("%s: no checkpoint: neither %s nor %s is there", dir, LatestName, MetadataName)
		}
		again, err := os.OpenRoot(dir)
		if err != nil {
			return nil, "", fmt.Errorf("checkpoint: %w", err)
		}
		return again, dir, nil
	default:
		return nil, "", err
	}
}

// readIn reads name, a regular file of at most limit bytes, inside root;
// path names it for errors. A symlink out of root is refused.
func readIn(root *os.Root, name, path, what string, limit int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // os.Root names the file relative to the root
			err = &fs.PathError{Op: pe.Op, Path: path, Err: pe.Err}
		}
		return nil, rootErr(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		kind := "not a regular file"
		switch t := st.Mode().Type(); {
		case t&fs.ModeDir != 0:
			kind = "a directory"
		case t&fs.ModeNamedPipe != 0:
			kind = "a named pipe (FIFO)"
		case t&fs.ModeDevice != 0:
			kind = "a device"
		}
		return nil, fmt.Errorf("%s is %s, not %s", path, kind, what)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// rootErr says why os.Root refused a path in the words of a checkpoint.
func rootErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
		return fmt.Errorf("%w: a symlink leading out of the checkpoint's directory; its files must lie inside it", err)
	}
	return err
}
