package executor

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/internal/atomicfile"
)

// killed is what the test hooks panic with: a save stopped there, as a
// kill would stop it, without any cleanup.
type killed string

// saveKilledAt runs a save of p (steps) into dir that stops at the n-th
// point (1-based) where it changes the directory, counting the pointer's
// rename in atomicfile; n = 0 runs it whole. It returns the points passed
// and whether the save was stopped.
func saveKilledAt(t *testing.T, opts Options, n int) (points []string, stopped bool, rep *Report) {
	t.Helper()
	at := func(point string) {
		points = append(points, point)
		if len(points) == n {
			panic(killed(point))
		}
	}
	testHookSave = at
	atomicfile.TestHookBeforeRename = func(tmp string) {
		if strings.Contains(tmp, LatestName) {
			at("rename pointer")
		}
	}
	defer func() {
		testHookSave, atomicfile.TestHookBeforeRename = nil, nil
		if r := recover(); r != nil {
			if _, ok := r.(killed); !ok {
				panic(r)
			}
			stopped = true
		}
	}()
	rep = mustRun(t, zooPlan(t, "gpt2-124m", append(world(4), shrink, layers(1))...), opts)
	return points, false, rep
}

// TestCheckpointSaveKilledAnywhere stops a save into a directory holding
// two checkpoints at every point where it changes the directory, as a
// kill would (no cleanup), and requires the directory to load, byte for
// byte, as the last complete checkpoint before the pointer's switch and
// as the new one after it; the next save then succeeds and sweeps what
// the killed one left. Runs of 1, 2 and 3 steps give three distinct
// states.
func TestCheckpointSaveKilledAnywhere(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", append(world(4), shrink, layers(1))...)
	base := t.TempDir()
	mustRun(t, p, Options{Steps: 1, Checkpoint: base})
	old := mustRun(t, p, Options{Steps: 2, Checkpoint: base}).Final
	first := filepath.Join(t.TempDir(), "ckpt")
	copyTree(t, base, first)
	points, _, whole := saveKilledAt(t, Options{Steps: 3, Checkpoint: first}, 0)
	switched := slices.Index(points, "rename pointer")
	if switched < 0 || len(points) < 8 {
		t.Fatalf("the save passed the points %q", points)
	}
	for n := 1; n <= len(points)+1; n++ {
		dir := filepath.Join(t.TempDir(), "ckpt")
		copyTree(t, base, dir)
		got, stopped, _ := saveKilledAt(t, Options{Steps: 3, Checkpoint: dir}, n)
		if stopped != (n <= len(points)) {
			t.Fatalf("save %d: stopped %v after %q", n, stopped, got)
		}
		want, which := whole.Final, "the new"
		if n-1 <= switched {
			want, which = old, "the old"
		}
		res, err := LoadCheckpoint(dir, p, 1)
		if err != nil {
			t.Fatalf("killed at %q: the directory does not load: %v\n%s", points[min(n, len(points))-1], err, listTree(dir))
		}
		if err := res.Check(want); err != nil {
			t.Fatalf("killed at %q: the directory does not load as %s checkpoint: %v", points[min(n, len(points))-1], which, err)
		}
		// The next save completes and leaves the new checkpoint and the one
		// it replaced, nothing else.
		rep := mustRun(t, p, Options{Steps: 3, Checkpoint: dir})
		res, err = LoadCheckpoint(dir, p, 1)
		if err != nil || res.Check(rep.Final) != nil {
			t.Fatalf("killed at point %d: the next save does not load: %v", n, err)
		}
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) != 3 || !slices.Contains(names, LatestName) || !slices.Contains(names, filepath.Base(rep.Saved)) {
			t.Errorf("killed at point %d: after the next save the directory holds %q", n, names)
		}
	}
}

// Saves at the same step never overwrite each other: each gets a
// directory of its own and the pointer moves.
func TestCheckpointSameStepTwice(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", append(world(4), shrink, layers(1))...)
	dir := t.TempDir()
	var saved []string
	for range 3 {
		saved = append(saved, filepath.Base(mustRun(t, p, Options{Steps: 1, Checkpoint: dir}).Saved))
	}
	if !slices.Equal(saved, []string{"step-1", "step-1.1", "step-1.2"}) {
		t.Errorf("three saves at step 1 went to %q", saved)
	}
	b, _ := os.ReadFile(filepath.Join(dir, LatestName))
	if string(b) != "step-1.2\n" {
		t.Errorf("the pointer holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "step-1")); !os.IsNotExist(err) {
		t.Errorf("the checkpoint two saves back was kept (%v)", err)
	}
}

// A load reads only inside the checkpoint's directory: a data file, the
// metadata or the step directory that is a symlink leading out is refused
// naming the file, and so is a pointer naming anything but a step
// directory.
func TestCheckpointLoadStaysInside(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", append(world(4), shrink, layers(1))...)
	src := t.TempDir()
	saved := mustRun(t, p, Options{Steps: 1, Checkpoint: src}).Saved
	step := filepath.Base(saved)
	tests := []struct {
		name   string
		break_ func(dir, outside string)
		want   string
	}{
		{"data file links out", func(dir, outside string) {
			f := filepath.Join(dir, step, "__1_0.distcp")
			os.Rename(f, filepath.Join(outside, "x"))
			os.Symlink(filepath.Join(outside, "x"), f)
		}, "__1_0.distcp"},
		{"data file links out relatively", func(dir, outside string) {
			f := filepath.Join(dir, step, "__1_0.distcp")
			os.Rename(f, filepath.Join(outside, "x"))
			rel, _ := filepath.Rel(filepath.Join(dir, step), filepath.Join(outside, "x"))
			os.Symlink(rel, f)
		}, "leading out of the checkpoint's directory"},
		{"metadata links out", func(dir, outside string) {
			f := filepath.Join(dir, step, MetadataName)
			os.Rename(f, filepath.Join(outside, "m"))
			os.Symlink(filepath.Join(outside, "m"), f)
		}, MetadataName},
		{"step directory links out", func(dir, outside string) {
			os.Rename(filepath.Join(dir, step), filepath.Join(outside, "s"))
			os.Symlink(filepath.Join(outside, "s"), filepath.Join(dir, step))
		}, "latest names " + step},
		{"pointer names a parent", func(dir, _ string) {
			os.WriteFile(filepath.Join(dir, LatestName), []byte("../"+step+"\n"), 0o644)
		}, `names "../step-1\n", not a checkpoint directory`},
		{"pointer is a symlink out", func(dir, outside string) {
			os.WriteFile(filepath.Join(outside, "l"), []byte(step+"\n"), 0o644)
			os.Remove(filepath.Join(dir, LatestName))
			os.Symlink(filepath.Join(outside, "l"), filepath.Join(dir, LatestName))
		}, LatestName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := filepath.Join(t.TempDir(), "ckpt"), t.TempDir()
			copyTree(t, src, dir)
			tc.break_(dir, outside)
			res, err := LoadCheckpoint(dir, p, 1)
			if err == nil || res != nil {
				t.Fatalf("loaded through a symlink leading out (%v)", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error lacks %q:\n%v", tc.want, err)
			}
		})
	}
}

// Forged metadata is refused with an error before any of its numbers
// sizes an allocation or indexes a file: no panic, no out-of-memory.
func TestCheckpointMetadataBounds(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", append(world(4), shrink, layers(1))...)
	saved := mustRun(t, p, Options{Steps: 1, Checkpoint: t.TempDir()}).Saved
	raw, err := os.ReadFile(filepath.Join(saved, MetadataName))
	if err != nil {
		t.Fatal(err)
	}
	chunk := func(m map[string]any) map[string]any {
		return m["entries"].([]any)[0].(map[string]any)["chunks"].([]any)[0].(map[string]any)
	}
	entry := func(m map[string]any) map[string]any { return m["entries"].([]any)[0].(map[string]any) }
	tests := []struct {
		name  string
		forge func(m map[string]any)
		want  string
	}{
		{"offset past int64", func(m map[string]any) { chunk(m)["offset"] = math.MaxInt64 }, "of __0_0.distcp, which the metadata lists with"},
		{"negative offset", func(m map[string]any) { chunk(m)["offset"] = -8 }, "at byte -8"},
		{"mesh of 2^30", func(m map[string]any) { m["mesh"] = []any{1, 1 << 30, 1} }, "bad mesh"},
		{"mesh product past 2^24", func(m map[string]any) { m["mesh"] = []any{1 << 13, 1 << 13, 1} }, "bad mesh"},
		{"more ranks than files", func(m map[string]any) { m["mesh"] = []any{1, 8, 8} }, "4 files listed for a mesh of 8 ranks"},
		{"huge shape", func(m map[string]any) { entry(m)["shape"] = []any{int64(1) << 40, int64(1) << 40} }, "more than 2^62 bytes"},
		{"negative shape", func(m map[string]any) { entry(m)["shape"] = []any{-4, 24} }, "negative dimension"},
		{"too many dimensions", func(m map[string]any) { entry(m)["shape"] = make([]any, 40) }, "40 dimensions"},
		{"negative file size", func(m map[string]any) { m["files"].([]any)[0].(map[string]any)["bytes"] = -1 }, "of -1 bytes"},
		{"chunk index past the shard", func(m map[string]any) { chunk(m)["index"] = 1 << 40 }, "out of range"},
		{"file listed twice", func(m map[string]any) {
			fs := m["files"].([]any)
			fs[1] = fs[0]
		}, "listed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			tc.forge(m)
			dir := t.TempDir()
			copyTree(t, saved, dir)
			b, _ := json.Marshal(m)
			os.WriteFile(filepath.Join(dir, MetadataName), b, 0o644)
			res, err := LoadCheckpoint(dir, p, 1)
			if err == nil || res != nil {
				t.Fatalf("loaded forged metadata (%v)", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), MetadataName) {
				t.Errorf("error lacks %q or the file's name:\n%v", tc.want, err)
			}
		})
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

func listTree(dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil {
			fmt.Fprintf(&b, "  %s %d\n", path, info.Size())
		}
		return nil
	})
	return b.String()
}
