package executor

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/schedule"
)

// shrink replaces the zoo models' sizes with small ones, the same for
// every world size (unlike Scale, whose shard dimension follows the ranks),
// so that plans for different meshes hold the same state. The vocabularies
// (101, 131 rows) and GPT-2's 20 positions are uneven over 8 and 12 ranks,
// and leave ranks without rows.
func shrink(src string) string {
	for _, r := range [][2]string{
		{"50257", "101"}, {"768", "24"}, {"3072", "96"}, {"1024", "20"}, {"heads = 12", "heads = 2"}, // gpt2-124m
		{"128256", "131"}, {"4096", "32"}, {"14336", "48"}, {"heads = 32", "heads = 4"}, {"kv_heads = 8", "kv_heads = 2"}, // llama3-8b
	} {
		src = regexp.MustCompile(`\b`+regexp.QuoteMeta(r[0])+`\b`).ReplaceAllString(src, r[1])
	}
	return src
}

// TestCheckpointReshard trains a step under one plan, saves every rank's
// chunks, loads them under another plan with the reshard reads, and
// requires every rank's parameters and optimizer states to equal the
// reference's unsharded state byte for byte.
func TestCheckpointReshard(t *testing.T) {
	blocks := func(w []edit) []edit { return append(w, shrink, layers(2)) }
	tests := []struct {
		name     string
		model    string
		old, new []edit
		uneven   bool // the new plan pads, and some rank holds no rows
	}{
		{"8 to 4", "gpt2-124m", blocks(world(8)), blocks(world(4)), false},
		{"8 to 12, uneven rows with padding and empty ranks", "gpt2-124m", blocks(world(8)), blocks(world(12)), true},
		{"4 to 8", "gpt2-124m", blocks(world(4)), blocks(world(8)), false},
		{"FSDP 8 to HSDP 2x4", "llama3-8b", blocks(world(8)), blocks(hsdp(2, 4)), false},
		{"HSDP 2x4 to FSDP 3", "llama3-8b", blocks(hsdp(2, 4)), blocks(world(3)), false},
		{"HSDP 3x4 to HSDP 2x6", "gpt2-124m", blocks(hsdp(3, 4)), blocks(hsdp(2, 6)), false},
		// Each block's children as units, without checkpointing: FSDP units
		// inside a checkpointed block are refused (planner, groupUnits).
		{"changed units", "llama3-8b", blocks(world(4)), append(blocks(world(4)), policy("units", `"block-children"`), train("checkpointing", `"none"`)), false},
		{"offload to no offload", "gpt2-124m", append(blocks(world(4)), policy("offload", "true"), train("grad_accum", "1")), blocks(world(8)), false},
		{"1 to 12", "gpt2-124m", blocks(world(1)), blocks(world(12)), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			old := zooPlan(t, tc.model, tc.old...)
			rep := mustRun(t, old, Options{Steps: 2, Checkpoint: dir})
			if rep.Final == nil {
				t.Fatal("the run kept no final state")
			}
			new := zooPlan(t, tc.model, tc.new...)
			if tc.uneven && !hasEmptyChunk(t, new) {
				t.Fatal("the new plan should have ranks without rows of some parameter")
			}
			res, err := LoadCheckpoint(dir, new, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Check(rep.Final); err != nil {
				t.Fatal(err)
			}
			// The load read what fsdpc reshard predicts.
			ol, _ := checkpoint.FromPlan(old)
			nl, _ := checkpoint.FromPlan(new)
			rs, err := checkpoint.Plan(ol, nl)
			if err != nil {
				t.Fatal(err)
			}
			var reads int
			var bytes int64
			for r := range nl.World() {
				reads += len(rs.Reads(r))
				total, _ := rs.RankBytes(r)
				bytes += total
			}
			if res.Reads != reads || res.Bytes != bytes {
				t.Errorf("the load read %d times, %d bytes; fsdpc reshard predicts %d, %d", res.Reads, res.Bytes, reads, bytes)
			}
		})
	}
}

// The check fails when one byte of the restored state differs: it
// compares, and names the entry.
func TestCheckpointCheckFails(t *testing.T) {
	dir := t.TempDir()
	p := zooPlan(t, "gpt2-124m", append(world(4), shrink, layers(1))...)
	rep := mustRun(t, p, Options{Steps: 1, Checkpoint: dir})
	res, err := LoadCheckpoint(dir, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	res.States[0][1][0] ^= 1
	if err := res.Check(rep.Final); err == nil || !strings.Contains(err.Error(), "on rank 1") {
		t.Errorf("a flipped state bit: %v", err)
	}
}

// Bad checkpoint directories are refused naming the file and the entry,
// and return nothing.
func TestCheckpointBadDirs(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", append(world(4), shrink, layers(1))...)
	src := mustRun(t, p, Options{Steps: 1, Checkpoint: t.TempDir()}).Saved
	other := zooPlan(t, "llama3-8b", append(world(4), shrink, layers(1))...)
	tests := []struct {
		name   string
		break_ func(dir string)
		plan   *schedule.Plan
		want   []string
	}{
		{"missing file", func(dir string) { os.Remove(filepath.Join(dir, "__2_0.distcp")) }, p,
			[]string{"__2_0.distcp: missing; it holds model.transformer.wte.weight"}},
		{"truncated", func(dir string) {
			f := filepath.Join(dir, "__1_0.distcp")
			b, _ := os.ReadFile(f)
			os.WriteFile(f, b[:len(b)/2], 0o644)
		}, p, []string{"__1_0.distcp: ", "the metadata says", "the first entry past its end is optim.state."}},
		{"corrupted", func(dir string) {
			f := filepath.Join(dir, "__0_0.distcp")
			b, _ := os.ReadFile(f)
			b[7] ^= 0xff
			os.WriteFile(f, b, 0o644)
		}, p, []string{"__0_0.distcp: its SHA-256 differs", "model.transformer.wte.weight"}},
		{"no metadata", func(dir string) { os.Remove(filepath.Join(dir, MetadataName)) }, p, []string{"no checkpoint: neither latest nor metadata.json"}},
		{"a FIFO for a file", func(dir string) {
			f := filepath.Join(dir, "__3_0.distcp")
			os.Remove(f)
			if err := syscall.Mkfifo(f, 0o644); err != nil {
				t.Skip(err)
			}
		}, p, []string{"__3_0.distcp", "named pipe"}},
		{"grown", func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, "__1_0.distcp"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte("extra"))
			f.Close()
		}, p, []string{"__1_0.distcp: more than the", "it holds model.transformer.wte.weight"}},
		{"another model", func(string) {}, other, []string{"cannot be loaded under llama3-8b", "model.tok_embeddings.weight: not in the old checkpoint"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			entries, _ := os.ReadDir(src)
			for _, e := range entries {
				b, _ := os.ReadFile(filepath.Join(src, e.Name()))
				os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
			}
			tc.break_(dir)
			res, err := LoadCheckpoint(dir, tc.plan, 1)
			if err == nil || res != nil {
				t.Fatalf("loaded a broken checkpoint (%v)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func hasEmptyChunk(t *testing.T, p *schedule.Plan) bool {
	l, err := checkpoint.FromPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range l.Tensors {
		for k := range x.Chunks(l.Shard) {
			if x.Chunk(k).Numel() == 0 {
				return true
			}
		}
	}
	return false
}
