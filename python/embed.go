// Package python carries fsdpc's Python package (python/fsdpc) inside the
// Go binary, so `fsdpc import torch` and generated programs can run it
// from an installed fsdpc without a checkout: the files are written to a
// scratch directory (or beside a generated program) and put on the
// interpreter's path. The Python sources are the product; this package
// only embeds them.
package python

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed fsdpc/*.py fsdpc/py.typed fsdpc/importer/*.py
var files embed.FS

// Files is the package tree rooted at the directory holding "fsdpc".
func Files() fs.FS { return files }

// WriteTo writes the package under dir, as dir/fsdpc/…, so that dir on
// PYTHONPATH (or the working directory) makes `import fsdpc` find it.
func WriteTo(dir string) error {
	return fs.WalkDir(files, "fsdpc", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
