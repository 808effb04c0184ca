package main

import (
	"errors"
	"io/fs"
	"os"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
)

// loadModel reads a model file, or a zoo model when no file of that name
// exists.
func loadModel(arg string) (*ir.Model, error) {
	if _, err := os.Stat(arg); errors.Is(err, fs.ErrNotExist) {
		if src, file, ok := plans.Source(arg); ok {
			return ir.Load(file, src)
		}
		return nil, noZooModel(arg)
	}
	m, err := ir.LoadFile(arg)
	if err != nil {
		if hint := hfConfigHint(arg); hint != "" {
			return nil, errors.New(hint)
		}
	}
	return m, err
}
