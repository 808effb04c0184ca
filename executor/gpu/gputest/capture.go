package gputest

import (
	"container/heap"
	"fmt"
	"slices"

	"github.com/fsdpc/fsdpc/executor/gpu"
)

// capture is a stream capture in progress.
type capture struct {
	origin *stream
	// streams are the members, the origin first; member i is thread i+1
	// of the capture's vector clocks (thread 0 stays unused).
	streams []*stream
	nodes   []*node
	err     error // the first error that invalidated the capture
	ended   bool
	shadows map[*alloc]*shadow // the capture's own access histories (race detection)
}

// node is one captured kernel: it runs after deps, indices in nodes.
type node struct {
	k      *kernel
	deps   []int
	stream gpu.Stream
}

// graph is an ended capture: its nodes and the order replays run them in.
type graph struct {
	nodes []*node
	order []int
}

func (c *capture) invalidate(err error) {
	if c.err == nil {
		c.err = err
	}
}

// BeginCapture puts s in capture mode.
func (d *Device) BeginCapture(s gpu.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	call := fmt.Sprintf("BeginCapture(stream %d)", s)
	st, err := d.stream(call, s)
	if err != nil {
		return err
	}
	if st.cap != nil {
		return fmt.Errorf("gputest: %s: the stream is already capturing (begun on stream %d): %w", call, st.cap.origin.id, ErrCapture)
	}
	c := &capture{origin: st, streams: []*stream{st}}
	if d.cfg.race {
		c.shadows = map[*alloc]*shadow{}
	}
	st.cap, st.capIdx, st.capTail, st.capVC = c, 1, nil, nil
	return nil
}

// joinCapture is a Wait by st on a record r made in a capture. d.mu is
// held.
func (d *Device) joinCapture(call string, st *stream, r *record) error {
	c := r.cap
	switch st.cap {
	case nil:
		c.streams = append(c.streams, st)
		st.cap, st.capIdx, st.capTail, st.capVC = c, len(c.streams), r.tail, r.capVC
	case c:
		st.capTail = union(st.capTail, r.tail)
		st.capVC = st.capVC.join(r.capVC)
	default:
		err := fmt.Errorf("gputest: %s: stream %d, capturing for stream %d, waits on an event recorded in stream %d's capture: %w",
			call, st.id, st.cap.origin.id, c.origin.id, ErrCapture)
		st.cap.invalidate(err)
		c.invalidate(err)
		return err
	}
	return nil
}

// union is the sorted union of two sets of node indices, a new slice.
func union(a, b []int) []int {
	u := slices.Concat(a, b)
	slices.Sort(u)
	return slices.Compact(u)
}

// captureKernel records k as a node of st's capture. d.mu is held.
func (d *Device) captureKernel(st *stream, k *kernel) {
	c := st.cap
	idx := len(c.nodes)
	c.nodes = append(c.nodes, &node{k: k, deps: st.capTail, stream: st.id})
	st.capTail = []int{idx}
	if !d.cfg.race {
		return
	}
	st.capVC = st.capVC.tick(st.capIdx)
	name := func(t int) string { return fmt.Sprintf("captured stream %d", c.streams[t-1].id) }
	for _, write := range []bool{false, true} {
		for _, x := range k.acc {
			if x.write != write || x.n == 0 {
				continue
			}
			a, off, err := d.resolve(x.p, x.n)
			if err != nil {
				continue // the launch will report it
			}
			sh := c.shadows[a]
			if sh == nil {
				sh = newShadow(a.size)
				c.shadows[a] = sh
			}
			if err := hazard(a, sh, off, x.n, write, st.capIdx, st.capVC, name); err != nil {
				c.invalidate(fmt.Errorf("gputest: %s captured on stream %d: %w (%w)", k.kind, st.id, err, ErrCapture))
				return
			}
		}
	}
}

// EndCapture ends the capture begun on s and returns its graph. Every
// stream that joined the capture must have been joined back into s: each
// captured kernel must come before s's last captured work.
func (d *Device) EndCapture(s gpu.Stream) (gpu.Graph, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	call := fmt.Sprintf("EndCapture(stream %d)", s)
	st, err := d.stream(call, s)
	if err != nil {
		return 0, err
	}
	c := st.cap
	switch {
	case c == nil:
		return 0, fmt.Errorf("gputest: %s: the stream is not capturing: %w", call, ErrCapture)
	case c.origin != st:
		return 0, fmt.Errorf("gputest: %s: the stream joined the capture begun on stream %d, which must end it: %w", call, c.origin.id, ErrCapture)
	}
	tail := st.capTail
	for _, m := range c.streams {
		m.cap, m.capIdx, m.capTail, m.capVC = nil, 0, nil, nil
	}
	c.ended = true
	if c.err != nil {
		return 0, fmt.Errorf("gputest: %s: the capture was invalidated: %w", call, c.err)
	}
	joined := make([]bool, len(c.nodes))
	for stack := slices.Clone(tail); len(stack) > 0; {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !joined[i] {
			joined[i] = true
			stack = append(stack, c.nodes[i].deps...)
		}
	}
	for i, n := range c.nodes {
		if !joined[i] {
			return 0, fmt.Errorf("gputest: %s: stream %d's captured %s (node %d) is not joined back into stream %d (record an event on stream %d after it and wait on it on stream %d): %w (unjoined)",
				call, n.stream, n.k.kind, i, s, n.stream, s, ErrCapture)
		}
	}
	d.graphs = append(d.graphs, &graph{nodes: c.nodes, order: replayOrder(c.nodes)})
	return gpu.Graph(len(d.graphs)), nil
}

// replayOrder is a topological order of the nodes that runs the most
// recently captured ready node first: as unlike the capture order as the
// edges allow, so that a missing edge changes the result.
func replayOrder(nodes []*node) []int {
	succ := make([][]int, len(nodes))
	pending := make([]int, len(nodes))
	for i, n := range nodes {
		for _, p := range n.deps {
			succ[p] = append(succ[p], i)
		}
		pending[i] = len(n.deps)
	}
	ready := &maxHeap{}
	for i, p := range pending {
		if p == 0 {
			heap.Push(ready, i)
		}
	}
	order := make([]int, 0, len(nodes))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, i)
		for _, j := range succ[i] {
			if pending[j]--; pending[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	return order
}

type maxHeap []int

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// LaunchGraph enqueues a replay of g on s: after s's earlier work, before
// its later work.
func (d *Device) LaunchGraph(g gpu.Graph, s gpu.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	call := fmt.Sprintf("LaunchGraph(graph %d, stream %d)", g, s)
	st, err := d.stream(call, s)
	if err != nil {
		return err
	}
	if g < 1 || int(g) > len(d.graphs) {
		return fmt.Errorf("gputest: %s: %w", call, ErrInvalidHandle)
	}
	if st.cap != nil {
		return fmt.Errorf("gputest: %s: launching a graph into a capturing stream is not supported: %w", call, ErrCapture)
	}
	gr := d.graphs[g-1]
	it := &item{graph: gr, nodeBufs: make([][][]byte, len(gr.nodes)), nodeErrs: make([]error, len(gr.nodes))}
	if d.cfg.race {
		st.vc = st.vc.join(d.host).tick(int(st.id))
	}
	for i, n := range gr.nodes {
		label := fmt.Sprintf("%s (node %d of graph %d, launched on stream %d)", n.k.kind, i, g, s)
		it.nodeBufs[i], it.nodeErrs[i] = d.bind(label, st, it, n.k)
		if d.cfg.race && it.nodeErrs[i] == nil {
			d.checkKernel(label, st, n.k)
		}
	}
	d.push(st, it)
	return nil
}

// replay runs a graph launch's nodes in the graph's order. d.mu is not
// held.
func (d *Device) replay(st *stream, it *item) {
	g := it.graph
	for _, i := range g.order {
		d.mu.Lock()
		stop := d.err != nil || d.closed
		if !stop && it.nodeErrs[i] != nil {
			d.fail(it.nodeErrs[i])
			stop = true
		}
		d.mu.Unlock()
		if stop {
			return
		}
		d.runKernel(g.nodes[i].k, it.nodeBufs[i])
	}
	d.mu.Lock()
	d.stats.GraphLaunches++
	d.mu.Unlock()
}
