package cuda

import (
	"encoding/binary"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsdpc/fsdpc/executor"
	"github.com/fsdpc/fsdpc/executor/gpu"
	"github.com/fsdpc/fsdpc/executor/gpu/gputest"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/plans"
)

// piece is one decoded entry of a moves table.
type piece struct{ dstOff, srcOff, n, types int64 }

func decodeTable(t *testing.T, table []byte) []piece {
	t.Helper()
	if len(table)%moveSize != 0 {
		t.Fatalf("a table of %d bytes is not whole %d-byte pieces", len(table), moveSize)
	}
	var ps []piece
	for b := table; len(b) > 0; b = b[moveSize:] {
		u := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
		ps = append(ps, piece{u(0), u(1), u(2), u(3)})
	}
	return ps
}

func TestMoveTable(t *testing.T) {
	cast := func(dt, st ir.DType) int64 {
		dc, _ := dtypeCode(dt)
		sc, _ := dtypeCode(st)
		return dc | sc<<8
	}
	const p = movePieceBytes
	for _, c := range []struct {
		name string
		runs []gpu.Run
		want []piece
		bad  bool
	}{
		{"bytes of a non-float dtype are copied", []gpu.Run{{DstOff: 3, SrcOff: 5, DstDType: ir.UINT8, SrcDType: ir.UINT8, N: 10}},
			[]piece{{3, 5, 10, moveBytes}}, false},
		{"same float dtype: a byte copy", []gpu.Run{{DstOff: 0, SrcOff: 8, DstDType: ir.BF16, SrcDType: ir.BF16, N: 7}},
			[]piece{{0, 8, 14, moveBytes}}, false},
		{"a long copy is split", []gpu.Run{{DstOff: 1, SrcOff: 2, DstDType: ir.FP32, SrcDType: ir.FP32, N: p/2 + 1}},
			[]piece{{1, 2, p, moveBytes}, {1 + p, 2 + p, p, moveBytes}, {1 + 2*p, 2 + 2*p, 4, moveBytes}}, false},
		{"a cast is split by elements of the wider dtype", []gpu.Run{{DstOff: 0, SrcOff: 0, DstDType: ir.BF16, SrcDType: ir.FP32, N: p/4 + 3}},
			[]piece{{0, 0, p / 4, cast(ir.BF16, ir.FP32)}, {p / 2, p, 3, cast(ir.BF16, ir.FP32)}}, false},
		{"empty runs leave no piece", []gpu.Run{{DstDType: ir.FP32, SrcDType: ir.BF16}, {DstDType: ir.INT64, SrcDType: ir.INT64}}, nil, false},
		{"integer casts are refused", []gpu.Run{{DstDType: ir.FP32, SrcDType: ir.INT32, N: 1}}, nil, true},
		{"negative counts are refused", []gpu.Run{{DstDType: ir.FP32, SrcDType: ir.FP32, N: -1}}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			table, err := moveTable(c.runs)
			if c.bad {
				if err == nil {
					t.Fatalf("moveTable(%+v) = %d bytes, want an error", c.runs, len(table))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := decodeTable(t, table)
			if len(got) != len(c.want) {
				t.Fatalf("pieces %+v, want %+v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("piece %d is %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

// tableChecker is the CPU device with the CUDA device's table encoding in
// front of its Moves: a run the moves kernel cannot take fails here as it
// would on a GPU.
type tableChecker struct {
	gpu.Device
	moves atomic.Int64 // rank goroutines call Moves concurrently
}

func (c *tableChecker) Moves(dst, src gpu.Ptr, runs []gpu.Run, s gpu.Stream) error {
	if _, err := moveTable(runs); err != nil {
		return err
	}
	c.moves.Add(1)
	return c.Device.Moves(dst, src, runs, s)
}

// TestZooMovesEncode rehearses every zoo model, cut to one repeated block
// and scaled down, on the CPU device, and encodes every Moves the backend
// makes as the CUDA device would: the byte buffers of non-float state
// (first seen failing on an H200, as "moves of uint8") are copies.
func TestZooMovesEncode(t *testing.T) {
	if testing.Short() {
		t.Skip("rehearses the zoo")
	}
	repeat := regexp.MustCompile(`(?m)^(\s*repeat\s*=\s*)\d+`)
	for _, name := range plans.Names() {
		t.Run(name, func(t *testing.T) {
			src, file, _ := plans.Source(name)
			text := repeat.ReplaceAllString(string(src), "${1}1")
			m, err := ir.Load(file, []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			p, err := planner.Plan(m, planner.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Cluster.WorldSize > 8 {
				t.Skipf("%d ranks", p.Cluster.WorldSize)
			}
			dev := &tableChecker{Device: gputest.New()}
			defer dev.Close()
			// Every zoo model of up to 8 ranks rehearses here; one that
			// failed for another reason would cover none of its moves.
			if _, err := executor.Run(p, gpu.New(dev, gpu.Options{}), executor.Options{Scale: 64, Steps: 1, Timeout: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if dev.moves.Load() == 0 {
				t.Errorf("no Moves call")
			}
		})
	}
}
