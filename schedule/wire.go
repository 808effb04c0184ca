// plan.bin: the binary plan format. This file is the only code that touches
// its bytes; docs/plan-format.md is the same specification with examples
// and the reasons. testdata/tiny.plan.hex pins it byte by byte.
//
// Layout (format version 9). All integers are little-endian.
//
//	offset     what
//	0          magic, 4 bytes: 89 46 53 50 ("\x89FSP")
//	4          format version, uint32 (FormatVersion)
//	8          size: the whole file's length in bytes, uint64
//	16         string table: count, then each string as length and bytes
//	…          Header, Cluster, Train, Groups, Modules, Buffers, Events,
//	           EventNames, Ops, Warnings, each field in plan.go's order
//	size-4     CRC-32C (Castagnoli) of bytes [0, size-4), uint32
//
// Magic and version are fixed for every version; the rest is what that
// version says. Inside the sections each field is one of:
//
//	uvarint  unsigned LEB128, minimally encoded (counts, lengths)
//	int      a Go int or int64 as a zig-zag varint (encoding/binary.AppendVarint)
//	index    a table index i (or -1 for none) as the uvarint i+1
//	str      the uvarint index of a string in the string table
//	float    float64: the uvarint of its IEEE-754 bits byte-reversed, so
//	         0 is one byte and round numbers are short
//	bool     one byte, 0 or 1
//	enum     one byte: the value's code, its position in the format's own
//	         table of that enum (wireOpKinds, wireStreams, …, wireDTypes),
//	         not the Go constant's value
//	count    a non-negative int as a uvarint
//	list     a uvarint count, then that many elements
//
// The string table lists every distinct string once, in the order the
// sections first refer to it. The sections are the Plan record; every
// record lists its fields in plan.go's order:
//
//	Plan        Header Header, Cluster Cluster, Train Train, list of Group Groups,
//	            list of str Modules, list of int ElemRecompute,
//	            list of Buffer Buffers, count Events,
//	            list of str EventNames, list of Op Ops, list of str Warnings,
//	            Prediction Prediction
//	Header      str FsdpcVersion, str InputSHA256, str Model, str Semantics
//	Cluster     str GPU, str Preset, int WorldSize, int GPUsPerNode, int Replicate,
//	            int Shard, float IntraNodeBandwidth, float InterNodeBandwidth,
//	            int HBMBytes, int MemoryBudget, list of float PeakFLOPS
//	            (by element type, in wireDTypes order),
//	            float HBMBandwidth, float HostBandwidth,
//	            list of ProfileValue Profile
//	ProfileValue str Name, float Value
//	Train       int MicroBatch, int SeqLen, int GradAccum,
//	            bool AccumulateUnsharded, str Checkpointing, str Optimizer,
//	            str OptimizerImplementation, int OptimizerStateBytes,
//	            float MaxGradNorm, bool ExpandableSegments,
//	            float ModelFLOPsPerToken
//	Group       str Name, list of str Modules, bool Root,
//	            list of GroupParam Params, int ShardNumel, int GradShardNumel,
//	            int ShardBytes, GroupPolicy Policy, bool DeferredReduce
//	GroupParam  str Name, list of int Shape, enum DType, bool RequiresGrad,
//	            list of str Aliases, int ShardDim, int ChunkRows,
//	            int ShardNumel, int Offset, int GradOffset, enum GatherDType,
//	            int StateOrder
//	GroupPolicy enum Reshard, int ReshardTo, int PrefetchForward,
//	            int PrefetchBackward, enum Orig, enum Param, enum Reduce,
//	            enum Output, bool CastForwardInputs, bool Offload,
//	            enum ReduceScatterOp, enum AllReduceOp, float PremulFactor,
//	            float PreDivide, float PostDivide
//	Buffer      str Name, enum Kind, enum Pool, index Group (into Groups),
//	            int Bytes, bool Persistent
//	Op          enum Kind, enum Stream, enum Phase, int Micro,
//	            index Group (into Groups), index Module (into Modules),
//	            index Buffer (into Buffers), index Source (into Buffers),
//	            index Event (below Events), enum PG, int PGSize, enum DType,
//	            enum Reduce, float Factor, int Bytes, float FLOPs,
//	            float AttnFLOPs, int ElemBytes, list of GEMM GEMMs,
//	            list of index Uses (into Buffers)
//	GEMM        int M, int N, int K, int Count
//	Prediction  float StepTime, float ComputeTime, float ExposedComm,
//	            float CPUTime, list of float ExposedByGroup, int PeakAllocated,
//	            index PeakOp (into Ops), list of int PeakByPool,
//	            int PeakReserved
//
// Events is at most the number of ops (each event needs an op that
// records it).
//
// Every encoding is canonical: a reader accepts exactly the bytes the
// writer produces for some plan, so decoding and re-encoding reproduces the
// input. Any change an old reader would misread (a field added, removed,
// moved or retyped, an enum value added or renumbered, a new meaning for a
// value) bumps FormatVersion. Readers refuse newer versions.

package schedule

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"runtime/debug"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/fsdpc/fsdpc/internal/atomicfile"
	"github.com/fsdpc/fsdpc/internal/inputfile"
	"github.com/fsdpc/fsdpc/internal/safetext"
	"github.com/fsdpc/fsdpc/ir"
)

const (
	magic       = "\x89FSP"
	headerSize  = 16 // magic, version, size
	trailerSize = 4  // the checksum

	// MaxFileSize is the largest file ReadFile reads: far above any plan
	// (the largest zoo plan is about a megabyte).
	MaxFileSize = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The classes of decoding errors. Decode returns a *FormatError (or a
// *VersionError) that wraps one of them, so callers test with errors.Is.
var (
	ErrBadMagic      = errors.New("not a plan.bin file")
	ErrNewerVersion  = errors.New("plan.bin format newer than this fsdpc reads")
	ErrChecksum      = errors.New("checksum mismatch")
	ErrTruncated     = errors.New("truncated")
	ErrTrailingBytes = errors.New("trailing bytes")
	ErrLength        = errors.New("length larger than the file can hold")
	ErrEnum          = errors.New("enum value out of range")
	ErrIndex         = errors.New("index out of range")
	ErrMalformed     = errors.New("malformed")
	// ErrInvalidPlan wraps schedule.Check's error on a plan that decodes
	// but is not a valid plan (or that Encode is asked to write).
	ErrInvalidPlan = errors.New("the plan is not valid")
	// ErrInternal is a bug in fsdpc: a panic caught while encoding or
	// decoding.
	ErrInternal = errors.New("internal error")
)

// FormatError is a problem at a place in a plan.bin file.
type FormatError struct {
	Offset int    // byte offset of the value in the file; -1 while encoding
	Field  string // what was being read, e.g. "Ops[12].Buffer"
	Err    error  // the class: ErrTruncated, ErrIndex, …
	Detail string // what is wrong, in words
}

func (e *FormatError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("%s: %s", e.Field, e.Detail)
	}
	return fmt.Sprintf("byte %d (%s): %s", e.Offset, e.Field, e.Detail)
}

func (e *FormatError) Unwrap() error { return e.Err }

// VersionError is a file written in a newer format than this fsdpc reads.
type VersionError struct {
	File, Supported uint32
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("byte 4 (version): the file is plan.bin format version %d, but this fsdpc reads format version %d and older: upgrade fsdpc to read it",
		e.File, e.Supported)
}

func (e *VersionError) Unwrap() error { return ErrNewerVersion }

// Encode returns the plan's plan.bin bytes; the same plan always gives the
// same bytes. It refuses a plan that Decode would refuse: one that fails
// Check, or with enums or indices out of range.
func Encode(p *Plan) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("%w while encoding a plan (please report): %v\n%s", ErrInternal, r, debug.Stack())
		}
	}()
	b, err = encode(p, nil)
	if err != nil {
		return nil, err
	}
	if err := Check(p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPlan, err)
	}
	return b, nil
}

// Decode reads a plan.bin file. It refuses anything Encode does not write,
// with an error that wraps one of the Err classes above and names the byte
// offset and field, and it runs Check on the plan it decodes. It allocates
// at most a small multiple of len(b) and never panics.
func Decode(b []byte) (p *Plan, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w while decoding plan.bin (please report): %v\n%s", ErrInternal, r, debug.Stack())
		}
	}()
	p, _, err = decode(b, false)
	if err != nil {
		return nil, err
	}
	if err := Check(p); err != nil {
		// Point at the op a problem is about, as the syntax errors do:
		// where ops start is found by decoding again, which only a plan
		// Check refuses pays for (the largest plans' offsets took 190 MB
		// of allocation to record).
		var ce *CheckError
		if errors.As(err, &ce) && ce.Op >= 0 {
			if _, opAt, err := decode(b, true); err == nil && ce.Op < len(opAt) {
				return nil, &FormatError{opAt[ce.Op], fmt.Sprintf("Ops[%d]", ce.Op), ErrInvalidPlan, ce.Error()}
			}
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidPlan, err)
	}
	return p, nil
}

// WriteFile writes the plan to path atomically: readers see the old file
// or the complete new one, never a part, whatever happens meanwhile. Only a
// regular file is ever replaced (internal/atomicfile).
func WriteFile(path string, p *Plan) error {
	b, err := Encode(p)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return atomicfile.Write(path, b)
}

// ReadFile reads and decodes a plan.bin file.
func ReadFile(path string) (*Plan, error) {
	f, err := inputfile.Open(path, "a plan.bin file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s is %s, larger than any plan.bin (at most %s): %w", path,
			ir.FormatBytes(st.Size()), ir.FormatBytes(MaxFileSize), ErrLength)
	}
	// Read into a buffer of the file's size (io.ReadAll doubles its
	// buffer: a 150 MB plan took 354 MB, live beside the decoded plan).
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	b := buf.Bytes()
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s is larger than any plan.bin (at most %s): %w", path, ir.FormatBytes(MaxFileSize), ErrLength)
	}
	p, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// traceEntry marks where an encoded field starts; tests print the pinned
// fixture with these labels.
type traceEntry struct {
	Offset int
	Field  string
}

// encode lays the plan out, validating enums, indices and the event count
// (not Check). With trace set it also records where each field starts.
func encode(p *Plan, trace *[]traceEntry) ([]byte, error) {
	c := &codec{version: FormatVersion, enc: true, check: true, strIndex: make(map[string]int),
		buf: make([]byte, 0, 256+24*len(p.Ops)+8*len(p.Buffers)+32*len(p.EventNames))}
	if trace != nil {
		c.trace = []traceEntry{}
	}
	c.plan(p)
	if c.err != nil {
		return nil, c.err
	}
	tableLen := uvarintLen(uint64(len(c.strs)))
	for _, s := range c.strs {
		tableLen += uvarintLen(uint64(len(s))) + len(s)
	}
	size := headerSize + tableLen + len(c.buf) + trailerSize
	out := make([]byte, 0, size)
	var tr []traceEntry
	mark := func(field string) {
		if trace != nil {
			tr = append(tr, traceEntry{len(out), field})
		}
	}
	mark("magic")
	out = append(out, magic...)
	mark("version")
	out = binary.LittleEndian.AppendUint32(out, FormatVersion)
	mark("size")
	out = binary.LittleEndian.AppendUint64(out, uint64(size))
	mark("Strings count")
	out = binary.AppendUvarint(out, uint64(len(c.strs)))
	for i, s := range c.strs {
		if trace != nil {
			mark(fmt.Sprintf("Strings[%d] %q", i, s))
		}
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	if trace != nil {
		for _, e := range c.trace {
			tr = append(tr, traceEntry{len(out) + e.Offset, e.Field})
		}
	}
	out = append(out, c.buf...)
	mark("checksum")
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	if trace != nil {
		*trace = tr
	}
	return out, nil
}

// decode reads the plan without running Check; with recordOps it also
// says where each op starts in the file (for Decode's errors about an op).
func decode(b []byte, recordOps bool) (*Plan, []int, error) {
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		if len(b) < len(magic) && len(b) > 0 && string(b) == magic[:len(b)] {
			return nil, nil, &FormatError{len(b), "magic", ErrTruncated, fmt.Sprintf("the file is only %d bytes long", len(b))}
		}
		return nil, nil, &FormatError{0, "magic", ErrBadMagic, ErrBadMagic.Error() + ": " + sniff(b)}
	}
	if len(b) < 8 {
		return nil, nil, &FormatError{len(b), "version", ErrTruncated, fmt.Sprintf("the file ends after %d bytes, inside its header", len(b))}
	}
	version := binary.LittleEndian.Uint32(b[4:])
	switch v := version; {
	case v > FormatVersion:
		return nil, nil, &VersionError{v, FormatVersion}
	case v == 0:
		return nil, nil, &FormatError{4, "version", ErrMalformed, "format version 0 does not exist"}
	}
	if len(b) < headerSize {
		return nil, nil, &FormatError{len(b), "size", ErrTruncated, fmt.Sprintf("the file ends after %d bytes, inside its header", len(b))}
	}
	size := binary.LittleEndian.Uint64(b[8:])
	n := uint64(len(b))
	switch {
	case size < headerSize+trailerSize:
		return nil, nil, &FormatError{8, "size", ErrMalformed, fmt.Sprintf("the header gives a size of %d bytes, less than a header and checksum", size)}
	case n < size:
		return nil, nil, &FormatError{len(b), "size", ErrTruncated,
			fmt.Sprintf("the file is %d bytes but its header says %d: it was cut short (an interrupted write or copy?)", n, size)}
	case n > size && crcAt(b[:size]):
		return nil, nil, &FormatError{int(size), "end of file", ErrTrailingBytes,
			fmt.Sprintf("%s follow the end of the plan (its header says it is %d bytes long)", plural(int(n-size), "byte"), size)}
	}
	if !crcAt(b) {
		stored := binary.LittleEndian.Uint32(b[len(b)-trailerSize:])
		sum := crc32.Checksum(b[:len(b)-trailerSize], castagnoli)
		msg := fmt.Sprintf("the stored CRC-32C is %08x but bytes 0…%d give %08x: the file is corrupt", stored, len(b)-trailerSize-1, sum)
		if n != size {
			msg = fmt.Sprintf("the header says %d bytes, the file has %d, and neither checksum matches: the file is corrupt", size, n)
		}
		return nil, nil, &FormatError{len(b) - trailerSize, "checksum", ErrChecksum, msg}
	}
	c := &codec{buf: b, off: headerSize, end: len(b) - trailerSize, version: version, recordOps: recordOps}
	c.strings()
	p := new(Plan)
	c.plan(p)
	switch {
	case c.err != nil:
	case c.off != c.end:
		c.fail(c.off, "end of the sections", ErrTrailingBytes, "the sections end %s before the checksum", plural(c.end-c.off, "byte"))
	case c.used != len(c.strs):
		c.fail(headerSize, "Strings", ErrMalformed, "%s of the table's %d never used", plural(len(c.strs)-c.used, "string"), len(c.strs))
	}
	if c.err != nil {
		return nil, nil, c.err
	}
	return p, c.opAt, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// crcAt reports whether b ends in the CRC-32C of what precedes it.
func crcAt(b []byte) bool {
	k := len(b) - trailerSize
	return crc32.Checksum(b[:k], castagnoli) == binary.LittleEndian.Uint32(b[k:])
}

// sniff says what a file that is not plan.bin looks like.
func sniff(b []byte) string {
	head := b[:min(len(b), 512)]
	text := bytes.TrimLeft(head, " \t\r\n\ufeff")
	switch {
	case len(bytes.TrimSpace(b)) == 0:
		if len(b) == 0 {
			return "the file is empty"
		}
		return "the file holds only white space"
	case bytes.HasPrefix(b, []byte("\x1f\x8b")):
		return "it is gzip-compressed: decompress it first"
	case bytes.HasPrefix(b, []byte("PK\x03\x04")):
		return "it is a zip archive"
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return "it is an executable"
	case bytes.HasPrefix(text, []byte("# fsdpc plan")):
		return "it is the text form of a plan (fsdpc show prints it), which cannot be read back; use the plan.bin it was printed from"
	case !isText(head):
		return fmt.Sprintf("it starts with % x, where a plan.bin starts with % x", b[:min(len(b), 4)], magic)
	case len(text) > 0 && text[0] == '{' || bytes.HasPrefix(text, []byte("[{")) || bytes.HasPrefix(text, []byte("[\"")):
		return "it looks like JSON"
	case looksTOML(b):
		return "it looks like a TOML model file: make a plan from it with `fsdpc plan FILE -o plan.bin`"
	}
	return "it is text, and plan.bin is binary"
}

func isText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			return len(b) < utf8.UTFMax && !utf8.FullRune(b) // a rune cut by the 512-byte window
		}
		if r < ' ' && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
		b = b[n:]
	}
	return true
}

// looksTOML reports whether the first lines that are not comments are
// TOML tables or key = value pairs.
func looksTOML(b []byte) bool {
	lines := strings.Split(string(b[:min(len(b), 4096)]), "\n")
	seen := 0
	for _, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || l[0] == '#':
			continue
		case l[0] == '[' && strings.Contains(l, "]"):
		case strings.Contains(l, "=") && !strings.ContainsAny(strings.TrimSpace(l[:strings.Index(l, "=")]), " \t\"{}()"):
		default:
			return false
		}
		if seen++; seen == 3 {
			break
		}
	}
	return seen > 0
}

// wireTable is plan.bin's table of one of its enums: a value is written
// as its position in values, not as its Go constant's value, so
// reordering or inserting the Go constants (schedule's or ir's) cannot
// change what a plan.bin says (TestWireCodesPinned pins every table by
// name). A new value is appended, and that bumps FormatVersion; every
// value of the type must be in its table exactly once
// (TestWireTablesCoverEnums).
type wireTable[T ~uint8] struct {
	values []T
	code   [256]uint8 // code[v] is v's position in values, if known[v]
	known  [256]bool
}

func newWireTable[T ~uint8](values ...T) *wireTable[T] {
	t := &wireTable[T]{values: values}
	for code, v := range values {
		t.code[v], t.known[v] = uint8(code), true
	}
	return t
}

// The format's enum tables, each in the order its codes were first
// given (the Go constants' order when the format froze them).
var (
	wireOpKinds = newWireTable(OpAlloc, OpFree, OpRecord, OpWait, OpCopyIn, OpH2D, OpAllGather,
		OpCopyOut, OpReshard, OpForward, OpBackward, OpReduceCopyIn, OpDivide, OpReduceScatter,
		OpAllReduce, OpCastGrad, OpAccumulate, OpD2H, OpSync, OpOptimizer)
	wireStreams = newWireTable(StreamCompute, StreamCopyIn, StreamAllGather, StreamReduceScatter,
		StreamAllReduce, StreamHost)
	wirePools       = newWireTable(PoolCompute, PoolCopyIn, PoolReduceScatter, PoolAllReduce, PoolHost)
	wireBufferKinds = newWireTable(BufShardedParams, BufShardedGrads, BufOptimizerState, BufCastTemp,
		BufH2DTemp, BufAllGatherOut, BufUnsharded, BufPostForwardSlice, BufUnshardedGrads,
		BufAccumGrads, BufReduceScatterIn, BufReduceScatterOut, BufActivations, BufRecompute)
	wireProcessGroups = newWireTable(PGNone, PGShard, PGReplicate, PGPostForward)
	wirePhases        = newWireTable(PhaseForward, PhaseBackward, PhaseOptimizer)
	wireReshardKinds  = newWireTable(ReshardTrue, ReshardFalse, ReshardTo)
	wireReduceOps     = newWireTable(ReduceNone, ReduceAvg, ReduceSum, ReducePremulSum)
	// wireDTypes is the table of element types; PeakFLOPS also lists its
	// figures in this order.
	wireDTypes = newWireTable(ir.DTypeInvalid, ir.FP64, ir.FP32, ir.BF16, ir.FP16, ir.FP8E4M3,
		ir.FP8E5M2, ir.INT64, ir.INT32, ir.INT8, ir.UINT8, ir.BOOL)
)

// wireEnum reads or writes an enum as its code in tab. A value the table
// lacks (only an unchecked encoding of a forged plan has one) keeps its
// value, which lies outside the table's range too (the table holds every
// value the type names), so a reader refuses it.
func wireEnum[T ~uint8](c *codec, v *T, tab *wireTable[T], field string) {
	code := uint8(*v)
	if tab.known[*v] {
		code = tab.code[*v]
	}
	enum(c, &code, len(tab.values), field)
	if !c.enc && c.err == nil {
		*v = tab.values[code]
	}
}

// dtype reads or writes an element type as its wireDTypes code.
func (c *codec) dtype(v *ir.DType, field string) { wireEnum(c, v, wireDTypes, field) }

// peakFLOPS reads or writes the cluster's dense peaks, which the plan
// indexes by ir.DType, as a list in wireDTypes order. A list shorter
// than the table (no planner writes one) keeps ir's order, so every list
// has one encoding and decoding it gives the same slice back.
func (c *codec) peakFLOPS(peak *[]float64) {
	permute := func(p []float64, toWire bool) []float64 {
		if len(p) < len(wireDTypes.values) {
			return p
		}
		out := slices.Clone(p)
		for code, t := range wireDTypes.values {
			if toWire {
				out[code] = p[t]
			} else {
				out[t] = p[code]
			}
		}
		return out
	}
	wire := *peak
	if c.enc {
		wire = permute(wire, true)
	}
	list(c, &wire, 1, "PeakFLOPS", func(f *float64) { c.float(f, "") })
	if !c.enc {
		*peak = permute(wire, false)
	}
}

// Minimum encoded sizes of list elements: every field takes at least one
// byte, which is what a zero value takes. Decoding rejects a count before
// allocating when count × minimum exceeds the bytes left.
var (
	minGroup  = minSize(func(c *codec) { c.group(new(Group)) })
	minParam  = minSize(func(c *codec) { c.param(new(GroupParam)) })
	minBuffer = minSize(func(c *codec) { c.buffer(new(Buffer), 0) })
	minOp     = minSize(func(c *codec) { c.op(new(Op), new(Plan)) })
)

func minSize(f func(*codec)) int { return minSizeAt(FormatVersion, f) }

func minSizeAt(version uint32, f func(*codec)) int {
	c := &codec{version: version, enc: true, strIndex: map[string]int{}}
	f(c)
	return len(c.buf)
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// A codec either encodes or decodes: the layout is written once, as the
// methods below, and the same calls write or read each field, so the two
// directions cannot drift apart.
type codec struct {
	// version is the format version read (decoding) or written
	// (encoding, always FormatVersion).
	version uint32
	enc     bool // encoding; else decoding
	check   bool // encoding: validate enums, indices and counts
	buf     []byte

	// Decoding: the next byte, the end of the sections, and the bytes the
	// elements of lists already counted but not read yet need at least.
	off, end, owed int

	opAt      []int // decoding with recordOps: where each op starts
	recordOps bool
	lists     listInterner // decoding: the ops' lists, each distinct one once

	strIndex map[string]int // encoding: each string's table index
	strs     []string
	used     int // decoding: strings referenced so far (first-use order)

	path  []frame
	err   error
	trace []traceEntry // encoding, when non-nil
}

// frame is one step of the path to the field being read: a section
// ("Header") or a list element ("Ops", 12).
type frame struct {
	name  string
	index int // -1 outside lists
}

func (c *codec) push(name string) { c.path = append(c.path, frame{name, -1}) }
func (c *codec) pop()             { c.path = c.path[:len(c.path)-1] }

func (c *codec) where(field string) string {
	var b strings.Builder
	for i, f := range c.path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.name)
		if f.index >= 0 {
			fmt.Fprintf(&b, "[%d]", f.index)
		}
	}
	if field != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(field)
	}
	return b.String()
}

// fail records the first error; later reads do nothing.
func (c *codec) fail(off int, field string, class error, format string, args ...any) {
	if c.err != nil {
		return
	}
	if c.enc {
		off = -1
	}
	c.err = &FormatError{off, c.where(field), class, fmt.Sprintf(format, args...)}
}

func (c *codec) mark(field string) {
	if c.trace != nil {
		c.trace = append(c.trace, traceEntry{len(c.buf), c.where(field)})
	}
}

// readByte and readUvarint read one value and return its offset. After an
// error they read nothing.
func (c *codec) readByte(field string) (byte, int, bool) {
	if c.err != nil {
		return 0, c.off, false
	}
	if c.off >= c.end {
		c.fail(c.off, field, ErrTruncated, "the sections end before this field")
		return 0, c.off, false
	}
	c.off++
	return c.buf[c.off-1], c.off - 1, true
}

func (c *codec) readUvarint(field string) (uint64, int, bool) {
	start := c.off
	if c.err != nil {
		return 0, start, false
	}
	var x uint64
	for i, shift := 0, uint(0); ; i, shift = i+1, shift+7 {
		if c.off >= c.end {
			c.fail(start, field, ErrTruncated, "the sections end inside this number")
			return 0, start, false
		}
		b := c.buf[c.off]
		c.off++
		if i == 9 && b > 1 {
			c.fail(start, field, ErrMalformed, "the number does not fit in 64 bits")
			return 0, start, false
		}
		if b < 0x80 {
			if b == 0 && i > 0 {
				c.fail(start, field, ErrMalformed, "the number is not minimally encoded")
				return 0, start, false
			}
			return x | uint64(b)<<shift, start, true
		}
		x |= uint64(b&0x7f) << shift
	}
}

func (c *codec) putUvarint(field string, x uint64) {
	c.mark(field)
	c.buf = binary.AppendUvarint(c.buf, x)
}

// sint is a signed integer, zig-zag encoded. The wire holds any int64; a
// value its Go field (an Op's int32 fields among them) cannot hold is a
// decode error naming the field, never a silent wrap.
func sint[T ~int | ~int32 | ~int64](c *codec, v *T, field string) {
	if c.enc {
		c.mark(field)
		c.buf = binary.AppendVarint(c.buf, int64(*v))
		return
	}
	u, off, ok := c.readUvarint(field)
	if !ok {
		return
	}
	x := int64(u>>1) ^ -int64(u&1)
	if int64(T(x)) != x {
		c.fail(off, field, ErrMalformed, "%d does not fit in %d bits", x, 8*unsafe.Sizeof(*v))
		return
	}
	*v = T(x)
}

// count is a non-negative int as a uvarint.
func (c *codec) count(v *int, field string) {
	if c.enc {
		if c.check && *v < 0 {
			c.fail(0, field, ErrMalformed, "negative count %d", *v)
		}
		c.putUvarint(field, uint64(*v))
		return
	}
	u, off, ok := c.readUvarint(field)
	if ok && u > math.MaxInt {
		c.fail(off, field, ErrLength, "%d does not fit in an int on this machine", u)
		return
	}
	*v = int(u)
}

// index is an index into a table of n entries, or -1 for none. An index
// its Go field cannot hold (an Op's are int32) is a decode error, even
// below n: a forged table size is only checked after the ops.
func index[T ~int | ~int32](c *codec, v *T, n int, field, table string) {
	if c.enc {
		if c.check && (*v < -1 || int(*v) >= n) {
			c.fail(0, field, ErrIndex, "%d is outside the %d %s (-1 is none)", *v, n, table)
		}
		c.putUvarint(field, uint64(int64(*v)+1))
		return
	}
	u, off, ok := c.readUvarint(field)
	if !ok {
		return
	}
	if u > uint64(n) {
		c.fail(off, field, ErrIndex, "%d is outside the %d %s (-1 is none)", int64(u-1), n, table)
		return
	}
	x := int64(u) - 1
	if int64(T(x)) != x {
		c.fail(off, field, ErrIndex, "%d does not fit in %d bits", x, 8*unsafe.Sizeof(*v))
		return
	}
	*v = T(x)
}

func enum[T ~uint8](c *codec, v *T, n int, field string) {
	if c.enc {
		if c.check && int(*v) >= n {
			c.fail(0, field, ErrEnum, "%d is not one of its %d values (0…%d)", *v, n, n-1)
		}
		c.mark(field)
		c.buf = append(c.buf, byte(*v))
		return
	}
	b, off, ok := c.readByte(field)
	if !ok {
		return
	}
	if int(b) >= n {
		c.fail(off, field, ErrEnum, "%d is not one of its %d values (0…%d)", b, n, n-1)
		return
	}
	*v = T(b)
}

func (c *codec) bool(v *bool, field string) {
	if c.enc {
		c.mark(field)
		b := byte(0)
		if *v {
			b = 1
		}
		c.buf = append(c.buf, b)
		return
	}
	b, off, ok := c.readByte(field)
	if !ok {
		return
	}
	if b > 1 {
		c.fail(off, field, ErrMalformed, "a boolean is 0 or 1, not %d", b)
		return
	}
	*v = b == 1
}

func (c *codec) float(v *float64, field string) {
	if c.enc {
		c.putUvarint(field, bits.ReverseBytes64(math.Float64bits(*v)))
		return
	}
	if u, _, ok := c.readUvarint(field); ok {
		*v = math.Float64frombits(bits.ReverseBytes64(u))
	}
}

func (c *codec) str(v *string, field string) {
	if c.enc {
		i, ok := c.strIndex[*v]
		if !ok {
			i = len(c.strs)
			c.strIndex[*v] = i
			c.strs = append(c.strs, *v)
		}
		c.putUvarint(field, uint64(i))
		return
	}
	u, off, ok := c.readUvarint(field)
	switch {
	case !ok:
		return
	case u >= uint64(len(c.strs)):
		c.fail(off, field, ErrIndex, "string %d is outside the string table's %d strings", u, len(c.strs))
		return
	case u > uint64(c.used):
		c.fail(off, field, ErrMalformed, "string %d is used before string %d: the table is not in first-use order", u, c.used)
		return
	case u == uint64(c.used):
		c.used++
	}
	*v = c.strs[u]
}

// strings reads the string table into one allocation.
func (c *codec) strings() {
	n, off, ok := c.readUvarint("Strings count")
	if !ok || !c.fits(n, 1, off, "Strings count") || n == 0 {
		return
	}
	start := c.off
	c.path = append(c.path, frame{"Strings", 0})
	for i := range int(n) {
		c.path[0].index = i
		k, koff, ok := c.readUvarint("length")
		if !ok {
			return
		}
		if k > uint64(c.end-c.off) {
			c.fail(koff, "length", ErrLength, "%d bytes, but only %d remain", k, c.end-c.off)
			return
		}
		c.off += int(k)
	}
	c.pop()
	all := string(c.buf[start:c.off])
	c.strs = make([]string, n)
	seen := make(map[string]struct{}) // grows with distinct strings only: they need the bytes
	at := 0
	for i := range c.strs {
		k, m := binary.Uvarint(c.buf[start+at:]) // read and checked above
		s := all[at+m : at+m+int(k)]
		if _, dup := seen[s]; dup {
			c.fail(start+at, fmt.Sprintf("Strings[%d]", i), ErrMalformed, "%q is in the string table twice", s)
			return
		}
		if !safetext.Printable(s) {
			// No string fsdpc writes has one; Check holds each field
			// to its own rule.
			c.fail(start+at, fmt.Sprintf("Strings[%d]", i), ErrMalformed,
				"%q has a control character, line break or invalid UTF-8", s)
			return
		}
		seen[s] = struct{}{}
		c.strs[i] = s
		at += m + int(k)
	}
}

// fits checks, before anything is allocated, that n list elements of at
// least min bytes each fit in what is left after the elements already
// promised.
func (c *codec) fits(n uint64, min, off int, field string) bool {
	avail := max(c.end-c.off-c.owed, 0)
	if n > uint64(avail/min) {
		c.fail(off, field, ErrLength, "%d elements of at least %s each, but only %s remain for them", n, plural(min, "byte"), plural(avail, "byte"))
		return false
	}
	return true
}

// list writes or reads a count and that many elements.
func list[T any](c *codec, s *[]T, min int, field string, elem func(*T)) {
	var xs []T
	if c.enc {
		xs = *s
		c.putUvarint(field+" count", uint64(len(xs)))
	} else {
		n, off, ok := c.readUvarint(field + " count")
		if !ok || !c.fits(n, min, off, field+" count") || n == 0 {
			return
		}
		xs = make([]T, n)
		c.owed += len(xs) * min
	}
	c.path = append(c.path, frame{field, 0})
	for i := range xs {
		if !c.enc {
			c.owed -= min
		}
		c.path[len(c.path)-1].index = i
		elem(&xs[i])
		if c.err != nil {
			break
		}
	}
	c.pop()
	if !c.enc && c.err == nil {
		*s = xs
	}
}

func (c *codec) strList(s *[]string, field string) {
	list(c, s, 1, field, func(v *string) { c.str(v, "") })
}

// The layout, section by section, in plan.go's field order.

func (c *codec) plan(p *Plan) {
	c.push("Header")
	h := &p.Header
	c.str(&h.FsdpcVersion, "FsdpcVersion")
	c.str(&h.InputSHA256, "InputSHA256")
	c.str(&h.Model, "Model")
	c.str(&h.Semantics, "Semantics")
	c.pop()

	c.push("Cluster")
	cl := &p.Cluster
	c.str(&cl.GPU, "GPU")
	if c.version >= 7 {
		c.str(&cl.Preset, "Preset")
	}
	sint(c, &cl.WorldSize, "WorldSize")
	sint(c, &cl.GPUsPerNode, "GPUsPerNode")
	sint(c, &cl.Replicate, "Replicate")
	sint(c, &cl.Shard, "Shard")
	c.float(&cl.IntraNodeBandwidth, "IntraNodeBandwidth")
	c.float(&cl.InterNodeBandwidth, "InterNodeBandwidth")
	sint(c, &cl.HBMBytes, "HBMBytes")
	sint(c, &cl.MemoryBudget, "MemoryBudget")
	c.peakFLOPS(&cl.PeakFLOPS)
	c.float(&cl.HBMBandwidth, "HBMBandwidth")
	c.float(&cl.HostBandwidth, "HostBandwidth")
	if c.version >= 3 {
		list(c, &cl.Profile, 2, "Profile", func(v *ir.ProfileValue) {
			c.str(&v.Name, "Name")
			c.float(&v.Value, "Value")
		})
	}
	c.pop()

	c.push("Train")
	t := &p.Train
	sint(c, &t.MicroBatch, "MicroBatch")
	sint(c, &t.SeqLen, "SeqLen")
	sint(c, &t.GradAccum, "GradAccum")
	c.bool(&t.AccumulateUnsharded, "AccumulateUnsharded")
	c.str(&t.Checkpointing, "Checkpointing")
	c.str(&t.Optimizer, "Optimizer")
	if c.version >= 10 {
		c.str(&t.OptimizerImplementation, "OptimizerImplementation")
	}
	sint(c, &t.OptimizerStateBytes, "OptimizerStateBytes")
	if c.version >= 11 {
		c.float(&t.MaxGradNorm, "MaxGradNorm")
	}
	if c.version >= 5 {
		c.bool(&t.ExpandableSegments, "ExpandableSegments")
	}
	if c.version >= 8 {
		c.float(&t.ModelFLOPsPerToken, "ModelFLOPsPerToken")
	}
	c.pop()

	list(c, &p.Groups, minGroup, "Groups", c.group)
	c.strList(&p.Modules, "Modules")
	if c.version >= 9 {
		list(c, &p.ElemRecompute, 1, "ElemRecompute", func(v *int64) { sint(c, v, "") })
	}
	list(c, &p.Buffers, minBuffer, "Buffers", func(b *Buffer) { c.buffer(b, len(p.Groups)) })

	eventsAt := c.off
	c.count(&p.Events, "Events")
	c.strList(&p.EventNames, "EventNames")
	if c.check && p.Events > len(p.Ops) {
		c.fail(0, "Events", ErrLength, "%d events but only %d ops: every event needs an op that records it", p.Events, len(p.Ops))
	}
	opSize := minOp
	if c.version < FormatVersion {
		opSize = minSizeAt(c.version, func(c *codec) { c.op(new(Op), new(Plan)) })
	}
	list(c, &p.Ops, opSize, "Ops", func(o *Op) { c.op(o, p) })
	if !c.enc && c.err == nil && p.Events > len(p.Ops) {
		// Checked after the ops, before Check allocates per event.
		c.fail(eventsAt, "Events", ErrLength, "%d events but only %d ops: every event needs an op that records it", p.Events, len(p.Ops))
	}
	c.strList(&p.Warnings, "Warnings")

	c.push("Prediction")
	pr := &p.Prediction
	c.float(&pr.StepTime, "StepTime")
	c.float(&pr.ComputeTime, "ComputeTime")
	c.float(&pr.ExposedComm, "ExposedComm")
	c.float(&pr.CPUTime, "CPUTime")
	list(c, &pr.ExposedByGroup, 1, "ExposedByGroup", func(f *float64) { c.float(f, "") })
	sint(c, &pr.PeakAllocated, "PeakAllocated")
	index(c, &pr.PeakOp, len(p.Ops), "PeakOp", "ops")
	list(c, &pr.PeakByPool, 1, "PeakByPool", func(b *int64) { sint(c, b, "") })
	sint(c, &pr.PeakReserved, "PeakReserved")
	c.pop()
}

func (c *codec) group(g *Group) {
	c.str(&g.Name, "Name")
	c.strList(&g.Modules, "Modules")
	c.bool(&g.Root, "Root")
	list(c, &g.Params, minParam, "Params", c.param)
	sint(c, &g.ShardNumel, "ShardNumel")
	sint(c, &g.GradShardNumel, "GradShardNumel")
	sint(c, &g.ShardBytes, "ShardBytes")

	c.push("Policy")
	pol := &g.Policy
	wireEnum(c, &pol.Reshard, wireReshardKinds, "Reshard")
	sint(c, &pol.ReshardTo, "ReshardTo")
	sint(c, &pol.PrefetchForward, "PrefetchForward")
	sint(c, &pol.PrefetchBackward, "PrefetchBackward")
	c.dtype(&pol.Orig, "Orig")
	c.dtype(&pol.Param, "Param")
	c.dtype(&pol.Reduce, "Reduce")
	c.dtype(&pol.Output, "Output")
	c.bool(&pol.CastForwardInputs, "CastForwardInputs")
	c.bool(&pol.Offload, "Offload")
	wireEnum(c, &pol.ReduceScatterOp, wireReduceOps, "ReduceScatterOp")
	wireEnum(c, &pol.AllReduceOp, wireReduceOps, "AllReduceOp")
	c.float(&pol.PremulFactor, "PremulFactor")
	c.float(&pol.PreDivide, "PreDivide")
	c.float(&pol.PostDivide, "PostDivide")
	c.pop()

	c.bool(&g.DeferredReduce, "DeferredReduce")
}

func (c *codec) param(gp *GroupParam) {
	c.str(&gp.Name, "Name")
	list(c, &gp.Shape, 1, "Shape", func(d *int64) { sint(c, d, "") })
	c.dtype(&gp.DType, "DType")
	c.bool(&gp.RequiresGrad, "RequiresGrad")
	c.strList(&gp.Aliases, "Aliases")
	sint(c, &gp.ShardDim, "ShardDim")
	sint(c, &gp.ChunkRows, "ChunkRows")
	sint(c, &gp.ShardNumel, "ShardNumel")
	sint(c, &gp.Offset, "Offset")
	sint(c, &gp.GradOffset, "GradOffset")
	c.dtype(&gp.GatherDType, "GatherDType")
	if c.version >= 6 {
		sint(c, &gp.StateOrder, "StateOrder")
	} else if !c.enc {
		gp.StateOrder = -1
	}
}

func (c *codec) buffer(b *Buffer, groups int) {
	c.str(&b.Name, "Name")
	wireEnum(c, &b.Kind, wireBufferKinds, "Kind")
	wireEnum(c, &b.Pool, wirePools, "Pool")
	index(c, &b.Group, groups, "Group", "groups")
	sint(c, &b.Bytes, "Bytes")
	c.bool(&b.Persistent, "Persistent")
}

func (c *codec) op(o *Op, p *Plan) {
	if c.recordOps {
		c.opAt = append(c.opAt, c.off)
	}
	wireEnum(c, &o.Kind, wireOpKinds, "Kind")
	wireEnum(c, &o.Stream, wireStreams, "Stream")
	wireEnum(c, &o.Phase, wirePhases, "Phase")
	sint(c, &o.Micro, "Micro")
	index(c, &o.Group, len(p.Groups), "Group", "groups")
	index(c, &o.Module, len(p.Modules), "Module", "modules")
	index(c, &o.Buffer, len(p.Buffers), "Buffer", "buffers")
	index(c, &o.Source, len(p.Buffers), "Source", "buffers")
	index(c, &o.Event, p.Events, "Event", "events")
	wireEnum(c, &o.PG, wireProcessGroups, "PG")
	sint(c, &o.PGSize, "PGSize")
	c.dtype(&o.DType, "DType")
	wireEnum(c, &o.Reduce, wireReduceOps, "Reduce")
	c.float(&o.Factor, "Factor")
	sint(c, &o.Bytes, "Bytes")
	c.float(&o.FLOPs, "FLOPs")
	if c.version >= 2 {
		c.float(&o.AttnFLOPs, "AttnFLOPs")
		sint(c, &o.ElemBytes, "ElemBytes")
	}
	// The lists live in the plan's tables (Plan.GEMMTable, UseTable);
	// on the wire they follow the op. Decoding gives equal lists one run.
	var gemms []ir.GEMM
	var uses []int32
	if c.enc {
		gemms, uses = p.OpGEMMs(o), p.OpUses(o)
	}
	start := c.off
	if c.version >= 4 {
		list(c, &gemms, 4, "GEMMs", func(g *ir.GEMM) {
			sint(c, &g.M, "M")
			sint(c, &g.N, "N")
			sint(c, &g.K, "K")
			sint(c, &g.Count, "Count")
		})
	}
	list(c, &uses, 1, "Uses", func(u *int32) { index(c, u, len(p.Buffers), "", "buffers") })
	if c.enc || c.err != nil {
		return
	}
	if int64(len(p.GEMMTable))+int64(len(gemms)) > math.MaxInt32 || int64(len(p.UseTable))+int64(len(uses)) > math.MaxInt32 {
		c.fail(start, "GEMMs", ErrMalformed, "the plan's ops list more than 2^31-1 GEMM shapes or uses in all")
		return
	}
	o.GEMMs, o.Uses = c.lists.gemms(p, gemms), c.lists.uses(p, uses)
}
