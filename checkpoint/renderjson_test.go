package checkpoint

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// TestRankJSONMatchesEncodingJSON: reshard -format json's rank entries,
// written by hand, are the bytes encoding/json and json.Indent write for
// a jsonRank built from Reads, for every rank of uneven, empty-shard and
// HSDP reshards, with and without reads and runs, and FQNs that JSON
// escapes (HTML characters, U+2028, invalid UTF-8).
func TestRankJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range []struct{ old, new string }{{"4", "8"}, {"8", "12"}, {"12", "3"}, {"2x6", "4x3"}, {"1", "1"}} {
		old, new := meshLayout(t, c.old), meshLayout(t, c.new)
		for i, name := range []string{"model.<a>&b", "optim.state.x\u2028y.exp_avg", "model.\xff\"\\"} {
			old.Tensors[i].FQN, new.Tensors[i].FQN = name, name
		}
		rs, err := Plan(old, new)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := newRankJSON(rs)
		if err != nil {
			t.Fatal(err)
		}
		sums := rs.summaries(rs.Transfer(Presets["nvme"]))
		for r, s := range sums {
			for _, reads := range []bool{false, true} {
				for _, through := range []int{0, r + 3} {
					want := jsonRank{rankSummary: s, Through: through}
					if reads {
						for _, rd := range rs.Reads(r) {
							want.Reads = append(want.Reads, JSONRead{new.Tensors[rd.Tensor].FQN, rd.OldRank, FileName(rd.OldRank), rd.Offsets, rd.Lengths, rd.Bytes})
						}
					}
					compact, err := json.Marshal(want)
					if err != nil {
						t.Fatal(err)
					}
					var wantText bytes.Buffer
					if err := json.Indent(&wantText, compact, "    ", "  "); err != nil {
						t.Fatal(err)
					}
					got, err := enc.appendRank(nil, s, through, reads)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, wantText.Bytes()) {
						t.Fatalf("%s -> %s rank %d (reads %v, through %d):\n%s\nwant\n%s", c.old, c.new, r, reads, through, got, wantText.Bytes())
					}
				}
			}
		}
	}
	// A time encoding/json refuses is refused.
	rs, err := Plan(meshLayout(t, "4"), meshLayout(t, "4"))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := newRankJSON(rs)
	if _, err := enc.appendRank(nil, rankSummary{LoadSeconds: math.Inf(1)}, 0, false); err == nil {
		t.Error("+Inf seconds: no error")
	}
}
