package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// appendOpJSON appends operation o of plan p as streamList writes an element of the
// plan's ops (json.Marshal indented with prefix "      " and indent "  "),
// written by hand: encoding/json's reflection and the re-indenting were
// most of show -json's time on a 3.28 M-operation plan.
// TestOpJSONMatchesEncodingJSON and FuzzOpJSON check the bytes against
// encoding/json's.
func appendOpJSON(b []byte, p *schedule.Plan, o *schedule.Op) ([]byte, error) {
	const in1, in2, in3 = "\n        ", "\n          ", "\n            "
	n := opNames()
	key := func(b []byte, first bool, name string) []byte {
		if !first {
			b = append(b, ',')
		}
		b = append(b, in1...)
		b = append(b, name...)
		return append(b, ": "...)
	}
	var err error
	b = append(b, '{')
	b = append(key(b, true, `"kind"`), n.kind[o.Kind]...)
	b = append(key(b, false, `"stream"`), n.stream[o.Stream]...)
	b = append(key(b, false, `"phase"`), n.phase[o.Phase]...)
	b = strconv.AppendInt(key(b, false, `"micro"`), int64(o.Micro), 10)
	b = strconv.AppendInt(key(b, false, `"group"`), int64(o.Group), 10)
	b = strconv.AppendInt(key(b, false, `"module"`), int64(o.Module), 10)
	b = strconv.AppendInt(key(b, false, `"buffer"`), int64(o.Buffer), 10)
	b = strconv.AppendInt(key(b, false, `"source"`), int64(o.Source), 10)
	b = strconv.AppendInt(key(b, false, `"event"`), int64(o.Event), 10)
	b = append(key(b, false, `"pg"`), n.pg[o.PG]...)
	b = strconv.AppendInt(key(b, false, `"pg_size"`), int64(o.PGSize), 10)
	b = append(key(b, false, `"dtype"`), n.dtype[o.DType]...)
	b = append(key(b, false, `"reduce"`), n.reduce[o.Reduce]...)
	if b, err = appendJSONFloat(key(b, false, `"factor"`), o.Factor); err != nil {
		return nil, err
	}
	b = strconv.AppendInt(key(b, false, `"bytes"`), o.Bytes, 10)
	if b, err = appendJSONFloat(key(b, false, `"flops"`), o.FLOPs); err != nil {
		return nil, err
	}
	if b, err = appendJSONFloat(key(b, false, `"attn_flops"`), o.AttnFLOPs); err != nil {
		return nil, err
	}
	b = strconv.AppendInt(key(b, false, `"elem_bytes"`), o.ElemBytes, 10)
	b = key(b, false, `"gemms"`)
	if gemms := p.OpGEMMs(o); len(gemms) == 0 {
		b = append(b, "[]"...)
	} else {
		b = append(b, '[')
		for i, g := range gemms {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, in2...)
			b = append(b, '{')
			for j, f := range [4]struct {
				name string
				v    int64
			}{{`"m": `, g.M}, {`"n": `, g.N}, {`"k": `, g.K}, {`"count": `, g.Count}} {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, in3...)
				b = append(b, f.name...)
				b = strconv.AppendInt(b, f.v, 10)
			}
			b = append(b, in2...)
			b = append(b, '}')
		}
		b = append(b, in1...)
		b = append(b, ']')
	}
	b = key(b, false, `"uses"`)
	if uses := p.OpUses(o); len(uses) == 0 {
		b = append(b, "[]"...)
	} else {
		b = append(b, '[')
		for i, u := range uses {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, in2...)
			b = strconv.AppendInt(b, int64(u), 10)
		}
		b = append(b, in1...)
		b = append(b, ']')
	}
	return append(b, "\n      }"...), nil
}

// appendJSONFloat appends f as encoding/json writes a float64: the
// shortest decimal, in exponent form below 1e-6 and from 1e21 on, with
// its exponent's leading zero dropped; NaN and ±Inf are its error.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// opEnumNames are each enum value's JSON string (its MarshalText, quoted
// as encoding/json quotes it), for every value a uint8 holds.
type opEnumNames struct {
	kind, stream, phase, pg, dtype, reduce [256][]byte
}

var opNames = sync.OnceValue(func() *opEnumNames {
	n := new(opEnumNames)
	// encoding/json quotes a TextMarshaler's text as a string, and a
	// string always marshals.
	quote := func(v fmt.Stringer) []byte {
		b, _ := json.Marshal(v.String())
		return b
	}
	for i := range 256 {
		v := uint8(i)
		n.kind[i] = quote(schedule.OpKind(v))
		n.stream[i] = quote(schedule.Stream(v))
		n.phase[i] = quote(schedule.Phase(v))
		n.pg[i] = quote(schedule.ProcessGroup(v))
		n.dtype[i] = quote(ir.DType(v))
		n.reduce[i] = quote(schedule.ReduceOp(v))
	}
	return n
})
