// Package plans holds the model zoo: one TOML file per model, embedded in
// the fsdpc binary so `fsdpc inspect llama3-8b` works without a checkout.
// The compiled plans beside them are the reviewable record of what the
// planner does with each model.
package plans

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.toml
var zoo embed.FS

// Names lists the zoo models, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(zoo, ".")
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".toml"); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Source returns a zoo model's TOML text and the file name it is known by.
func Source(name string) (src []byte, file string, ok bool) {
	file = name + ".toml"
	src, err := fs.ReadFile(zoo, file)
	if err != nil {
		return nil, "", false
	}
	return src, "plans/" + file, true
}
