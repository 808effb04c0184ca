package checkpoint

import (
	"math"
	"strings"
	"testing"
)

// TestCrossNodeCopy: the copy a node-local load needs is what each new
// node reads from files other nodes wrote, counted here from the reads
// themselves; its time is the busiest node's at the drives' rates; shared
// storage needs none. reshard once printed the load time alone, which
// leaves the copy out.
func TestCrossNodeCopy(t *testing.T) {
	nvme, shared := Presets["nvme"], Presets["shared"]
	for _, c := range []struct{ old, new int }{{4, 8}, {8, 4}, {8, 12}, {4, 4}} {
		old, new := tinyLayout(t, c.old, ""), tinyLayout(t, c.new, "")
		rs, err := Plan(old, new)
		if err != nil {
			t.Fatal(err)
		}
		nodes := max(c.old, c.new) / 4
		in, out := make([]int64, nodes+1), make([]int64, nodes+1)
		var total int64
		for r := range new.World() {
			for _, rd := range rs.Reads(r) {
				if from, to := rd.OldRank/old.GPUsPerNode, r/new.GPUsPerNode; from != to {
					in[to] += rd.Bytes
					out[from] += rd.Bytes
					total += rd.Bytes
				}
			}
		}
		var wantTime float64
		var maxIn, maxOut int64
		for n := range in {
			maxIn, maxOut = max(maxIn, in[n]), max(maxOut, out[n])
			wantTime = max(wantTime, float64(in[n])/nvme.WritePerNode, float64(out[n])/nvme.ReadPerNode)
		}
		got := rs.CrossNodeCopy(nvme)
		if got.Bytes != total || got.MaxIn != maxIn || got.MaxOut != maxOut || math.Abs(got.Time-wantTime) > 1e-12*wantTime {
			t.Errorf("%d -> %d ranks: copy %+v, want %d bytes, in %d, out %d, %g s", c.old, c.new, got, total, maxIn, maxOut, wantTime)
		}
		if c.old != c.new && total == 0 {
			t.Errorf("%d -> %d ranks: no reads across nodes", c.old, c.new)
		}
		if s := rs.CrossNodeCopy(shared); s.Bytes != total || s.Time != 0 {
			t.Errorf("%d -> %d ranks on shared storage: %+v, want no copy time", c.old, c.new, s)
		}
		var text strings.Builder
		rs.WriteText(&text, nvme, false)
		if has := strings.Contains(text.String(), "\n  copy      "); has != (total > 0) {
			t.Errorf("%d -> %d ranks: the copy line is there: %v, want %v\n%s", c.old, c.new, has, total > 0, text.String())
		}
	}
}
