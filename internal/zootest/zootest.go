// Package zootest loads zoo models for tests, with edits to their TOML: a
// world size, a mesh, policy and train keys, fewer repeated blocks. Tests
// of every stage plan edited zoo models; this is the one copy of the
// loader and of its edits. It imports ir and plans only, so the planner's
// own tests can use it too.
package zootest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
)

// Edit rewrites a model file's TOML.
type Edit func(src string) string

// Set sets key = value in [section], replacing the key if present and
// adding the section if absent.
func Set(section, key, value string) Edit {
	return func(src string) string {
		lines := strings.Split(src, "\n")
		head := -1
		for i, l := range lines {
			if strings.TrimSpace(l) == "["+section+"]" {
				head = i
				break
			}
		}
		if head < 0 {
			return src + "\n[" + section + "]\n" + key + " = " + value + "\n"
		}
		re := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(key) + `\s*=`)
		for i := head + 1; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "["); i++ {
			if re.MatchString(lines[i]) {
				lines[i] = key + " = " + value
				return strings.Join(lines, "\n")
			}
		}
		out := append([]string{}, lines[:head+1]...)
		out = append(out, key+" = "+value)
		return strings.Join(append(out, lines[head+1:]...), "\n")
	}
}

// Drop removes key from [section].
func Drop(section, key string) Edit {
	return func(src string) string {
		lines := strings.Split(src, "\n")
		in := false
		re := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(key) + `\s*=`)
		var out []string
		for _, l := range lines {
			t := strings.TrimSpace(l)
			if strings.HasPrefix(t, "[") {
				in = t == "["+section+"]"
			}
			if in && re.MatchString(l) {
				continue
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
}

// Policy, Train and Cluster set a key of [policy], [train] and [cluster].
func Policy(key, value string) Edit  { return Set("policy", key, value) }
func Train(key, value string) Edit   { return Set("train", key, value) }
func Cluster(key, value string) Edit { return Set("cluster", key, value) }

// World sets an FSDP world of n ranks, on GPUs with memory enough that
// the planner's budget check passes whatever the world size.
func World(n int) []Edit {
	return []Edit{Drop("cluster", "nodes"), Drop("cluster", "mesh"), Drop("cluster", "memory_budget"),
		Set("cluster", "gpu", `{ preset = "h100-sxm", hbm = "1000TiB" }`), Set("cluster", "world_size", fmt.Sprint(n))}
}

// HSDP sets a replicate × shard mesh (a plain FSDP world when r is 1).
func HSDP(r, s int) []Edit {
	if r == 1 {
		return World(s)
	}
	return append(World(r*s), Set("cluster", "mesh", fmt.Sprintf("{ replicate = %d, shard = %d }", r, s)))
}

var repeatRE = regexp.MustCompile(`(?m)^(\s*repeat\s*=\s*)\d+`)

// Layers keeps n instances of every repeated block.
func Layers(n int) Edit {
	return func(src string) string { return repeatRE.ReplaceAllString(src, fmt.Sprintf("${1}%d", n)) }
}

// Text is the zoo model's file name and its TOML after the edits.
func Text(name string, edits ...Edit) (file, text string, err error) {
	src, file, ok := plans.Source(name)
	if !ok {
		return "", "", fmt.Errorf("no zoo model %s", name)
	}
	text = string(src)
	for _, e := range edits {
		text = e(text)
	}
	return file, text, nil
}

// ModelErr loads the zoo model after the edits.
func ModelErr(name string, edits ...Edit) (*ir.Model, error) {
	file, text, err := Text(name, edits...)
	if err != nil {
		return nil, err
	}
	m, err := ir.Load(file, []byte(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// Model is ModelErr that fails the test on an error.
func Model(t testing.TB, name string, edits ...Edit) *ir.Model {
	t.Helper()
	m, err := ModelErr(name, edits...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
