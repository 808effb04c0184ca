package launch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	planA = sha256.Sum256([]byte("plan A"))
	planB = sha256.Sum256([]byte("plan B"))
	planC = sha256.Sum256([]byte("plan C"))
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

type outcome struct {
	s   *Session
	err error
}

// meet runs one rendezvous per config concurrently: the rank 0 configs
// serve on ln, the others dial it. Rank 0 starts first; delay, if given,
// holds some configs back.
func meet(t *testing.T, ln net.Listener, cfgs []Config, delay ...map[int]time.Duration) []outcome {
	t.Helper()
	out := make([]outcome, len(cfgs))
	var wg sync.WaitGroup
	run := func(i int) {
		c := cfgs[i]
		if c.Rank == 0 {
			c.Listener = ln
		} else if c.Addr == "" {
			c.Addr = ln.Addr().String()
		}
		if c.Label == "" {
			c.Label = fmt.Sprintf("test-%d", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if len(delay) > 0 {
				time.Sleep(delay[0][i])
			}
			s, err := Rendezvous(context.Background(), c)
			out[i] = outcome{s, err}
		}()
	}
	for i, c := range cfgs {
		if c.Rank == 0 {
			run(i)
		}
	}
	for i, c := range cfgs {
		if c.Rank != 0 {
			run(i)
		}
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, o := range out {
			if o.s != nil {
				o.s.Close()
			}
		}
	})
	return out
}

func world(n int, timeout time.Duration) []Config {
	cfgs := make([]Config, n)
	for r := range cfgs {
		cfgs[r] = Config{Rank: r, World: n, PlanHash: planA, Timeout: timeout}
	}
	return cfgs
}

func TestRendezvousAndBarrier(t *testing.T) {
	const n = 8
	cfgs := world(n, 10*time.Second)
	for i := range cfgs[0].ID {
		cfgs[0].ID[i] = byte(i*7 + 1)
	}
	out := meet(t, listen(t), cfgs)
	for r, o := range out {
		if o.err != nil {
			t.Fatalf("rank %d: %v", r, o.err)
		}
		if o.s.Rank != r || o.s.World != n || o.s.ID != cfgs[0].ID || o.s.PlanHash != planA {
			t.Errorf("rank %d: session %d of %d, ID %x…", r, o.s.Rank, o.s.World, o.s.ID[:4])
		}
	}
	// Barriers, concurrently on every rank; the last one must be the
	// last to return on every rank.
	var wg sync.WaitGroup
	errs := make([]error, n)
	var mu sync.Mutex
	var order []int
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 3 {
				if r == 3 && k == 2 {
					time.Sleep(50 * time.Millisecond) // the last to arrive
				}
				if err := out[r].s.Barrier(context.Background()); err != nil {
					errs[r] = err
					return
				}
			}
			mu.Lock()
			order = append(order, r)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if len(order) != n {
		t.Errorf("finished: %v", order)
	}
	for _, o := range out {
		o.s.Close()
	}
	if err := out[1].s.Barrier(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a barrier after Close: %v", err)
	}
}

func TestRendezvousOneRank(t *testing.T) {
	s, err := Rendezvous(context.Background(), Config{World: 1, ID: [IDSize]byte{7}})
	if err != nil || s.ID[0] != 7 || s.Barrier(context.Background()) != nil {
		t.Fatalf("%v %v", s, err)
	}
	if _, err := Rendezvous(context.Background(), Config{Rank: 2, World: 2}); !errors.Is(err, ErrBadRank) {
		t.Errorf("rank 2 of 2: %v", err)
	}
}

// wantAll checks that every outcome failed with kind, quickly, each message
// holding the texts.
func wantAll(t *testing.T, out []outcome, kind error, texts ...string) {
	t.Helper()
	for r, o := range out {
		if o.err == nil {
			t.Errorf("config %d: no error, want %v", r, kind)
			continue
		}
		if !errors.Is(o.err, kind) {
			t.Errorf("config %d: %v; want %v", r, o.err, kind)
		}
		for _, s := range texts {
			if !strings.Contains(o.err.Error(), s) {
				t.Errorf("config %d: %v\nlacks %q", r, o.err, s)
			}
		}
	}
}

func TestRendezvousPlanMismatch(t *testing.T) {
	cfgs := world(8, 10*time.Second)
	cfgs[2].PlanHash, cfgs[5].PlanHash, cfgs[6].PlanHash = planB, planC, planC
	start := time.Now()
	out := meet(t, listen(t), cfgs)
	wantAll(t, out, ErrPlanMismatch,
		"ranks 2, 5, 6 hold a different plan.bin than rank 0",
		fmt.Sprintf("sha256 %x… on ranks 0, 1, 3, 4, 7", planA[:8]),
		fmt.Sprintf("%x… on rank 2", planB[:8]),
		fmt.Sprintf("%x… on ranks 5, 6", planC[:8]))
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s", d)
	}
	// One rank differing.
	cfgs = world(3, 10*time.Second)
	cfgs[1].PlanHash = planB
	wantAll(t, meet(t, listen(t), cfgs), ErrPlanMismatch, "rank 1 holds a different plan.bin than rank 0")
}

func TestRendezvousDuplicateRank(t *testing.T) {
	cfgs := world(4, 10*time.Second) // rank 3 never comes; the duplicate fails it at once
	cfgs[3].Rank = 2
	start := time.Now()
	out := meet(t, listen(t), cfgs, map[int]time.Duration{3: 200 * time.Millisecond})
	wantAll(t, out, ErrDuplicateRank, "rank 2 arrived twice, as rank 2 (test-")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestRendezvousClaimsRankZero(t *testing.T) {
	ln := listen(t)
	var wg sync.WaitGroup
	var err0 error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err0 = Rendezvous(context.Background(), Config{Rank: 0, World: 2, Listener: ln, Label: "the-real-0", Timeout: 10 * time.Second})
	}()
	// A second "rank 0" speaking the protocol by hand.
	conn := dial(t, ln.Addr().String())
	conn.Write(encodeFrame(msgHello, hello{rank: 0, world: 2, plan: planA, label: "impostor"}.encode()))
	f, err := readFrame(conn)
	wg.Wait()
	if !errors.Is(err0, ErrDuplicateRank) || !strings.Contains(err0.Error(), `rank 0 (impostor at 127.0.0.1:`) || !strings.Contains(err0.Error(), "which is this process (the-real-0)") {
		t.Errorf("rank 0: %v", err0)
	}
	if err != nil || f.typ != msgReject || !errors.Is(decodeReject(f.payload), ErrDuplicateRank) {
		t.Errorf("the impostor got %v %v", f.typ, err)
	}
}

func TestRendezvousMissingRank(t *testing.T) {
	cfgs := world(5, 300*time.Millisecond)
	start := time.Now()
	out := meet(t, listen(t), append(cfgs[:2], cfgs[3])) // ranks 2 and 4 never start
	wantAll(t, out, ErrMissingRanks, "ranks 2, 4 of 5 never reached rank 0 within 300ms")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestRendezvousWorldMismatch(t *testing.T) {
	cfgs := world(3, 10*time.Second)
	cfgs[1].World = 4
	out := meet(t, listen(t), cfgs[:2])
	wantAll(t, out, ErrWorldMismatch, "rank 1 (test-1 at 127.0.0.1:", "has world size 4, rank 0 (test-0) has 3")
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestRendezvousGarbage: connections that are not ranks are told why and
// dropped, and the real ranks still meet.
func TestRendezvousGarbage(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	var wg sync.WaitGroup
	var s0 *Session
	var err0 error
	wg.Add(1)
	go func() {
		defer wg.Done()
		s0, err0 = Rendezvous(context.Background(), Config{Rank: 0, World: 2, Listener: ln, PlanHash: planA, Timeout: 10 * time.Second})
	}()
	header := func(typ byte, n uint32) []byte {
		h := []byte(Magic + "\x00\x01\x00\x00" + "\x00\x00\x00\x00")
		h[6] = typ
		binary.BigEndian.PutUint32(h[8:], n)
		return h
	}
	for _, c := range []struct {
		name string
		send []byte
		want string
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), `starts with "GET ", not the magic "FSRZ"`},
		{"huge", header(1, 1<<30), "a HELLO frame claims 1073741824 payload bytes, more than the 4096 allowed"},
		{"short hello", append(header(1, 3), 1, 2, 3), "a HELLO payload of 3 bytes is malformed"},
		{"not hello", append(header(4, 8), make([]byte, 8)...), "expected a HELLO frame, got BARRIER"},
		{"reserved", append(header(1, 0)[:7], 9, 0, 0, 0, 0), "reserved header byte is 0x9"},
		{"bad label", append(header(1, 42), append(append(make([]byte, 40), 1), 0xff)...), "label is not UTF-8"},
		{"truncated", append(header(1, 100), 1, 2), "closed inside a 100-byte HELLO payload"},
	} {
		conn := dial(t, addr)
		conn.Write(c.send)
		if c.name == "truncated" {
			conn.(*net.TCPConn).CloseWrite()
		}
		f, err := readFrame(conn)
		if err != nil || f.typ != msgReject {
			t.Errorf("%s: got %v, %v; want a REJECT", c.name, f.typ, err)
			continue
		}
		rej := decodeReject(f.payload)
		if !errors.Is(rej, ErrProtocol) || !strings.Contains(rej.Error(), c.want) {
			t.Errorf("%s: %v\nwant %q", c.name, rej, c.want)
		}
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("%s: the connection is still open (%v)", c.name, err)
		}
	}
	// A probe that says nothing.
	dial(t, addr).Close()

	s1, err1 := Rendezvous(context.Background(), Config{Rank: 1, World: 2, Addr: addr, PlanHash: planA, Timeout: 10 * time.Second})
	wg.Wait()
	if err0 != nil || err1 != nil {
		t.Fatalf("after garbage: %v; %v", err0, err1)
	}
	s0.Close()
	s1.Close()
}

func TestRendezvousOtherVersion(t *testing.T) {
	ln := listen(t)
	errc := make(chan error, 1)
	go func() {
		_, err := Rendezvous(context.Background(), Config{Rank: 0, World: 2, Listener: ln, Timeout: 10 * time.Second})
		errc <- err
	}()
	conn := dial(t, ln.Addr().String())
	frame := encodeFrame(msgHello, hello{rank: 1, world: 2}.encode())
	frame[5] = 2 // version 2
	conn.Write(frame)
	err := <-errc
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "speaks rendezvous protocol version 2, this fsdpc speaks 1") {
		t.Errorf("rank 0: %v", err)
	}
	if f, err := readFrame(conn); err != nil || !errors.Is(decodeReject(f.payload), ErrVersion) {
		t.Errorf("the rank: %v", err)
	}
}

func TestRendezvousRankOutOfRange(t *testing.T) {
	ln := listen(t)
	errc := make(chan error, 1)
	go func() {
		_, err := Rendezvous(context.Background(), Config{Rank: 0, World: 3, Listener: ln, Timeout: 10 * time.Second})
		errc <- err
	}()
	conn := dial(t, ln.Addr().String())
	conn.Write(encodeFrame(msgHello, hello{rank: 9, world: 3, label: "x"}.encode()))
	if err := <-errc; !errors.Is(err, ErrBadRank) || !strings.Contains(err.Error(), "claims rank 9, not below the world size 3") {
		t.Errorf("rank 0: %v", err)
	}
}

// A rank whose rank 0 never starts gives up at its deadline.
func TestRendezvousNoRankZero(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	start := time.Now()
	_, err := Rendezvous(context.Background(), Config{Rank: 1, World: 2, Addr: addr, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrNoMaster) || !strings.Contains(err.Error(), "rank 1: rendezvous at "+addr) ||
		!strings.Contains(err.Error(), "no answer from rank 0 within 300ms") || !strings.Contains(err.Error(), "MASTER_ADDR and MASTER_PORT") {
		t.Errorf("%v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %s", d)
	}
}

// A rank that reaches something other than rank 0 says so.
func TestRendezvousNotRankZero(t *testing.T) {
	ln := listen(t)
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			conn.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
			conn.Close()
		}
	}()
	_, err := Rendezvous(context.Background(), Config{Rank: 1, World: 2, Addr: ln.Addr().String(), Timeout: 5 * time.Second})
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "not fsdpc's rendezvous") {
		t.Errorf("%v", err)
	}
	ln.Close()
}

func TestRendezvousCancel(t *testing.T) {
	ln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() {
		_, err := Rendezvous(ctx, Config{Rank: 0, World: 3, Listener: ln, Timeout: 10 * time.Second})
		errc <- err
	}()
	go func() {
		_, err := Rendezvous(context.Background(), Config{Rank: 1, World: 3, Addr: ln.Addr().String(), Timeout: 10 * time.Second})
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	for range 2 {
		if err := <-errc; !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 0 stopped: context canceled") {
			t.Errorf("%v", err)
		}
	}
	// A rank cancelled while dialling.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Rendezvous(ctx, Config{Rank: 1, World: 2, Addr: "127.0.0.1:1", Timeout: 10 * time.Second}); !errors.Is(err, ErrAborted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled while dialling: %v", err)
	}
}

// A rank that leaves fails every other rank's next barrier, naming it.
func TestBarrierRankLeaves(t *testing.T) {
	out := meet(t, listen(t), world(4, 10*time.Second))
	for r, o := range out {
		if o.err != nil {
			t.Fatalf("rank %d: %v", r, o.err)
		}
	}
	out[2].s.Close() // rank 2's process dies
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for _, r := range []int{0, 1, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = out[r].s.Barrier(context.Background())
		}()
	}
	wg.Wait()
	for _, r := range []int{0, 1, 3} {
		if !errors.Is(errs[r], ErrAborted) || !strings.Contains(errs[r].Error(), "rank 2 left (connection closed) before the barrier") {
			t.Errorf("rank %d: %v", r, errs[r])
		}
		if !strings.Contains(errs[r].Error(), fmt.Sprintf("rank %d: barrier 1: ", r)) {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
	// The session stays broken.
	if err := out[0].s.Barrier(context.Background()); err != errs[0] {
		t.Errorf("after a failed barrier: %v", err)
	}
}

// Rank 0 leaving fails the others' barrier.
func TestBarrierRankZeroLeaves(t *testing.T) {
	out := meet(t, listen(t), world(3, 10*time.Second))
	for r, o := range out {
		if o.err != nil {
			t.Fatalf("rank %d: %v", r, o.err)
		}
	}
	out[0].s.Close()
	for _, r := range []int{1, 2} {
		if err := out[r].s.Barrier(context.Background()); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 0 left") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A barrier that some rank never reaches fails at the deadline, naming it.
func TestBarrierDeadline(t *testing.T) {
	out := meet(t, listen(t), world(3, 10*time.Second))
	for r, o := range out {
		if o.err != nil {
			t.Fatalf("rank %d: %v", r, o.err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- out[1].s.Barrier(context.Background()) }() // no deadline: rank 0 must tell it
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err0 := out[0].s.Barrier(ctx) // rank 2 never comes
	if err0 == nil || !strings.Contains(err0.Error(), "rank 2 had not arrived") {
		t.Errorf("rank 0: %v", err0)
	}
	if err1 := <-errc; err1 == nil || !strings.Contains(err1.Error(), "rank 0: ") || !strings.Contains(err1.Error(), "rank 2 had not arrived") {
		t.Errorf("rank 1: %v", err1)
	}
}

func TestWireRoundTrip(t *testing.T) {
	h := hello{rank: 3, world: 8, plan: planB, label: strings.Repeat("é", 200)} // cut to 255 bytes on a rune boundary
	var buf bytes.Buffer
	writeFrame(&buf, msgHello, h.encode())
	f, err := readFrame(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeHello(f)
	if err != nil || got.rank != 3 || got.world != 8 || got.plan != planB || len(got.label) != 254 || got.label != strings.Repeat("é", 127) {
		t.Errorf("%+v %v", got, err)
	}
	w := welcome{world: 8, plan: planA, id: [IDSize]byte{1, 2, 3}}
	if got, err := decodeWelcome(w.encode()); err != nil || got != w {
		t.Errorf("welcome: %+v %v", got, err)
	}
	long := fmt.Errorf("%w: %s", ErrMissingRanks, strings.Repeat("x", 5000))
	rej := decodeReject(encodeReject(long))
	if !errors.Is(rej, ErrMissingRanks) || len(rej.Error()) > MaxPayload+len("rank 0: ") {
		t.Errorf("reject: %d bytes", len(rej.Error()))
	}
	if seq, err := decodeSeq(frame{msgRelease, encodeSeq(42)}, msgRelease); seq != 42 || err != nil {
		t.Errorf("seq %d %v", seq, err)
	}
	// A pinned frame: the layout of the package documentation.
	b := encodeFrame(msgBarrier, encodeSeq(1))
	if want := "4653525a0001040000000008" + "0000000000000001"; fmt.Sprintf("%x", b) != want {
		t.Errorf("BARRIER 1 = %x, want %s", b, want)
	}
}

// FuzzReadFrame: no input makes the decoders panic.
func FuzzReadFrame(f *testing.F) {
	f.Add(encodeFrame(msgHello, hello{rank: 1, world: 2, label: "a"}.encode()))
	f.Add(encodeFrame(msgWelcome, welcome{}.encode()))
	f.Add(encodeFrame(msgReject, encodeReject(ErrAborted)))
	f.Add(encodeFrame(msgBarrier, encodeSeq(7)))
	f.Add([]byte("FSRZ\x00\x01\x01\x00\xff\xff\xff\xff"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			decodeHello(fr)
			decodeWelcome(fr.payload)
			decodeReject(fr.payload)
			decodeSeq(fr, msgBarrier)
		}
	})
}

// Close from another goroutine ends a barrier that waits forever.
func TestCloseDuringBarrier(t *testing.T) {
	out := meet(t, listen(t), world(3, 10*time.Second))
	for r, o := range out {
		if o.err != nil {
			t.Fatalf("rank %d: %v", r, o.err)
		}
	}
	errc := make(chan error, 2)
	for _, r := range []int{0, 1} { // rank 2 never comes
		go func() { errc <- out[r].s.Barrier(context.Background()) }()
	}
	time.Sleep(50 * time.Millisecond)
	out[0].s.Close()
	for range 2 {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 0 left") && !strings.Contains(err.Error(), "rank 0: barrier 1: rendezvous aborted: the session was closed during the barrier") {
				t.Errorf("%v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a barrier outlived Close")
		}
	}
}

func TestBindAddr(t *testing.T) {
	for addr, want := range map[string]string{"127.0.0.1:5": "127.0.0.1:5", "[::1]:5": "[::1]:5", "localhost:5": "localhost:5", "node7:29500": ":29500", "10.0.0.1:1": ":1"} {
		if got, err := bindAddr(addr); err != nil || got != want {
			t.Errorf("bindAddr(%s) = %s, %v; want %s", addr, got, err, want)
		}
	}
	// Rank 0 on a port another process holds.
	ln := listen(t)
	defer ln.Close()
	_, err := Rendezvous(context.Background(), Config{Rank: 0, World: 2, Addr: ln.Addr().String(), Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "rank 0 cannot listen") || !strings.Contains(err.Error(), "is MASTER_PORT taken") {
		t.Errorf("%v", err)
	}
}
