package launch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsdpc/fsdpc/internal/inputfile"
)

// DefaultTimeout is how long a rendezvous waits for every rank.
const DefaultTimeout = 5 * time.Minute

// Config is one rank's side of the rendezvous.
type Config struct {
	Rank, World int
	// Addr is rank 0's host:port (Env.Addr()). Rank 0 listens on it: on
	// that address when it is a loopback one, else on every interface at
	// its port, as torch's TCPStore does.
	Addr string
	// PlanHash is the SHA-256 of the plan.bin this rank will run
	// (HashFile); every rank must hold the same.
	PlanHash [32]byte
	// ID is the blob rank 0 hands every rank (NCCL's ncclUniqueId); only
	// rank 0's is used.
	ID [IDSize]byte
	// Timeout bounds the whole rendezvous (default DefaultTimeout). Rank 0
	// names the ranks that have not arrived when it expires; a rank that
	// reached rank 0 waits a quarter longer for that verdict.
	Timeout time.Duration
	// Label describes this process in other ranks' messages (default
	// host:pid).
	Label string
	// Listener, for rank 0, is where to accept instead of listening on
	// Addr (tests use an ephemeral port). Rendezvous closes it.
	Listener net.Listener
}

// Session is a completed rendezvous: the agreed world, rank 0's ID, and the
// connections to rank 0 (on rank 0: to every other rank) that Barrier uses.
// Close it when the run ends.
type Session struct {
	Rank, World int
	ID          [IDSize]byte
	PlanHash    [32]byte

	peers   []*peer // rank 0: indexed by rank, nil at 0; other ranks: [0] is rank 0
	mu      sync.Mutex
	seq     uint64
	err     error // sticky: a failed barrier or Close
	closing atomic.Bool
}

// peer is the other end of a connection.
type peer struct {
	conn  net.Conn
	rank  int
	label string
	from  string // remote address
	// planHash is the plan the rank introduced itself with.
	planHash [32]byte
}

func (p *peer) name() string {
	if p.label == "" {
		return fmt.Sprintf("rank %d (at %s)", p.rank, p.from)
	}
	return fmt.Sprintf("rank %d (%s at %s)", p.rank, p.label, p.from)
}

// HashFile returns the SHA-256 of a file: what ranks compare to prove they
// run the same plan.bin.
func HashFile(path string) ([32]byte, error) {
	var sum [32]byte
	f, err := inputfile.Open(path, "a plan.bin file")
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, fmt.Errorf("hashing %s: %w", path, err)
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// Rendezvous meets every other rank at rank 0: rank 0 listens at c.Addr,
// every other rank connects (retrying until the timeout) and introduces
// itself with its rank, world size and plan hash; once all World ranks
// are there, agree on the world and hold the same plan, rank 0 sends each
// the ID. Rank 0 refuses duplicate ranks, ranks out of range, another world
// size, different plans and ranks that have not arrived by the deadline,
// naming them, and every connected rank gets the same error. Cancelling
// ctx aborts it.
func Rendezvous(ctx context.Context, c Config) (*Session, error) {
	if c.World < 1 || c.Rank < 0 || c.Rank >= c.World {
		return nil, fmt.Errorf("rendezvous: rank %d of %d: %w", c.Rank, c.World, ErrBadRank)
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Label == "" {
		host, _ := os.Hostname()
		c.Label = host + ":" + strconv.Itoa(os.Getpid())
	}
	if c.Listener != nil {
		c.Addr = c.Listener.Addr().String()
	}
	s := &Session{Rank: c.Rank, World: c.World, PlanHash: c.PlanHash}
	if c.World == 1 {
		if c.Listener != nil {
			c.Listener.Close()
		}
		s.ID = c.ID
		return s, nil
	}
	var err error
	if c.Rank == 0 {
		err = s.serve(ctx, c)
	} else {
		err = s.join(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("rank %d: rendezvous at %s: %w", c.Rank, c.Addr, err)
	}
	return s, nil
}

// bindAddr is where rank 0 listens for addr: addr itself when its host is
// a loopback address, else every interface at addr's port.
func bindAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return addr, nil
	}
	return net.JoinHostPort("", port), nil
}

// lingerRead is how long rank 0, once it has decided, still reads a
// connection it has not taken (its HELLO in flight) before answering it.
const lingerRead = 200 * time.Millisecond

// arrival is a connection's first frame, read by its own goroutine.
type arrival struct {
	p   *peer
	h   hello
	err error
}

// serve is rank 0's side.
func (s *Session) serve(ctx context.Context, c Config) error {
	ln := c.Listener
	if ln == nil {
		bind, err := bindAddr(c.Addr)
		if err == nil {
			ln, err = net.Listen("tcp", bind)
		}
		if err != nil {
			return fmt.Errorf("rank 0 cannot listen: %v (is MASTER_PORT taken, by another job perhaps?)", err)
		}
	}
	deadline := time.Now().Add(c.Timeout)

	arrivals := make(chan arrival)
	done := make(chan struct{}) // the loop below has decided
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		open    = map[net.Conn]bool{} // accepted, not handed to the loop
		decided bool
		verdict error // for connections the loop never took
	)
	// abandon answers a connection the loop did not take: the failure, or
	// that the rendezvous completed without it.
	abandon := func(conn net.Conn) {
		mu.Lock()
		v := verdict
		mu.Unlock()
		refuse(conn, v)
		conn.Close()
	}
	wg.Add(1)
	go func() { // the acceptor
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				select {
				case <-done:
					return
				case <-time.After(10 * time.Millisecond): // a transient failure (EMFILE)
					continue
				}
			}
			mu.Lock()
			open[conn] = true
			if decided {
				conn.SetDeadline(time.Now().Add(lingerRead))
			} else {
				conn.SetDeadline(deadline)
			}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := arrival{p: &peer{conn: conn, rank: -1, from: conn.RemoteAddr().String()}}
				var f frame
				if f, a.err = readFrame(conn); a.err == nil {
					a.h, a.err = decodeHello(f)
				}
				select {
				case <-done:
					abandon(conn)
					return
				default:
				}
				if a.err != nil && !errors.Is(a.err, ErrVersion) {
					// Not a rank (a port scanner, a health check, a
					// rank that gave up): tell it why and drop it.
					if a.err != io.EOF {
						refuse(conn, fmt.Errorf("%w: %v", ErrProtocol, a.err))
					}
					conn.Close()
				}
				select {
				case arrivals <- a:
				case <-done:
					abandon(conn)
				}
			}()
		}
	}()

	peers := make([]*peer, c.World)
	var refused []*peer // connections refused along with a failure
	var strays []string // connections that were not ranks
	arrived := 1
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var fail error
	for fail == nil && arrived < c.World {
		select {
		case a := <-arrivals:
			mu.Lock()
			delete(open, a.p.conn)
			mu.Unlock()
			p, h := a.p, a.h
			if a.err != nil {
				if errors.Is(a.err, ErrVersion) {
					fail = fmt.Errorf("a rank at %s: %w", p.from, a.err)
					refused = append(refused, p)
					break
				}
				// Not a rank, refused already: keep waiting for the ranks.
				why := a.err
				if a.err == io.EOF {
					why = errors.New("closed without a word")
				}
				if len(strays) < 4 {
					strays = append(strays, fmt.Sprintf("%s (%v)", p.from, why))
				}
				continue
			}
			p.rank, p.label, p.planHash = int(h.rank), h.label, h.plan
			switch {
			case int(h.world) != c.World:
				fail = fmt.Errorf("%w: %s has world size %d, rank 0 (%s) has %d", ErrWorldMismatch, p.name(), h.world, c.Label, c.World)
			case h.rank >= uint32(c.World):
				fail = fmt.Errorf("%w: a rank (%s at %s) claims rank %d, not below the world size %d", ErrBadRank, h.label, p.from, h.rank, c.World)
			case h.rank == 0:
				fail = fmt.Errorf("%w: %s claims rank 0, which is this process (%s)", ErrDuplicateRank, p.name(), c.Label)
			case peers[h.rank] != nil:
				fail = fmt.Errorf("%w: rank %d arrived twice, as %s and as %s", ErrDuplicateRank, h.rank, peers[h.rank].name(), p.name())
			default:
				peers[h.rank] = p
				arrived++
				continue
			}
			refused = append(refused, p)
		case <-timer.C:
			var missing []int
			for r := 1; r < c.World; r++ {
				if peers[r] == nil {
					missing = append(missing, r)
				}
			}
			fail = fmt.Errorf("%w: %s of %d never reached rank 0 within %s", ErrMissingRanks, rankList(missing), c.World, c.Timeout)
			if plans := checkPlans(c, peers); plans != nil {
				fail = fmt.Errorf("%w; and %w", fail, plans)
			}
			if len(strays) > 0 {
				fail = fmt.Errorf("%w (connections that were not ranks: %s)", fail, strings.Join(strays, ", "))
			}
		case <-ctx.Done():
			fail = fmt.Errorf("%w: rank 0 stopped: %w", ErrAborted, context.Cause(ctx))
		}
	}
	if fail == nil {
		fail = checkPlans(c, peers)
	}

	// Stop accepting; the connections not handed over read what they
	// were sent, briefly, and get the verdict.
	mu.Lock()
	decided = true
	verdict = fail
	if fail == nil {
		verdict = fmt.Errorf("%w: the rendezvous completed without this connection: all %d ranks had arrived", ErrDuplicateRank, c.World)
	}
	for conn := range open {
		conn.SetDeadline(time.Now().Add(lingerRead))
	}
	mu.Unlock()
	close(done)
	ln.Close()
	wg.Wait()

	if fail == nil {
		msg := encodeFrame(msgWelcome, welcome{world: uint32(c.World), plan: c.PlanHash, id: c.ID}.encode())
		for _, p := range peers[1:] {
			p.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := p.conn.Write(msg); err != nil {
				fail = fmt.Errorf("%w: %s left before the rendezvous completed: %v", ErrAborted, p.name(), err)
				break
			}
		}
	}
	if fail != nil {
		var wg sync.WaitGroup
		for _, p := range append(peers[1:], refused...) {
			if p != nil {
				wg.Go(func() {
					refuse(p.conn, fail)
					p.conn.Close()
				})
			}
		}
		wg.Wait()
		return fail
	}
	for _, p := range peers[1:] {
		p.conn.SetDeadline(time.Time{})
	}
	s.ID = c.ID
	s.peers = peers
	return nil
}

// reject tells a peer why it is refused, if it still listens.
func reject(conn net.Conn, err error) {
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	writeFrame(conn, msgReject, encodeReject(err))
}

// refuse sends a REJECT, then reads what the peer sent that was not read
// (briefly) before the caller closes the connection: closing with unread
// data resets it, and the peer could lose the REJECT.
func refuse(conn net.Conn, err error) {
	reject(conn, err)
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	io.Copy(io.Discard, io.LimitReader(conn, 1<<20))
}

// checkPlans names the ranks whose plan differs from rank 0's, with every
// distinct hash and who holds it.
func checkPlans(c Config, peers []*peer) error {
	holders := map[[32]byte][]int{c.PlanHash: {0}}
	var hashes [][32]byte
	var differ []int
	for r, p := range peers {
		if r == 0 || p == nil {
			continue
		}
		h := p.planHash
		if _, ok := holders[h]; !ok {
			hashes = append(hashes, h)
		}
		holders[h] = append(holders[h], r)
		if h != c.PlanHash {
			differ = append(differ, r)
		}
	}
	if len(differ) == 0 {
		return nil
	}
	parts := []string{fmt.Sprintf("sha256 %x… on %s", c.PlanHash[:8], rankList(holders[c.PlanHash]))}
	for _, h := range hashes {
		if h != c.PlanHash {
			parts = append(parts, fmt.Sprintf("%x… on %s", h[:8], rankList(holders[h])))
		}
	}
	verb := "hold"
	if len(differ) == 1 {
		verb = "holds"
	}
	return fmt.Errorf("%w: %s %s a different plan.bin than rank 0 (%s); every rank must run the same plan", ErrPlanMismatch, rankList(differ), verb, strings.Join(parts, "; "))
}

// rankList writes ranks compactly: "rank 3", "ranks 1, 4-7".
func rankList(ranks []int) string {
	rs := append([]int(nil), ranks...)
	sort.Ints(rs)
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(rs[i]))
		case j == i+1:
			parts = append(parts, strconv.Itoa(rs[i]), strconv.Itoa(rs[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		}
		i = j + 1
	}
	if len(rs) == 1 {
		return "rank " + parts[0]
	}
	return "ranks " + strings.Join(parts, ", ")
}

// join is the side of every rank but 0.
func (s *Session) join(ctx context.Context, c Config) error {
	deadline := time.Now().Add(c.Timeout)
	var conn net.Conn
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		d := net.Dialer{Deadline: deadline}
		var err error
		conn, err = d.DialContext(ctx, "tcp", c.Addr)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: no answer from rank 0 within %s (last: %v); is rank 0 running, and do MASTER_ADDR and MASTER_PORT name its node on every rank?", ErrNoMaster, c.Timeout, err)
		}
		select {
		case <-time.After(min(backoff, time.Until(deadline))):
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
		}
	}
	// Wait past the deadline for rank 0's verdict, which names whoever is
	// missing.
	wait := c.Timeout + min(c.Timeout/4, 30*time.Second)
	conn.SetDeadline(time.Now().Add(wait))
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	fail := func(err error) error {
		conn.Close()
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
		}
		return err
	}
	if err := writeFrame(conn, msgHello, hello{rank: uint32(c.Rank), world: uint32(c.World), plan: c.PlanHash, label: c.Label}.encode()); err != nil {
		return fail(fmt.Errorf("%w: sending to rank 0: %v", ErrAborted, err))
	}
	f, err := readFrame(conn)
	var ne net.Error
	switch {
	case err == io.EOF || errors.Is(err, net.ErrClosed):
		return fail(fmt.Errorf("%w: rank 0 closed the connection without an answer", ErrAborted))
	case errors.As(err, &ne) && ne.Timeout():
		return fail(fmt.Errorf("%w: rank 0 gave no answer within %s: it is waiting for ranks that have not arrived", ErrMissingRanks, wait))
	case err != nil:
		var fe *frameError
		if errors.As(err, &fe) {
			return fail(fmt.Errorf("rank 0's address answered with something that is not fsdpc's rendezvous: %w", err))
		}
		return fail(fmt.Errorf("%w: reading rank 0's answer: %v", ErrAborted, err))
	case f.typ == msgReject:
		return fail(decodeReject(f.payload))
	case f.typ != msgWelcome:
		return fail(badFrame("rank 0 answered with a %s frame, not WELCOME or REJECT", f.typ))
	}
	w, err := decodeWelcome(f.payload)
	if err != nil {
		return fail(err)
	}
	if int(w.world) != c.World || w.plan != c.PlanHash {
		return fail(badFrame("rank 0 welcomed world %d, plan %x…; this rank has world %d, plan %x…", w.world, w.plan[:8], c.World, c.PlanHash[:8]))
	}
	conn.SetDeadline(time.Time{})
	s.ID = w.id
	s.peers = []*peer{{conn: conn, rank: 0, from: c.Addr}}
	return nil
}

// Barrier returns once every rank has called it as often as this one, or
// fails: a rank that left (its connection closed), ctx done, or rank 0
// aborting. A failed barrier breaks the session: every later call returns
// the same error, and every other rank's barrier fails too, naming the
// rank that left. Calls must not overlap.
func (s *Session) Barrier(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.World == 1 {
		return nil
	}
	s.seq++
	dl, _ := ctx.Deadline() // zero: none
	for _, p := range s.peers {
		if p != nil {
			p.conn.SetDeadline(dl)
		}
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		for _, p := range s.peers {
			if p != nil {
				p.conn.SetDeadline(time.Now())
			}
		}
	})
	var err error
	if s.Rank == 0 {
		err = s.barrierRoot(ctx)
	} else {
		err = s.barrierLeaf(ctx)
	}
	if !stop() {
		<-fired // so that clearing the deadlines below comes after it
	}
	if err != nil && s.closing.Load() {
		err = fmt.Errorf("%w: the session was closed during the barrier", ErrAborted)
	}
	if err != nil {
		s.err = fmt.Errorf("rank %d: barrier %d: %w", s.Rank, s.seq, err)
		s.closeConns()
		return s.err
	}
	for _, p := range s.peers {
		if p != nil {
			p.conn.SetDeadline(time.Time{})
		}
	}
	return nil
}

func (s *Session) barrierRoot(ctx context.Context) error {
	type result struct {
		rank int
		err  error
	}
	results := make(chan result, s.World)
	for r := 1; r < s.World; r++ {
		p := s.peers[r]
		go func() {
			f, err := readFrame(p.conn)
			if err == nil {
				var seq uint64
				if seq, err = decodeSeq(f, msgBarrier); err == nil && seq != s.seq {
					err = badFrame("%s is at barrier %d, rank 0 at %d", p.name(), seq, s.seq)
				}
			}
			results <- result{r, err}
		}()
	}
	var left, late []int
	var broke *result // a rank that sent something else
	for range s.World - 1 {
		res := <-results
		if res.err == nil {
			continue
		}
		if len(left)+len(late) == 0 && broke == nil {
			// The first failure: stop waiting for the others.
			for _, p := range s.peers[1:] {
				p.conn.SetReadDeadline(time.Now())
			}
		}
		var ne net.Error
		switch {
		case errors.As(res.err, &ne) && ne.Timeout():
			late = append(late, res.rank)
		case isClosed(res.err):
			left = append(left, res.rank)
		case broke == nil:
			broke = &res
		}
	}
	var fail error
	switch {
	case broke != nil:
		fail = fmt.Errorf("%w: %s broke the protocol: %v", ErrAborted, s.peers[broke.rank].name(), broke.err)
	case len(left) > 0:
		fail = fmt.Errorf("%w: %s left (connection closed) before the barrier", ErrAborted, rankList(left))
	case len(late) > 0 && ctx.Err() != nil:
		fail = fmt.Errorf("%w: %s had not arrived when it stopped: %w", ErrAborted, rankList(late), context.Cause(ctx))
	case len(late) > 0:
		fail = fmt.Errorf("%w: %s had not arrived by the deadline", ErrMissingRanks, rankList(late))
	}
	if fail == nil {
		msg := encodeFrame(msgRelease, encodeSeq(s.seq))
		for _, p := range s.peers[1:] {
			if _, err := p.conn.Write(msg); err != nil {
				fail = fmt.Errorf("%w: %s left during the barrier: %v", ErrAborted, p.name(), err)
				break
			}
		}
	}
	if fail != nil {
		for _, p := range s.peers[1:] {
			reject(p.conn, fail)
		}
	}
	return fail
}

func isClosed(err error) bool {
	return err == io.EOF || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (s *Session) barrierLeaf(ctx context.Context) error {
	conn := s.peers[0].conn
	if err := writeFrame(conn, msgBarrier, encodeSeq(s.seq)); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
		}
		return fmt.Errorf("%w: rank 0 is gone: %v", ErrAborted, err)
	}
	f, err := readFrame(conn)
	var ne net.Error
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
	case err != nil && errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: rank 0 did not release the barrier by the deadline", ErrMissingRanks)
	case err != nil && isClosed(err):
		return fmt.Errorf("%w: rank 0 left (connection closed) during the barrier", ErrAborted)
	case err != nil:
		return fmt.Errorf("%w: reading from rank 0: %w", ErrAborted, err)
	case f.typ == msgReject:
		return decodeReject(f.payload)
	}
	seq, err := decodeSeq(f, msgRelease)
	if err == nil && seq != s.seq {
		err = badFrame("rank 0 released barrier %d, this rank is at %d", seq, s.seq)
	}
	return err
}

// Close ends the session: a barrier in progress fails, later ones fail
// at once, and the other ranks' barriers fail naming this rank.
func (s *Session) Close() error {
	s.closing.Store(true)
	s.closeConns() // first: it unblocks a barrier holding mu
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = fmt.Errorf("rank %d: %w: the session is closed", s.Rank, ErrAborted)
	}
	return nil
}

// closeConns closes the connections; s.peers does not change after the
// rendezvous, so any goroutine may.
func (s *Session) closeConns() {
	for _, p := range s.peers {
		if p != nil {
			p.conn.Close()
		}
	}
}
