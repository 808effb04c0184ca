package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Every new rank's reads cover its chunk of every tensor exactly once,
// from the rank that wrote the old chunk.
func TestReadsCoverChunks(t *testing.T) {
	for _, tc := range []struct{ old, new string }{
		{"8", "4"}, {"8", "12"}, {"4", "8"}, {"8", "2x4"}, {"2x4", "8"}, {"3x4", "2x6"}, {"1", "3"}, {"12", "1"},
	} {
		t.Run(tc.old+"->"+tc.new, func(t *testing.T) {
			old, new := meshLayout(t, tc.old), meshLayout(t, tc.new)
			rs, err := Plan(old, new)
			if err != nil {
				t.Fatal(err)
			}
			for r := range new.World() {
				covered := map[int]int64{}
				for _, rd := range rs.Reads(r) {
					x := &new.Tensors[rd.Tensor]
					ot := rs.OldTensor(rd.Tensor)
					if w := old.Writer[ot][rd.OldK]; w != rd.OldRank {
						t.Errorf("rank %d reads %s chunk %d from rank %d, written by %d", r, x.FQN, rd.OldK, rd.OldRank, w)
					}
					// The read lies inside both chunks.
					k := r % new.Shard
					if x.ShardDim < 0 {
						k = 0
					}
					for _, c := range []Chunk{x.Chunk(k), old.Tensors[ot].Chunk(rd.OldK)} {
						for d := range c.Offsets {
							if rd.Offsets[d] < c.Offsets[d] || rd.Offsets[d]+rd.Lengths[d] > c.Offsets[d]+c.Lengths[d] {
								t.Fatalf("rank %d: read %v+%v of %s outside chunk %v+%v", r, rd.Offsets, rd.Lengths, x.FQN, c.Offsets, c.Lengths)
							}
						}
					}
					covered[rd.Tensor] += rd.Bytes
				}
				for ti, x := range new.Tensors {
					k := r % new.Shard
					if x.ShardDim < 0 {
						k = 0
					}
					if want := x.Chunk(k).Numel() * x.DType.Size(); covered[ti] != want {
						t.Errorf("rank %d reads %d bytes of %s, its chunk has %d", r, covered[ti], x.FQN, want)
					}
				}
			}
		})
	}
}

// 8 → 4: new rank k's chunk of a 16-row tensor is old chunks 2k and 2k+1.
func TestReads8to4(t *testing.T) {
	old, new := meshLayout(t, "8"), meshLayout(t, "4")
	rs, err := Plan(old, new)
	if err != nil {
		t.Fatal(err)
	}
	up := tensorNamed(t, new, "model.layers.0.up.weight")
	for r := range 4 {
		var got []string
		for _, rd := range rs.Reads(r) {
			if rd.Tensor == up {
				got = append(got, fmt.Sprintf("%d:%v+%v", rd.OldRank, rd.Offsets, rd.Lengths))
			}
		}
		want := []string{fmt.Sprintf("%d:[%d 0]+[2 6]", 2*r, 4*r), fmt.Sprintf("%d:[%d 0]+[2 6]", 2*r+1, 4*r+2)}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("rank %d reads of up.weight: %v, want %v", r, got, want)
		}
	}
}

// A checkpoint the new plan does not hold the same state as is refused,
// naming every entry.
func TestIncompatible(t *testing.T) {
	base := meshLayout(t, "4")
	frozen, err := FromPlan(tinyPlan(t, 4, "", "adamw", "requires_grad = false"))
	if err != nil {
		t.Fatal(err)
	}
	sgd, err := FromPlan(tinyPlan(t, 4, "", "sgd_momentum", ""))
	if err != nil {
		t.Fatal(err)
	}
	renamed := meshLayout(t, "4")
	renamed.Tensors[0].FQN = "model.tok.weight"
	reshaped := meshLayout(t, "4")
	reshaped.Tensors[0].Shape = []int64{11, 6}
	retyped := meshLayout(t, "4")
	retyped.Tensors[0].DType = 3
	for _, tc := range []struct {
		name string
		new  *Layout
		want []string
	}{
		{"frozen norm", frozen, []string{"optim.state.norm.weight.exp_avg: saved, but not in the new plan"}},
		{"other optimizer", sgd, []string{"optim: optimizer adamw was saved, the new plan uses sgd_momentum", "optim.state.embed.weight.momentum_buffer: not in the old checkpoint"}},
		{"renamed", renamed, []string{"model.tok.weight: not in the old checkpoint", "model.embed.weight: saved, but not in the new plan"}},
		{"reshaped", reshaped, []string{"model.embed.weight: shape [10 6] was saved, the new plan has [11 6]"}},
		{"retyped", retyped, []string{"model.embed.weight: dtype fp32 was saved, the new plan has bf16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(base, tc.new)
			var ie *IncompatibleError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want an IncompatibleError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// meshLayout reads "W" or "RxS".
func meshLayout(t *testing.T, s string) *Layout {
	t.Helper()
	var r, sh int
	if n, _ := fmt.Sscanf(s, "%dx%d", &r, &sh); n == 2 {
		return tinyLayout(t, r*sh, s)
	}
	var w int
	fmt.Sscanf(s, "%d", &w)
	return tinyLayout(t, w, "")
}
