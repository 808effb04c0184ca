package cuda

import (
	"encoding/binary"
	"fmt"

	"github.com/fsdpc/fsdpc/executor/gpu"
)

// This file is build-tag free, as kernelspec.go is: the moves kernel's
// table is plain data, so the CPU tests check it against every run the
// backend makes (movetable_test.go).

// movePieceBytes bounds one piece of a grouped move (kernels.cu, moves):
// a run longer than this is split, so that one long tensor spreads over
// many blocks instead of holding one while the rest of the grid idles.
// 64 KiB is 16 of a block's 256-thread, 16-byte rounds.
const movePieceBytes = 64 << 10

// moveSize is the bytes of one piece in the moves kernel's table (its
// struct Move: four 8-byte fields).
const moveSize = 32

// moveBytes is the dtype code of a piece that copies n raw bytes: a run
// whose dtypes agree, of any dtype (float, integer or the byte buffers of
// non-float state), is a copy. kernels.cu's float codes start at 1.
const moveBytes = 0

// moveTable encodes runs as the moves kernel's pieces (struct Move: byte
// offsets, a count, the target and source dtype codes): a run whose
// dtypes agree as a byte copy, one whose dtypes differ as a cast of
// elements, which the kernels do for the float dtypes only. Runs longer
// than movePieceBytes are split; empty ones leave no piece.
func moveTable(runs []gpu.Run) ([]byte, error) {
	table := make([]byte, 0, moveSize*len(runs)) // one piece a run, unless split
	piece := func(dstOff, srcOff, n, types int64) {
		table = binary.LittleEndian.AppendUint64(table, uint64(dstOff))
		table = binary.LittleEndian.AppendUint64(table, uint64(srcOff))
		table = binary.LittleEndian.AppendUint64(table, uint64(n))
		table = binary.LittleEndian.AppendUint64(table, uint64(types))
	}
	for i, r := range runs {
		if r.N < 0 || r.DstOff < 0 || r.SrcOff < 0 {
			return nil, fmt.Errorf("cuda: moves, run %d: %d elements at byte %d to byte %d", i, r.N, r.SrcOff, r.DstOff)
		}
		if r.DstDType == r.SrcDType {
			bytes := r.N * r.DstDType.Size()
			for at := int64(0); at < bytes; at += movePieceBytes {
				piece(r.DstOff+at, r.SrcOff+at, min(movePieceBytes, bytes-at), moveBytes)
			}
			continue
		}
		dc, ok := dtypeCode(r.DstDType)
		sc, ok2 := dtypeCode(r.SrcDType)
		if !ok || !ok2 {
			return nil, fmt.Errorf("cuda: moves, run %d: a cast from %s to %s (the kernels cast between fp64, fp32, bf16 and fp16 only)", i, r.SrcDType, r.DstDType)
		}
		ds, ss := r.DstDType.Size(), r.SrcDType.Size()
		per := max(movePieceBytes/max(ds, ss), 1)
		for at := int64(0); at < r.N; at += per {
			piece(r.DstOff+at*ds, r.SrcOff+at*ss, min(per, r.N-at), dc|sc<<8)
		}
	}
	return table, nil
}
