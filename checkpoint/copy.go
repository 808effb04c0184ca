package checkpoint

// NodeLocal reports whether the storage is each node's own drives, the
// storage a preset or bandwidth without an aggregate limit stands for
// (nvme): a node then reads only the files its own ranks wrote, and a
// load that reads another node's files needs them copied over first. A
// storage with an aggregate limit is a shared file system every node
// reads in place.
func (s Storage) NodeLocal() bool { return s.ReadAggregate == 0 && s.WriteAggregate == 0 }

// Copy is the copy between nodes a reshard on node-local storage needs
// before its load: each new node fetches the parts of other nodes' files
// its ranks read. The load time (Transfer) reads every file from the
// node's own drive and leaves it out.
type Copy struct {
	// Bytes is every node's incoming bytes: the reads of files another
	// node wrote (RankCost.RemoteBytes, summed).
	Bytes int64
	// MaxIn and MaxOut are the most one node receives and sends.
	MaxIn, MaxOut int64
	// Time is the slowest node's copy: what it sends read from its drive
	// at the read rate, what it receives written at the write rate, the
	// two overlapping (a 400 Gb/s NIC, 50 GB/s, outruns one NVMe drive,
	// so the drives set the pace). Zero on shared storage, which needs no
	// copy.
	Time float64
}

// CrossNodeCopy is the copy the reshard's load needs before it starts on
// node-local storage (on shared storage, the bytes with a zero Time).
// Nodes are gpus_per_node consecutive ranks, and new node n is the
// machine old node n was, as RankBytes counts remote reads.
func (rs *Reshard) CrossNodeCopy(st Storage) Copy {
	oldG, newG := rs.Old.GPUsPerNode, rs.New.GPUsPerNode
	nodes := max((rs.New.World()+newG-1)/newG, (rs.Old.World()+oldG-1)/oldG)
	in, out := make([]int64, nodes), make([]int64, nodes)
	// count[n] is the number of new ranks on node n.
	count := make([]int64, nodes)
	var c Copy
	for r := range rs.New.World() {
		node := r / newG
		count[node]++
		b := rs.common.remote(node)
		for _, e := range rs.class(r).own.byNode {
			if e.node != node {
				out[e.node] += e.bytes
				b += e.bytes
			}
		}
		in[node] += b
		c.Bytes += b
	}
	// Every new rank reads the replicated tensors: old node n sends them
	// to each rank not on node n.
	for _, e := range rs.common.byNode {
		out[e.node] += e.bytes * (int64(rs.New.World()) - count[e.node])
	}
	for n := range nodes {
		c.MaxIn, c.MaxOut = max(c.MaxIn, in[n]), max(c.MaxOut, out[n])
		if st.NodeLocal() && st.ReadPerNode > 0 && st.WritePerNode > 0 {
			c.Time = max(c.Time, float64(out[n])/st.ReadPerNode, float64(in[n])/st.WritePerNode)
		}
	}
	return c
}
