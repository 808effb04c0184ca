package executor

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fsdpc/fsdpc/schedule"
)

// TestMovesMatchHostKernels applies every copy kernel's Moves to random
// operands and compares the bytes with what the host backend's kernel
// writes into the same operands: the GPU backend moves exactly what the
// host moves.
func TestMovesMatchHostKernels(t *testing.T) {
	cases := []struct {
		name  string
		model string
		edits []edit
	}{
		{"gpt2 W=3 uneven", "gpt2-124m", join(world(3), []edit{layers(2)})},
		{"llama3-8b mixed precision W=4", "llama3-8b", join(world(4), []edit{layers(1)})},
		{"int reshard N=2 of W=4", "gpt2-124m", join(world(4), []edit{layers(2), policy("reshard_after_forward", "2")})},
		{"shard_dim 1", "llama3-8b", join(world(2), []edit{layers(1), policy("shard_dim", "1")})},
		{"lora frozen base", "llama3-8b-lora", join(world(2), []edit{layers(1)})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := zooPlan(t, c.model, c.edits...)
			q, _, err := Scale(p, 64)
			if err != nil {
				t.Fatal(err)
			}
			layouts, err := buildLayouts(q)
			if err != nil {
				t.Fatal(err)
			}
			opt, _ := newOptimizer(q.Train.Optimizer)
			d, err := compile(q, layouts, opt)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			checked := map[schedule.OpKind]int{}
			for i := range d.prog {
				in := &d.prog[i]
				k := in.kernel
				if k == nil || k.Group == nil {
					continue
				}
				for shard := 0; shard < int(k.Group.W); shard++ {
					moves, zero, ok := k.Moves(shard)
					if !ok {
						break
					}
					host, moved := runBoth(t, d, q, in, shard, zero, moves, rng)
					if !bytes.Equal(host, moved) {
						t.Fatalf("%s, shard %d: the moves write other bytes than the host kernel (first difference at byte %s)", d.describe(i), shard, firstDiff(host, moved))
					}
					checked[k.Kind]++
				}
			}
			for _, kind := range []schedule.OpKind{schedule.OpCopyIn, schedule.OpCopyOut} {
				if checked[kind] == 0 {
					t.Errorf("no %s checked", kind)
				}
			}
			t.Logf("checked %v", checked)
		})
	}
}

// runBoth runs the host kernel of in and the moves on copies of the same
// random operands and returns both targets.
func runBoth(t *testing.T, d *driver, q *schedule.Plan, in *instr, shard int, zero bool, moves []Move, rng *rand.Rand) (host, moved []byte) {
	t.Helper()
	h := &Host{t: Topology{Replicate: 1, Shard: int(in.kernel.Group.W)}, abort: make(chan struct{})}
	r := &hostRank{h: h, shard: shard}
	st := &hostStream{r: r}
	it := &item{k: in.kernel}
	var src, dst []byte
	for j, bi := range in.args {
		if bi < 0 || j > ArgSrc {
			continue
		}
		// Bytes below 0x40 are finite in every float format and never
		// the poison.
		b := make([]byte, q.Buffers[bi].Bytes)
		for i := range b {
			b[i] = byte(rng.IntN(0x40))
		}
		it.mem[j] = &block{data: b}
		if j == ArgSrc {
			src = bytes.Clone(b)
		} else {
			dst = bytes.Clone(b)
		}
	}
	st.runKernel(it)
	if h.Failed() {
		t.Fatalf("host kernel failed: %v", h.failures)
	}
	if zero {
		clear(dst)
	}
	for _, m := range moves {
		if m.DstOff < 0 || m.SrcOff < 0 || m.DstOff+m.N*m.DstDType.Size() > int64(len(dst)) || m.SrcOff+m.N*m.SrcDType.Size() > int64(len(src)) {
			t.Fatalf("move %+v out of bounds (src %d, dst %d bytes)", m, len(src), len(dst))
		}
		castRange(m.SrcDType, src[m.SrcOff:], 0, m.DstDType, dst[m.DstOff:], 0, m.N)
	}
	return it.mem[ArgDst].data, dst
}

func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprint(i)
		}
	}
	return fmt.Sprintf("length %d vs %d", len(a), len(b))
}
