package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// The rendezvous wire protocol (see the package documentation for the
// layout).
const (
	// Magic opens every frame.
	Magic = "FSRZ"
	// ProtocolVersion is the version this build speaks; a peer speaking
	// another is refused. Bump it whenever an old peer would misread a
	// frame.
	ProtocolVersion = 1
	// HeaderSize is the size of a frame header; MaxPayload bounds the
	// payload that follows it.
	HeaderSize = 12
	MaxPayload = 4096
	// IDSize is the size of the blob rank 0 hands every rank (NCCL's
	// ncclUniqueId is 128 bytes).
	IDSize = 128
	// maxLabel bounds a rank's self-description (host:pid).
	maxLabel = 255
)

// msgType is a frame's type.
type msgType uint8

const (
	msgHello   msgType = 1 // rank → rank 0: rank, world, plan hash, label
	msgWelcome msgType = 2 // rank 0 → rank: world, plan hash, ID
	msgReject  msgType = 3 // rank 0 → rank: code, reason; then the connection closes
	msgBarrier msgType = 4 // rank → rank 0: barrier sequence number
	msgRelease msgType = 5 // rank 0 → rank: the same sequence number
)

var msgNames = map[msgType]string{msgHello: "HELLO", msgWelcome: "WELCOME", msgReject: "REJECT", msgBarrier: "BARRIER", msgRelease: "RELEASE"}

func (t msgType) String() string {
	if n, ok := msgNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", uint8(t))
}

// The errors a rendezvous or a barrier fails with; the error returned wraps
// one of them and says which ranks and values are involved. A rank that
// rank 0 refuses gets the same kind of error, with rank 0's reason.
var (
	ErrProtocol      = errors.New("not fsdpc's rendezvous protocol")
	ErrVersion       = errors.New("rendezvous protocol version mismatch")
	ErrWorldMismatch = errors.New("world size mismatch")
	ErrBadRank       = errors.New("rank out of range")
	ErrDuplicateRank = errors.New("duplicate rank")
	ErrPlanMismatch  = errors.New("ranks hold different plans")
	ErrMissingRanks  = errors.New("ranks missing at the deadline")
	ErrNoMaster      = errors.New("rank 0 unreachable")
	ErrAborted       = errors.New("rendezvous aborted")
)

// rejectCodes are the codes of a REJECT frame, one per error.
var rejectCodes = []error{1: ErrProtocol, 2: ErrVersion, 3: ErrWorldMismatch, 4: ErrBadRank,
	5: ErrDuplicateRank, 6: ErrPlanMismatch, 7: ErrMissingRanks, 8: ErrAborted}

func rejectCode(err error) uint8 {
	for c, e := range rejectCodes {
		if e != nil && errors.Is(err, e) {
			return uint8(c)
		}
	}
	return 8 // aborted
}

func rejectError(code uint8) error {
	if int(code) < len(rejectCodes) && rejectCodes[code] != nil {
		return rejectCodes[code]
	}
	return ErrAborted
}

// frameError is a malformed frame: what was wrong with it.
type frameError struct {
	kind error // ErrProtocol or ErrVersion
	what string
}

func (e *frameError) Error() string { return e.what }
func (e *frameError) Unwrap() error { return e.kind }

func badFrame(format string, args ...any) error {
	return &frameError{ErrProtocol, fmt.Sprintf(format, args...)}
}

// frame is one message.
type frame struct {
	typ     msgType
	payload []byte
}

// encodeFrame lays a frame out: magic, version, type, a zero byte, the
// payload's length, the payload; integers big-endian.
func encodeFrame(typ msgType, payload []byte) []byte {
	if len(payload) > MaxPayload {
		panic("launch: payload over MaxPayload") // every encoder bounds its payload
	}
	b := make([]byte, HeaderSize, HeaderSize+len(payload))
	copy(b, Magic)
	binary.BigEndian.PutUint16(b[4:], ProtocolVersion)
	b[6] = byte(typ)
	binary.BigEndian.PutUint32(b[8:], uint32(len(payload)))
	return append(b, payload...)
}

func writeFrame(w io.Writer, typ msgType, payload []byte) error {
	_, err := w.Write(encodeFrame(typ, payload))
	return err
}

// readFrame reads one frame. A header that is not ours, another version, a
// length over MaxPayload or a truncated frame give an error wrapping
// ErrProtocol or ErrVersion; a connection closed before the first byte
// gives io.EOF.
func readFrame(r io.Reader) (frame, error) {
	var h [HeaderSize]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return frame{}, badFrame("the connection closed %d bytes into a frame header", n)
		}
		return frame{}, err
	}
	if string(h[:4]) != Magic {
		return frame{}, badFrame("the frame starts with %q, not the magic %q", h[:4], Magic)
	}
	if v := binary.BigEndian.Uint16(h[4:]); v != ProtocolVersion {
		return frame{}, &frameError{ErrVersion, fmt.Sprintf("the peer speaks rendezvous protocol version %d, this fsdpc speaks %d: every rank must run the same fsdpc build", v, ProtocolVersion)}
	}
	if h[7] != 0 {
		return frame{}, badFrame("reserved header byte is %#x, not 0", h[7])
	}
	n := binary.BigEndian.Uint32(h[8:])
	if n > MaxPayload {
		return frame{}, badFrame("a %s frame claims %d payload bytes, more than the %d allowed", msgType(h[6]), n, MaxPayload)
	}
	f := frame{typ: msgType(h[6]), payload: make([]byte, n)}
	if _, err := io.ReadFull(r, f.payload); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return frame{}, badFrame("the connection closed inside a %d-byte %s payload", n, f.typ)
		}
		return frame{}, err
	}
	return f, nil
}

// hello is a rank's introduction.
type hello struct {
	rank, world uint32
	plan        [32]byte
	label       string // host:pid, for messages
}

// HELLO payload: rank u32, world u32, plan SHA-256 [32], label length u8,
// label (UTF-8).
func (h hello) encode() []byte {
	label := truncate(h.label, maxLabel)
	b := make([]byte, 0, 41+len(label))
	b = binary.BigEndian.AppendUint32(b, h.rank)
	b = binary.BigEndian.AppendUint32(b, h.world)
	b = append(b, h.plan[:]...)
	b = append(b, byte(len(label)))
	return append(b, label...)
}

func decodeHello(f frame) (hello, error) {
	var h hello
	p := f.payload
	if f.typ != msgHello {
		return h, badFrame("expected a HELLO frame, got %s", f.typ)
	}
	if len(p) < 41 || len(p) != 41+int(p[40]) {
		return h, badFrame("a HELLO payload of %d bytes is malformed", len(p))
	}
	h.rank = binary.BigEndian.Uint32(p)
	h.world = binary.BigEndian.Uint32(p[4:])
	copy(h.plan[:], p[8:40])
	if !utf8.Valid(p[41:]) {
		return h, badFrame("the HELLO label is not UTF-8")
	}
	h.label = string(p[41:])
	return h, nil
}

// welcome is rank 0's answer when every rank has arrived and agrees.
type welcome struct {
	world uint32
	plan  [32]byte
	id    [IDSize]byte
}

// WELCOME payload: world u32, plan SHA-256 [32], ID [128].
func (w welcome) encode() []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+32+IDSize), w.world)
	b = append(b, w.plan[:]...)
	return append(b, w.id[:]...)
}

func decodeWelcome(p []byte) (welcome, error) {
	var w welcome
	if len(p) != 4+32+IDSize {
		return w, badFrame("a WELCOME payload of %d bytes, not %d", len(p), 4+32+IDSize)
	}
	w.world = binary.BigEndian.Uint32(p)
	copy(w.plan[:], p[4:36])
	copy(w.id[:], p[36:])
	return w, nil
}

// REJECT payload: code u8, reason (UTF-8, the rest).
func encodeReject(err error) []byte {
	return append([]byte{rejectCode(err)}, truncate(err.Error(), MaxPayload-1)...)
}

// decodeReject turns a REJECT payload into the error it carries.
func decodeReject(p []byte) error {
	if len(p) < 1 {
		return badFrame("an empty REJECT payload")
	}
	reason := string(p[1:])
	if !utf8.ValidString(reason) {
		reason = fmt.Sprintf("%q", reason)
	}
	return &remoteError{kind: rejectError(p[0]), reason: reason}
}

// remoteError is a failure rank 0 reported.
type remoteError struct {
	kind   error
	reason string
}

func (e *remoteError) Error() string { return "rank 0: " + e.reason }
func (e *remoteError) Unwrap() error { return e.kind }

// BARRIER and RELEASE payloads: the barrier's sequence number, u64.
func encodeSeq(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func decodeSeq(f frame, want msgType) (uint64, error) {
	if f.typ != want {
		return 0, badFrame("expected a %s frame, got %s", want, f.typ)
	}
	if len(f.payload) != 8 {
		return 0, badFrame("a %s payload of %d bytes, not 8", f.typ, len(f.payload))
	}
	return binary.BigEndian.Uint64(f.payload), nil
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
