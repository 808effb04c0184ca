package torchgen

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/ir"
)

// DCPMetadata is what torch.distributed.checkpoint's .metadata says about
// a save: every tensor entry with its size, dtype and chunks, and the file
// each chunk's bytes went to.
type DCPMetadata struct {
	Entries []struct {
		FQN    string  `json:"fqn"`
		Size   []int64 `json:"size"`
		DType  string  `json:"dtype"`
		Chunks []struct {
			Offsets []int64 `json:"offsets"`
			Sizes   []int64 `json:"sizes"`
		} `json:"chunks"`
	} `json:"entries"`
	Files []struct {
		FQN     string  `json:"fqn"`
		Offsets []int64 `json:"offsets"`
		File    string  `json:"file"`
		Bytes   int64   `json:"bytes"`
	} `json:"files"`
}

// CheckpointOptimizers are the optimizers the harness can build for a
// checkpoint check (its OPTIMIZERS).
var CheckpointOptimizers = map[string]bool{"adamw": true, "adam": true, "sgd_momentum": true, "sgd": true}

var distcp = regexp.MustCompile(`^__(\d+)_\d+\.distcp$`)

// CompareCheckpoint checks the checkpoint layout fsdpc derives from the
// plan against what DCP wrote: the same tensor entries, each with the
// same global size and dtype, the same non-empty chunks (offsets and
// sizes), each written by the rank fsdpc says (DCP's file __<rank>_0).
// With HSDP the writer need only be one of the replicas holding the chunk:
// DCP's deduplication also counts the optimizer's param_groups (non-tensor
// entries, one byte each), which fsdpc does not model, and those can tip
// which replica writes (docs/checkpoint.md). It returns one line per
// difference.
func CompareCheckpoint(l *checkpoint.Layout, md *DCPMetadata) []string {
	if md == nil {
		return []string{"rank 0 recorded no checkpoint metadata"}
	}
	var bad []string
	writer := map[string]int{} // fqn + offsets → rank
	for _, f := range md.Files {
		m := distcp.FindStringSubmatch(f.File)
		if m == nil {
			bad = append(bad, fmt.Sprintf("%s: DCP wrote it to %s, not a rank's __<rank>_0.distcp", f.FQN, f.File))
			continue
		}
		r, _ := strconv.Atoi(m[1])
		writer[chunkKey(f.FQN, f.Offsets)] = r
	}
	ours := map[string]int{}
	for ti := range l.Tensors {
		ours[l.Tensors[ti].FQN] = ti
	}
	seen := map[string]bool{}
	for _, e := range md.Entries {
		ti, ok := ours[e.FQN]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: in DCP's checkpoint, not in fsdpc's layout", e.FQN))
			continue
		}
		seen[e.FQN] = true
		t := &l.Tensors[ti]
		if !slices.Equal(e.Size, t.Shape) {
			bad = append(bad, fmt.Sprintf("%s: size %v in DCP, %v in fsdpc", e.FQN, e.Size, t.Shape))
			continue
		}
		// DCP names dtypes as torch does (float32, bfloat16), which
		// ir.ParseDType reads.
		if dt, ok := ir.ParseDType(e.DType); !ok || dt != t.DType {
			bad = append(bad, fmt.Sprintf("%s: dtype %s in DCP, %s in fsdpc", e.FQN, e.DType, t.DType))
		}
		// DCP's non-empty chunks, in its order, against fsdpc's; a writer
		// as its shard index when replicas may write it.
		who := func(r int) int {
			if l.Replicate > 1 && t.ShardDim >= 0 {
				return r % l.Shard
			}
			return r
		}
		var got []string
		for _, c := range e.Chunks {
			if numel(c.Sizes) > 0 {
				got = append(got, fmt.Sprintf("%v+%v@%d", c.Offsets, c.Sizes, who(writer[chunkKey(e.FQN, c.Offsets)])))
			}
		}
		var want []string
		for k, w := range l.Writer[ti] {
			if c := t.Chunk(k); c.Numel() > 0 && w >= 0 {
				want = append(want, fmt.Sprintf("%v+%v@%d", c.Offsets, c.Lengths, who(w)))
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			bad = append(bad, fmt.Sprintf("%s: DCP's chunks (offsets+sizes@writer) %v, fsdpc's %v", e.FQN, got, want))
		}
	}
	for ti := range l.Tensors {
		if !seen[l.Tensors[ti].FQN] {
			bad = append(bad, fmt.Sprintf("%s: in fsdpc's layout, not in DCP's checkpoint", l.Tensors[ti].FQN))
		}
	}
	return bad
}

func chunkKey(fqn string, offsets []int64) string { return fmt.Sprint(fqn, offsets) }

func numel(sizes []int64) int64 {
	n := int64(1)
	for _, s := range sizes {
		n *= s
	}
	return n
}
