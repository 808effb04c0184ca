package checkpoint

import (
	"encoding/json"
	"strconv"
)

// rankJSON writes the entries of reshard -format json's Ranks by hand:
// at 2²⁰ ranks with -reads they are 1.9 GB, and encoding/json's
// reflection, its re-indenting and the Read boxes each rank's reads were
// built into took most of the time. The bytes are those
// json.Marshal and json.Indent (prefix "    ", indent "  ") write for a
// jsonRank (TestRankJSONMatchesEncodingJSON).
type rankJSON struct {
	rs  *Reshard
	fqn [][]byte // each new tensor's FQN as a JSON string
}

func newRankJSON(rs *Reshard) (*rankJSON, error) {
	e := &rankJSON{rs: rs, fqn: make([][]byte, len(rs.New.Tensors))}
	for i := range rs.New.Tensors {
		b, err := json.Marshal(rs.New.Tensors[i].FQN)
		if err != nil {
			return nil, err
		}
		e.fqn[i] = b
	}
	return e, nil
}

// field starts a member of an object at depth 1 ("      ") or 5.
func field(b []byte, first bool, indent, name string) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '\n')
	b = append(b, indent...)
	b = append(b, '"')
	b = append(b, name...)
	return append(b, "\": "...)
}

// appendRank appends rank s's entry, through the last rank of its run (0
// for none), with its reads if reads.
func (e *rankJSON) appendRank(b []byte, s rankSummary, through int, reads bool) ([]byte, error) {
	const in1 = "      "
	b = append(b, '{')
	b = strconv.AppendInt(field(b, true, in1, "Rank"), int64(s.Rank), 10)
	b = strconv.AppendInt(field(b, false, in1, "Reads"), int64(s.Reads), 10)
	from, err := json.Marshal(s.FromRanks)
	if err != nil {
		return nil, err
	}
	b = append(field(b, false, in1, "FromRanks"), from...)
	b = strconv.AppendInt(field(b, false, in1, "ModelBytes"), s.ModelBytes, 10)
	b = strconv.AppendInt(field(b, false, in1, "OptimizerBytes"), s.OptimizerBytes, 10)
	b = strconv.AppendInt(field(b, false, in1, "Bytes"), s.Bytes, 10)
	b = strconv.AppendInt(field(b, false, in1, "RemoteBytes"), s.RemoteBytes, 10)
	// encoding/json's float format (and its error on NaN and ±Inf).
	secs, err := json.Marshal(s.LoadSeconds)
	if err != nil {
		return nil, err
	}
	b = append(field(b, false, in1, "LoadSeconds"), secs...)
	if through != 0 {
		b = strconv.AppendInt(field(b, false, in1, "Through"), int64(through), 10)
	}
	if reads {
		b = e.appendReads(b, s.Rank)
	}
	return append(b, "\n    }"...), nil
}

// appendReads appends rank r's ReadList, if it reads anything, in Reads'
// order, from visit without building the reads.
func (e *rankJSON) appendReads(b []byte, r int) []byte {
	const in3, in4 = "          ", "            "
	rs := e.rs
	n := 0
	rs.visit(r, func(ti, oi, k, ok int, numel int64) {
		if n == 0 {
			b = append(field(b, false, "      ", "ReadList"), '[')
		} else {
			b = append(b, ',')
		}
		n++
		b = append(b, "\n        {"...)
		nt, ot := &rs.New.Tensors[ti], &rs.Old.Tensors[oi]
		old := rs.Old.Writer[oi][ok]
		b = append(field(b, true, in3, "fqn"), e.fqn[ti]...)
		b = strconv.AppendInt(field(b, false, in3, "old_rank"), int64(old), 10)
		b = append(field(b, false, in3, "file"), "\"__"...)
		b = append(strconv.AppendInt(b, int64(old), 10), "_0.distcp\""...) // FileName
		// The box both chunks hold (intersect of the two Chunks).
		for pass, name := range [2]string{"offsets", "lengths"} {
			b = field(b, false, in3, name)
			if len(nt.Shape) == 0 {
				b = append(b, "[]"...)
				continue
			}
			b = append(b, '[')
			for d := range nt.Shape {
				alo, alen := nt.span(k, d)
				blo, blen := ot.span(ok, d)
				lo, hi := max(alo, blo), min(alo+alen, blo+blen)
				if d > 0 {
					b = append(b, ',')
				}
				b = append(b, '\n')
				b = append(b, in4...)
				v := lo
				if pass == 1 {
					v = hi - lo
				}
				b = strconv.AppendInt(b, v, 10)
			}
			b = append(b, '\n')
			b = append(b, in3...)
			b = append(b, ']')
		}
		b = strconv.AppendInt(field(b, false, in3, "bytes"), numel*nt.DType.Size(), 10)
		b = append(b, "\n        }"...)
	})
	if n > 0 {
		b = append(b, "\n      ]"...)
	}
	return b
}
