package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// fuzzCkpt is one saved checkpoint FuzzCheckpointMetadata forges the
// metadata of: its step directory, plan and the reference's final state.
var fuzzCkpt struct {
	once  sync.Once
	saved string
	plan  *schedule.Plan
	final *Final
	meta  []byte
	files []string
}

// FuzzCheckpointMetadata loads a real checkpoint (gpt2-124m shrunk, one
// block, 4 ranks, one step) whose metadata.json is replaced by the fuzzed
// bytes. The load never panics or allocates what the metadata claims
// without bounds; an error names the checkpoint's directory (its metadata
// or a data file); the load writes nothing into the directory; and a load
// that succeeds reads every entry's chunks from the same file and byte
// offsets as the honest metadata and at the same step restores exactly
// the reference's state — whatever else the metadata says, it cannot make
// the same bytes load as another state. Seeds: the honest metadata and
// forgeries of each bound TestCheckpointMetadataBounds names.
//
//	go test -run '^$' -fuzz FuzzCheckpointMetadata -fuzztime 2m ./executor
func FuzzCheckpointMetadata(f *testing.F) {
	c := &fuzzCkpt
	c.once.Do(func() {
		c.plan = zooPlan(f, "gpt2-124m", append(world(4), shrink, layers(1))...)
		dir := f.TempDir()
		rep, err := Run(c.plan, NewHost(), Options{Steps: 1, Checkpoint: dir})
		if err != nil {
			f.Fatal(err)
		}
		c.saved, c.final = rep.Saved, rep.Final
		if c.meta, err = os.ReadFile(filepath.Join(c.saved, MetadataName)); err != nil {
			f.Fatal(err)
		}
		entries, _ := os.ReadDir(c.saved)
		for _, e := range entries {
			if e.Name() != MetadataName {
				c.files = append(c.files, e.Name())
			}
		}
	})
	var compact bytes.Buffer
	if err := json.Compact(&compact, c.meta); err != nil {
		f.Fatal(err)
	}
	honest := compact.String()
	f.Add(honest)
	for _, r := range [][2]string{
		{`"offset":0,`, `"offset":9223372036854775807,`},
		{`"offset":0,`, `"offset":-8,`},
		{`"mesh":[1,4,4]`, `"mesh":[1,1073741824,1]`},
		{`"mesh":[1,4,4]`, `"mesh":[8192,8192,1]`},
		{`"mesh":[1,4,4]`, `"mesh":[1,8,8]`},
		{`"mesh":[1,4,4]`, `"mesh":[1,2,8]`},
		{`"index":0,`, `"index":1099511627776,`},
		{`"__0_0.distcp"`, `".."`},
		{`"__0_0.distcp"`, `"."`},
		{`"__0_0.distcp"`, `"metadata.json"`},
		{`"__0_0.distcp"`, `"__1_0.distcp"`},
		{`"step":1`, `"step":2`},
		{`"dtype":"fp32"`, `"dtype":"fp64"`},
		{`"shard_dim":0`, `"shard_dim":-2`},
		{`"format":"fsdpc.checkpoint/1"`, `"format":"x\n\u001b[2J"`},
	} {
		if !strings.Contains(honest, r[0]) {
			f.Fatalf("the honest metadata lacks %s:\n%.400s", r[0], honest)
		}
		f.Add(strings.Replace(honest, r[0], r[1], 1))
		if strings.Contains(r[0], ".distcp") { // the file and every chunk in it
			f.Add(strings.ReplaceAll(honest, r[0], r[1]))
		}
	}
	f.Add(`{"format":"fsdpc.checkpoint/1","mesh":[1,1,1],"files":[{"name":"__0_0.distcp","bytes":0}],"entries":[{"fqn":"x","shape":[4611686018427387904,2],"dtype":"fp32"}]}`)
	f.Add("")
	f.Fuzz(func(t *testing.T, meta string) {
		dir := t.TempDir()
		for _, name := range c.files {
			if err := os.Link(filepath.Join(c.saved, name), filepath.Join(dir, name)); err != nil {
				b, err := os.ReadFile(filepath.Join(c.saved, name))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, name), b, 0o644)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, MetadataName), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
		before := listTree(dir)
		res, err := LoadCheckpoint(dir, c.plan, 1)
		if after := listTree(dir); after != before {
			t.Fatalf("the load changed the directory:\n%s\nto\n%s", before, after)
		}
		if err != nil {
			if res != nil {
				t.Fatalf("an error (%v) with a result", err)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q does not name the checkpoint's directory %s", err, dir)
			}
			return
		}
		if reads, ok := sameReads(c.meta, []byte(meta)); ok {
			if err := res.Check(c.final); err != nil {
				t.Fatalf("loaded from the honest reads (%s) as another state: %v", reads, err)
			}
		}
	})
}

// sameReads reports whether the forged metadata reads every entry's
// chunks at the honest metadata's files and offsets, at its step: then a
// successful load has the honest bytes to restore.
func sameReads(honest, forged []byte) (string, bool) {
	var h, g ckptMeta
	if json.Unmarshal(honest, &h) != nil || json.Unmarshal(forged, &g) != nil || h.Step != g.Step {
		return "", false
	}
	at := func(m *ckptMeta) []string {
		var out []string
		for _, e := range m.Entries {
			for _, c := range e.Chunks {
				out = append(out, fmt.Sprintf("%s/%d %s@%d+%d", e.FQN, c.Index, c.File, c.Offset, c.Bytes))
			}
		}
		slices.Sort(out)
		return out
	}
	hs, gs := at(&h), at(&g)
	return fmt.Sprintf("%d chunks", len(hs)), slices.Equal(hs, gs)
}
