package executor

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// Helpers that plan zoo models with edited TOML: a world size, a mesh,
// policy and train keys, fewer repeated blocks.

type edit func(src string) string

// setKey sets key = value in [section], replacing the key if present.
func setKey(section, key, value string) edit {
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

// dropKey removes key from [section].
func dropKey(section, key string) edit {
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

// world sets an FSDP world of n ranks, on GPUs with memory enough that
// the planner's budget check passes whatever the world size.
func world(n int) []edit {
	return []edit{dropKey("cluster", "nodes"), dropKey("cluster", "mesh"), dropKey("cluster", "memory_budget"),
		setKey("cluster", "gpu", `{ preset = "h100-sxm", hbm = "1000TiB" }`), setKey("cluster", "world_size", fmt.Sprint(n))}
}

// hsdp sets a replicate × shard mesh.
func hsdp(r, s int) []edit {
	return append(world(r*s), setKey("cluster", "mesh", fmt.Sprintf("{ replicate = %d, shard = %d }", r, s)))
}

// layers keeps n instances of every repeated block.
func layers(n int) edit {
	re := regexp.MustCompile(`(?m)^(\s*repeat\s*=\s*)\d+`)
	return func(src string) string { return re.ReplaceAllString(src, fmt.Sprintf("${1}%d", n)) }
}

func policy(key, value string) edit { return setKey("policy", key, value) }
func train(key, value string) edit  { return setKey("train", key, value) }

func zooPlan(t testing.TB, name string, edits ...edit) *schedule.Plan {
	t.Helper()
	p, err := zooPlanErr(name, edits...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func zooPlanErr(name string, edits ...edit) (*schedule.Plan, error) {
	src, file, ok := plans.Source(name)
	if !ok {
		return nil, fmt.Errorf("no zoo model %s", name)
	}
	s := string(src)
	for _, e := range edits {
		s = e(s)
	}
	m, err := ir.Load(file, []byte(s))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

func join(groups ...[]edit) []edit {
	var out []edit
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}
