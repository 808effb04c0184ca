package checkpoint

import (
	"encoding/binary"
	"hash/fnv"
	"testing"
)

// TestClassesMatchReads: the figures summed once per class of ranks
// (readclass.go) are those summed from each rank's own reads, as the
// reshard's writers computed them before: bytes, files, remote bytes,
// sources and the print that merges runs of ranks, over uneven chunks,
// empty shards, HSDP meshes and nodes of different sizes.
func TestClassesMatchReads(t *testing.T) {
	for _, c := range []struct {
		old, new       string
		oldG, newG     int
		wantAllClasses bool
	}{
		{"4", "8", 4, 4, true}, {"8", "4", 4, 4, true}, {"8", "12", 4, 4, false}, {"12", "3", 4, 4, true},
		{"12", "12", 2, 4, false}, {"2x4", "3x4", 4, 4, true}, {"2x6", "4x3", 4, 2, true}, {"1", "12", 4, 8, false},
		{"2x12", "2x12", 4, 4, false},
	} {
		old, new := meshLayout(t, c.old), meshLayout(t, c.new)
		old.GPUsPerNode, new.GPUsPerNode = c.oldG, c.newG
		rs, err := Plan(old, new)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(rs.classes) == new.Shard; got != c.wantAllClasses {
			t.Errorf("%s -> %s: %d classes over %d shard ranks", c.old, c.new, len(rs.classes), new.Shard)
		}
		tr := rs.Transfer(Presets["nvme"])
		sums := rs.summaries(tr)
		for r := range new.World() {
			var want RankCost
			want.Rank = r
			h := fnv.New64a()
			var b [8]byte
			put := func(v int64) {
				binary.LittleEndian.PutUint64(b[:], uint64(v))
				h.Write(b[:])
			}
			from := map[int]bool{}
			reads := rs.Reads(r)
			for _, rd := range reads {
				tn := &new.Tensors[rd.Tensor]
				if tn.State == "" {
					want.ModelBytes += rd.Bytes
				} else {
					want.OptimBytes += rd.Bytes
				}
				if !tn.Offload {
					want.HostCopyBytes += rd.Bytes
				}
				if rd.OldRank/old.GPUsPerNode != r/new.GPUsPerNode {
					want.RemoteBytes += rd.Bytes
				}
				from[rd.OldRank] = true
				k := r % new.Shard
				if tn.ShardDim < 0 {
					k = 0
				}
				put(int64(rd.Tensor))
				put(int64(k))
				put(int64(rd.OldK))
				put(int64(rd.OldRank))
				put(rd.Bytes / tn.DType.Size())
			}
			want.Files = len(from)
			got := tr.Ranks[r]
			got.Time = 0
			if got != want {
				t.Errorf("%s -> %s rank %d: %+v, want %+v", c.old, c.new, r, got, want)
			}
			if s := sums[r]; s.Reads != len(reads) || s.FromRanks != ranges(from) {
				t.Errorf("%s -> %s rank %d: %d reads from %s, want %d from %s", c.old, c.new, r, s.Reads, s.FromRanks, len(reads), ranges(from))
			}
			if got := rs.readsPrint(r); got != h.Sum64() {
				t.Errorf("%s -> %s rank %d: print %x, want %x", c.old, c.new, r, got, h.Sum64())
			}
			total, remote := rs.RankBytes(r)
			if total != want.ModelBytes+want.OptimBytes || remote != want.RemoteBytes {
				t.Errorf("%s -> %s rank %d: RankBytes %d, %d", c.old, c.new, r, total, remote)
			}
		}
		// The copy between nodes, from the reads.
		nodes := max((old.World()+c.oldG-1)/c.oldG, (new.World()+c.newG-1)/c.newG)
		in, out := make([]int64, nodes), make([]int64, nodes)
		var bytes int64
		for r := range new.World() {
			for _, rd := range rs.Reads(r) {
				if from, to := rd.OldRank/c.oldG, r/c.newG; from != to {
					in[to] += rd.Bytes
					out[from] += rd.Bytes
					bytes += rd.Bytes
				}
			}
		}
		var maxIn, maxOut int64
		for n := range nodes {
			maxIn, maxOut = max(maxIn, in[n]), max(maxOut, out[n])
		}
		if cp := rs.CrossNodeCopy(Presets["nvme"]); cp.Bytes != bytes || cp.MaxIn != maxIn || cp.MaxOut != maxOut {
			t.Errorf("%s -> %s: copy %+v, want %d bytes, in %d, out %d", c.old, c.new, cp, bytes, maxIn, maxOut)
		}
	}
}
