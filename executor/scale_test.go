package executor

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

// rowPattern is what scaling must keep of a parameter's shard dimension:
// how many ranks hold a full chunk, whether one holds a partial chunk, how
// many hold nothing.
func rowPattern(d, W, c int64) (full int64, partial bool, empty int64) {
	full = d / c
	partial = d%c != 0
	empty = W - full
	if partial {
		empty--
	}
	return
}

func TestScaleShardDimKeepsThePattern(t *testing.T) {
	for W := int64(1); W <= 20; W++ {
		for d := int64(1); d <= 300; d++ {
			c := ceilDiv(d, W)
			for _, k := range []int64{1, 2, 3, 7, 64, 1 << 20} {
				d2, c2 := scaleShardDim(d, W, c, k)
				if ceilDiv(d2, W) != c2 || d2 > d || c2 > c {
					t.Fatalf("d=%d W=%d k=%d: %d rows, %d per rank is not a layout of the input's", d, W, k, d2, c2)
				}
				f1, p1, e1 := rowPattern(d, W, c)
				f2, p2, e2 := rowPattern(d2, W, c2)
				if f1 != f2 || p1 != p2 || e1 != e2 || (d%W == 0) != (d2%W == 0) {
					t.Fatalf("d=%d W=%d k=%d: pattern %d/%v/%d became %d/%v/%d (d=%d, c=%d)", d, W, k, f1, p1, e1, f2, p2, e2, d2, c2)
				}
				if k == 1 && (d2 != d || c2 != c) {
					t.Fatalf("d=%d W=%d: scale 1 changed the rows to %d", d, W, d2)
				}
			}
		}
	}
}

// TestScaleKeepsStructure scales every zoo plan on several world sizes and
// checks that the structure survives: the same groups and parameters in
// the same order, the same padded parameters and empty ranks, the same
// program, and a plan the verifier still proves safe. At scale 1 the
// layout reproduces every size the planner gave.
func TestScaleKeepsStructure(t *testing.T) {
	for _, name := range plans.Names() {
		for _, w := range []int{3, 8} {
			t.Run(fmt.Sprintf("%s/w%d", name, w), func(t *testing.T) {
				t.Parallel()
				p := zooPlan(t, name, append(world(w), layers(2))...)
				if _, diffs, err := Scale(p, 1); err != nil || len(diffs) > 0 {
					t.Fatalf("scale 1: %v %v", err, diffs)
				}
				for _, k := range []int{1, 16, 4096, MaxScale} {
					q, _, err := Scale(p, k)
					if err != nil {
						t.Fatal(err)
					}
					if err := schedule.Verify(q); err != nil {
						t.Fatalf("scale %d: the scaled plan does not verify: %v", k, err)
					}
					if len(q.Groups) != len(p.Groups) || len(q.Ops) != len(p.Ops) || len(q.Buffers) != len(p.Buffers) {
						t.Fatalf("scale %d changed the plan's shape", k)
					}
					W := int64(p.Cluster.Shard)
					for gi := range p.Groups {
						a, b := p.Groups[gi].Params, q.Groups[gi].Params
						if len(a) != len(b) {
							t.Fatalf("group %s: %d parameters became %d", p.Groups[gi].Name, len(a), len(b))
						}
						for pi := range a {
							x, y := a[pi], b[pi]
							if x.Name != y.Name || x.RequiresGrad != y.RequiresGrad || x.ShardDim != y.ShardDim || len(x.Shape) != len(y.Shape) {
								t.Fatalf("parameter %s changed identity", x.Name)
							}
							f1, p1, e1 := rowPattern(x.Shape[x.ShardDim], W, x.ChunkRows)
							f2, p2, e2 := rowPattern(y.Shape[y.ShardDim], W, y.ChunkRows)
							if f1 != f2 || p1 != p2 || e1 != e2 {
								t.Fatalf("scale %d: %s: rank pattern %d/%v/%d became %d/%v/%d", k, x.Name, f1, p1, e1, f2, p2, e2)
							}
							if k > 1 && y.ShardNumel > x.ShardNumel {
								t.Fatalf("scale %d grew %s", k, x.Name)
							}
						}
					}
					if k == 1 {
						for i := range p.Buffers {
							if p.Buffers[i].Bytes != q.Buffers[i].Bytes {
								t.Fatalf("scale 1 resized %s", p.Buffers[i].Name)
							}
						}
						for i, b := range p.Prediction.PeakByPool {
							if q.Prediction.PeakByPool[i] != b {
								t.Fatalf("scale 1 changed the predicted peak of pool %d: %d → %d", i, b, q.Prediction.PeakByPool[i])
							}
						}
					}
				}
			})
		}
	}
}

// TestScaleRange: a scale past MaxScale is refused. 2^63-1 once wrapped
// ceilDiv and k² to zero-sized dimensions and an internal error.
func TestScaleRange(t *testing.T) {
	p := zooPlan(t, "gpt2-124m", layers(2))
	for _, k := range []int{0, -1, MaxScale + 1, math.MaxInt} {
		if _, _, err := Scale(p, k); err == nil || !strings.Contains(err.Error(), "it must be from 1 to") {
			t.Errorf("scale %d: error %v; want the range", k, err)
		}
	}
}
