package diff_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

var update = flag.Bool("update", false, "rewrite the golden diffs in testdata/")

func planOf(t *testing.T, name, text string) *schedule.Plan {
	t.Helper()
	m, err := ir.Load(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func zooText(t *testing.T, name string) string {
	src, _, ok := plans.Source(name)
	if !ok {
		t.Fatalf("no zoo model %s", name)
	}
	return string(src)
}

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the zoo file no longer contains %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./schedule/diff -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale; review and run go test ./schedule/diff -update\ngot:\n%s", path, got)
	}
}

// TestGoldenDiffs diffs llama3-8b against variants a reviewer meets in
// practice; each golden file is what the reviewer would read.
func TestGoldenDiffs(t *testing.T) {
	base := zooText(t, "llama3-8b")
	variants := []struct {
		name   string
		edit   func(string) string
		checks func(t *testing.T, r *diff.Result)
	}{
		{"reshard-flipped", func(s string) string {
			return s + "\n[[policy.override]]\nmatch = \"layers.*\"\nreshard_after_forward = false\n"
		}, func(t *testing.T, r *diff.Result) {
			if len(r.Groups.Policy) != 1 || r.Groups.Policy[0].Folded != "layers.{0–31}" {
				t.Errorf("policy: %+v", r.Groups.Policy)
			}
			found := false
			for _, p := range r.Schedule {
				found = found || p.Phase == "backward" && p.Kind == "all-gather" && p.New == 0 && p.Folded == "layers.{0–31}"
			}
			if !found {
				t.Errorf("the backward all-gathers of layers.{0–31} should be reported removed: %+v", r.Schedule)
			}
		}},
		{"prefetch-depth", func(s string) string {
			return replace(t, s, "reduce_dtype = \"fp32\"", "reduce_dtype = \"fp32\"\nprefetch_forward = 2")
		}, nil},
		{"reduce-dtype", func(s string) string { return replace(t, s, "reduce_dtype = \"fp32\"", "reduce_dtype = \"bf16\"") }, nil},
		{"world-size", func(s string) string { return replace(t, s, "world_size = 8", "world_size = 16") }, func(t *testing.T, r *diff.Result) {
			if len(r.Cluster) == 0 || len(r.Groups.Layout) == 0 {
				t.Errorf("world size change not reported: %+v %+v", r.Cluster, r.Groups.Layout)
			}
		}},
		{"layer-added", func(s string) string { return replace(t, s, "repeat = 32", "repeat = 33") }, func(t *testing.T, r *diff.Result) {
			if len(r.Groups.Added) != 1 || r.Groups.Added[0] != "layers.32" || len(r.Groups.Removed) != 0 {
				t.Errorf("added %v removed %v", r.Groups.Added, r.Groups.Removed)
			}
		}},
		{"groups-split", func(s string) string {
			return replace(t, s, "units = \"blocks\"", "units = [\"layers.*\", \"tok_embeddings\", \"output\"]")
		}, func(t *testing.T, r *diff.Result) {
			if len(r.Groups.Split) != 1 || r.Groups.Split[0].From[0] != "(root)" || len(r.Groups.Split[0].To) != 3 {
				t.Errorf("split: %+v", r.Groups.Split)
			}
		}},
	}
	old := planOf(t, "plans/llama3-8b.toml", base)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			newPlan := planOf(t, "variant.toml", v.edit(base))
			r := diff.Compare("llama3-8b", old, v.name, newPlan)
			if r.Identical {
				t.Fatal("the variant is reported identical")
			}
			if v.checks != nil {
				v.checks(t, r)
			}
			var b bytes.Buffer
			diff.Text(&b, r, false)
			golden(t, filepath.Join("testdata", v.name+".txt"), b.Bytes())
		})
	}
	// Merging is the split read backwards.
	split := planOf(t, "split.toml", variants[5].edit(base))
	r := diff.Compare("split", split, "llama3-8b", old)
	if len(r.Groups.Merged) != 1 || r.Groups.Merged[0].To[0] != "(root)" || len(r.Groups.Merged[0].From) != 3 {
		t.Errorf("merged: %+v", r.Groups.Merged)
	}
	var md, js bytes.Buffer
	diff.Markdown(&md, r)
	golden(t, filepath.Join("testdata", "groups-merged.md"), md.Bytes())
	if err := diff.JSON(&js, r, nil, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "groups-merged.json"), js.Bytes())
	var doc map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || doc["schema"] != "fsdpc/v1" || doc["command"] != "diff" {
		t.Errorf("JSON schema: %v %v %v", err, doc["schema"], doc["command"])
	}
	// Numbers are numbers (seconds, bytes), never display strings.
	layout := doc["groups"].(map[string]any)["layout"].([]any)
	changes := append(doc["prediction"].([]any), layout...)
	if len(doc["prediction"].([]any)) == 0 {
		t.Fatal("no prediction changes to check")
	}
	for _, c := range changes {
		c := c.(map[string]any)
		for _, side := range []string{"old", "new"} {
			if _, ok := c[side].(float64); !ok {
				t.Errorf("%s: %s = %#v, not a number", c["what"], side, c[side])
			}
		}
		if u := c["unit"]; c["what"] == "step time" && u != "s" || strings.Contains(c["what"].(string), "bytes") && u != "bytes" {
			t.Errorf("%s: unit %v", c["what"], u)
		}
	}
}

func TestIdentical(t *testing.T) {
	p := planOf(t, "plans/llama3-8b.toml", zooText(t, "llama3-8b"))
	q := planOf(t, "plans/llama3-8b.toml", zooText(t, "llama3-8b"))
	r := diff.Compare("a", p, "b", q)
	if !r.Identical {
		t.Fatalf("a plan differs from itself: %+v", r)
	}
}

// TestWorldSizeFitsOneScreen: changing the world size of llama3.1-405b
// touches every group, yet the summary stays short.
func TestWorldSizeFitsOneScreen(t *testing.T) {
	base := zooText(t, "llama3.1-405b")
	old := planOf(t, "plans/llama3.1-405b.toml", base)
	bigger := replace(t, replace(t, base, "world_size = 512", "world_size = 1024"), "shard = 256", "shard = 512")
	r := diff.Compare("512", old, "1024", planOf(t, "bigger.toml", bigger))
	var b bytes.Buffer
	diff.Text(&b, r, false)
	text := b.String()
	summary := text[:strings.Index(text, "\ndetails")]
	if n := strings.Count(summary, "\n"); n > 24 {
		t.Errorf("the summary takes %d lines:\n%s", n, summary)
	}
	if !strings.Contains(text, "layers.{0–125}") {
		t.Errorf("per-layer changes are not folded into a range:\n%s", text)
	}
	golden(t, filepath.Join("testdata", "405b-world-size.txt"), b.Bytes())
}

func TestFold(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"layers.0", "layers.1", "layers.2", "layers.5", "(root)"}, "(root), layers.{0–2,5}"},
		{[]string{"layers.3"}, "layers.3"},
		{[]string{"enc.block.1", "enc.block.2", "dec.block.0"}, "enc.block.{1–2}, dec.block.0"},
		// Stride folding: every other layer, then a tail.
		{[]string{"layers.0", "layers.2", "layers.4", "layers.6", "layers.30"}, "layers.{0,2,…,6,30}"},
		{[]string{"layers.1", "layers.5", "layers.9", "layers.13"}, "layers.{1,5,…,13}"},
		{[]string{"layers.0", "layers.3"}, "layers.{0,3}"},
		{[]string{"layers.0", "layers.1", "layers.2", "layers.4", "layers.6", "layers.8"}, "layers.{0–2,4,6,8}"},
	}
	for _, tt := range tests {
		if got := diff.Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The checkpoint section: absent when the new plan loads the old
// checkpoint chunk for chunk (the same plan; a changed unit split);
// present with the bytes when the shard group changes, and as a refusal
// naming the entry when a dtype changes.
func TestCheckpointSection(t *testing.T) {
	base := zooText(t, "gpt2-124m")
	old := planOf(t, "plans/gpt2-124m.toml", base)
	for _, tc := range []struct {
		name, text string
		want       string // "" for no section
	}{
		{"same", base, ""},
		{"units", replace(t, base, `units = "blocks"`, `units = "block-children"`), ""},
		{"world", replace(t, base, "world_size = 8", "world_size = 4"), "resharded on load: the new ranks read 1.53 GiB, 1.34 GiB of it from files other ranks wrote"},
		{"dtype", replace(t, base, `dtype = "fp32"`, `dtype = "bf16"`), "model.transformer.wte.weight: dtype fp32 was saved, the new plan has bf16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := diff.Compare("old", old, tc.name, planOf(t, tc.name+".toml", tc.text))
			var b bytes.Buffer
			diff.Text(&b, r, false)
			if tc.want == "" {
				if r.Checkpoint != nil {
					t.Errorf("a checkpoint section: %+v", r.Checkpoint)
				}
				return
			}
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("the diff lacks %q:\n%s", tc.want, b.String())
			}
		})
	}
}
