package python_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/torchgen"
)

// writeFixtures plans every tests/fixtures/*.toml and writes, beside it
// under dst, NAME.plan.json (the plan as `fsdpc export` writes it) and
// NAME.model.json (the model's module tree, for fsdpc.mirror), so the
// Python tests always read exports of the current fsdpc.
func writeFixtures(dst string) error {
	models, err := filepath.Glob(filepath.Join("tests", "fixtures", "*.toml"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, path := range models {
		m, err := ir.LoadFile(path)
		if err != nil {
			return err
		}
		p, err := planner.Plan(m, planner.Options{})
		if err != nil {
			return err
		}
		q, spec, err := torchgen.ScalePlan(m, p, 1)
		if err != nil {
			return err
		}
		e, err := torchgen.NewExport(spec, q, 1)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(path), ".toml")
		for suffix, v := range map[string]any{".plan.json": e, ".model.json": struct {
			Model torchgen.Node `json:"model"`
		}{spec.Model}} {
			b, err := json.MarshalIndent(v, "", " ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dst, name+suffix), b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
