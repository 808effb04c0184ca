package torchgen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/checkpoint"
)

// TestCheckpointConformance saves real FSDP2 state with
// torch.distributed.checkpoint and compares DCP's metadata with the
// layout fsdpc derives from the plan: entries, sizes, dtypes, chunks and
// the rank that writes each (its deduplication of HSDP replicas and step
// counts included). Like TestConformance it needs
// FSDPC_TORCH_CONFORMANCE=1.
func TestCheckpointConformance(t *testing.T) {
	py := needTorch(t)
	for _, c := range []struct {
		name, optimizer string
		confCase
	}{
		{"adamw-ws4-empty-ranks", "adamw", confCase{cluster: "world_size = 4"}},
		{"adamw-ws3-uneven", "adamw", confCase{cluster: "world_size = 3"}},
		{"adamw-hsdp-2x2", "adamw", confCase{cluster: "world_size = 4\nmesh = { replicate = 2, shard = 2 }"}},
		{"sgd-momentum-frozen-embedding", "sgd_momentum", confCase{cluster: "world_size = 2", emb: "requires_grad = false", train: `optimizer = "sgd_momentum"`}},
		{"adamw-tied-merge", "adamw", confCase{cluster: "world_size = 2", policy: `tied = "merge"` + "\n" + `units = ["layers.*", "output"]`, head: `tied_to = "emb.weight"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := fmt.Sprintf(decoderModel, c.train, c.cluster, c.policy, c.emb, c.head)
			if strings.Contains(c.policy, "units = [") {
				src = strings.Replace(src, "units = \"blocks\"\n", "", 1)
			}
			s, p := planSpec(t, c.name+".toml", src)
			s.Checkpoint = c.optimizer
			recs, err := Launch(py, s, 3*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			l, err := checkpoint.FromPlan(p)
			if err != nil {
				t.Fatal(err)
			}
			if bad := CompareCheckpoint(l, recs[0].Checkpoint); len(bad) > 0 {
				t.Errorf("DCP (torch %s) differs from fsdpc's checkpoint layout:\n%s", recs[0].Torch, strings.Join(bad, "\n"))
			}
		})
	}
}

// dcpOf is the metadata DCP would write for l: every entry in fsdpc's
// dtype named as torch names it, every non-empty chunk in its writer's
// file.
func dcpOf(t *testing.T, l *checkpoint.Layout) *DCPMetadata {
	t.Helper()
	type chunk struct {
		Offsets []int64 `json:"offsets"`
		Sizes   []int64 `json:"sizes"`
	}
	type entry struct {
		FQN    string  `json:"fqn"`
		Size   []int64 `json:"size"`
		DType  string  `json:"dtype"`
		Chunks []chunk `json:"chunks"`
	}
	type file struct {
		FQN     string  `json:"fqn"`
		Offsets []int64 `json:"offsets"`
		File    string  `json:"file"`
	}
	var doc struct {
		Entries []entry `json:"entries"`
		Files   []file  `json:"files"`
	}
	for ti := range l.Tensors {
		tn := &l.Tensors[ti]
		e := entry{FQN: tn.FQN, Size: tn.Shape, DType: torchDType(tn.DType)}
		for k, w := range l.Writer[ti] {
			if c := tn.Chunk(k); c.Numel() > 0 && w >= 0 {
				e.Chunks = append(e.Chunks, chunk{c.Offsets, c.Lengths})
				doc.Files = append(doc.Files, file{tn.FQN, c.Offsets, checkpoint.FileName(w)})
			}
		}
		doc.Entries = append(doc.Entries, e)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var md DCPMetadata
	if err := json.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	return &md
}

// TestCompareCheckpoint runs without torch: metadata made from the layout
// matches it, and each kind of difference is one line naming the entry.
func TestCompareCheckpoint(t *testing.T) {
	_, p := planSpec(t, "m.toml", fmt.Sprintf(decoderModel, "", "world_size = 3", "", "", ""))
	l, err := checkpoint.FromPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	if bad := CompareCheckpoint(l, dcpOf(t, l)); len(bad) > 0 {
		t.Fatalf("metadata made from the layout differs from it:\n%s", strings.Join(bad, "\n"))
	}
	fqn := l.Tensors[0].FQN // the first entry and, chunked, the first file
	for _, c := range []struct {
		name  string
		edit  func(md *DCPMetadata)
		wants string
	}{
		{"dtype", func(md *DCPMetadata) { md.Entries[0].DType = "float16" }, fqn + ": dtype float16 in DCP, fp32 in fsdpc"},
		{"unknown dtype", func(md *DCPMetadata) { md.Entries[0].DType = "complex64" }, fqn + ": dtype complex64 in DCP"},
		{"size", func(md *DCPMetadata) { md.Entries[0].Size = []int64{1} }, fqn + ": size [1] in DCP"},
		{"writer", func(md *DCPMetadata) { md.Files[0].File = checkpoint.FileName(2) }, fqn + ": DCP's chunks (offsets+sizes@writer)"},
		{"file name", func(md *DCPMetadata) { md.Files[0].File = "data.bin" }, "not a rank's __<rank>_0.distcp"},
		{"missing entry", func(md *DCPMetadata) { md.Entries = md.Entries[1:] }, fqn + ": in fsdpc's layout, not in DCP's checkpoint"},
		{"extra entry", func(md *DCPMetadata) { md.Entries[0].FQN = "model.extra" }, "model.extra: in DCP's checkpoint, not in fsdpc's layout"},
	} {
		md := dcpOf(t, l)
		c.edit(md)
		bad := CompareCheckpoint(l, md)
		if !strings.Contains(strings.Join(bad, "\n"), c.wants) {
			t.Errorf("%s: %q, want a line with %q", c.name, bad, c.wants)
		}
	}
	if bad := CompareCheckpoint(l, nil); len(bad) != 1 {
		t.Errorf("no metadata: %q", bad)
	}
}
