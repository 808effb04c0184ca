package checkpoint

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/ir"
)

// Storage is where a checkpoint goes: sequential write and read rates per
// node, and the most the whole file system sustains across nodes (0: no
// limit beyond the nodes', as with node-local drives).
type Storage struct {
	Name                          string
	WritePerNode, ReadPerNode     float64 // bytes/s
	WriteAggregate, ReadAggregate float64 // bytes/s, 0 for none
}

// Presets are the documented defaults (docs/checkpoint.md, "Storage").
var Presets = map[string]Storage{
	// One PCIe Gen4 U.2 data-center NVMe drive per node: Samsung PM1733
	// datasheet, sequential write 3,800 MB/s and read 7,000 MB/s. Each
	// node writes its own drive, so there is no aggregate limit.
	"nvme": {Name: "nvme", WritePerNode: 3.8e9, ReadPerNode: 7.0e9},
	// A shared parallel file system sized as NVIDIA's DGX SuperPOD (H100)
	// reference architecture's "best" storage tier: single-node read 40
	// GB/s and write 20 GB/s, one scalable unit (32 nodes) aggregate read
	// 250 GB/s and write 125 GB/s (RA-11333-001, storage performance
	// requirements table).
	"shared": {Name: "shared", WritePerNode: 20e9, ReadPerNode: 40e9, WriteAggregate: 125e9, ReadAggregate: 250e9},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(Presets)) }

// ParseStorage reads a preset name or a bandwidth per node ("5GB/s", both
// read and write); aggregate, if not empty, caps the whole file system.
func ParseStorage(s, aggregate string) (Storage, error) {
	st, ok := Presets[s]
	if !ok {
		bw, err := ir.ParseBandwidth(s)
		if err != nil {
			return Storage{}, fmt.Errorf("--storage %q: a preset (%s) or a bandwidth per node: %w", s, strings.Join(PresetNames(), ", "), err)
		}
		if err := bandwidthInRange(bw); err != nil {
			return Storage{}, fmt.Errorf("--storage %q: %w", s, err)
		}
		st = Storage{Name: s, WritePerNode: bw, ReadPerNode: bw}
	}
	if aggregate != "" {
		bw, err := ir.ParseBandwidth(aggregate)
		if err != nil {
			return Storage{}, fmt.Errorf("--aggregate %q: %w", aggregate, err)
		}
		if err := bandwidthInRange(bw); err != nil {
			return Storage{}, fmt.Errorf("--aggregate %q: %w", aggregate, err)
		}
		st.WriteAggregate, st.ReadAggregate = bw, bw
	}
	return st, nil
}

// Bandwidths fsdpc takes for storage: from a slow disk (1 MB/s) to far
// beyond any file system (1 PB/s). Outside them the figures printed are
// meaningless (a 300-digit save time, "+Inf GB/s").
const minBandwidth, maxBandwidth = 1e6, 1e15

func bandwidthInRange(bw float64) error {
	if !(bw >= minBandwidth && bw <= maxBandwidth) {
		return fmt.Errorf("the bandwidth must be from 1 MB/s to 1 PB/s")
	}
	return nil
}

// nodeRate is one node's share when nodes nodes transfer at once: its own
// rate, or an equal part of the aggregate if that is lower.
func nodeRate(perNode, aggregate float64, nodes int) float64 {
	if aggregate > 0 && aggregate/float64(nodes) < perNode {
		return aggregate / float64(nodes)
	}
	return perNode
}

// RankCost is one rank's part of a save or load.
type RankCost struct {
	Rank          int
	ModelBytes    int64 // written (save) or read (load)
	OptimBytes    int64
	RemoteBytes   int64 // load: read from files another node wrote
	HostCopyBytes int64 // the part that crosses the GPU's host link
	Files         int
	Time          float64 // this rank alone at its share of its node
}

// Bytes is the rank's model and optimizer bytes.
func (c RankCost) Bytes() int64 { return c.ModelBytes + c.OptimBytes }

// Transfer is a save or a load over all ranks.
type Transfer struct {
	Ranks []RankCost
	// Nodes[n] is node n's bytes; Rate the rate each node gets with all
	// nodes transferring; Time the whole transfer: the slowest node's
	// storage time plus its ranks' slowest host copy.
	Nodes []int64
	Rate  float64
	Time  float64
}

// Estimate is the cost of a plan's checkpoint.
type Estimate struct {
	Storage      Storage
	Model, Optim int64 // the whole checkpoint
	Save, Load   Transfer
	// Async save (torch.distributed.checkpoint.async_save): every rank
	// first copies its state into host memory (StagingBytes per rank, the
	// largest; NodeStaging per node, the largest), which stalls the step
	// by Stall; the files are written in the background in Save.Time less
	// the staging.
	StagingBytes, NodeStaging int64
	Stall                     float64
}

// Estimate predicts saving the layout's checkpoint and loading it back
// under the same plan. A save moves each rank's written chunks from
// device to host (at the plan's host bandwidth, skipped for offloaded
// state) and then to storage; its node shares its storage rate equally
// among its ranks. A load reads every rank's own chunks (each HSDP replica
// its own copy) and copies them to the device.
func (l *Layout) Estimate(st Storage) *Estimate {
	e := &Estimate{Storage: st}
	e.Model, e.Optim = l.Totals()
	world := l.World()
	save := make([]RankCost, world)
	for r, w := range l.rankWrites() {
		save[r] = RankCost{Rank: r, ModelBytes: w.model, OptimBytes: w.optim, HostCopyBytes: w.device, Files: 1}
	}
	save[0].Files++ // .metadata
	e.Save = l.transfer(save, st.WritePerNode, st.WriteAggregate)
	self, _ := Plan(l, l)
	e.Load = self.Transfer(st)
	for _, c := range save {
		e.StagingBytes = max(e.StagingBytes, c.Bytes())
		if l.HostBandwidth > 0 {
			e.Stall = max(e.Stall, float64(c.HostCopyBytes)/l.HostBandwidth)
		}
	}
	for n := range e.Save.Nodes {
		var b int64
		for r := n * l.GPUsPerNode; r < min(world, (n+1)*l.GPUsPerNode); r++ {
			b += save[r].Bytes()
		}
		e.NodeStaging = max(e.NodeStaging, b)
	}
	return e
}

// Transfer is the cost of the reshard's reads at a storage's read rates.
func (rs *Reshard) Transfer(st Storage) Transfer {
	l := rs.New
	ranks := make([]RankCost, l.World())
	for r := range ranks {
		cl, node := rs.class(r), r/l.GPUsPerNode
		own := &cl.own
		ranks[r] = RankCost{Rank: r, ModelBytes: rs.common.model + own.model, OptimBytes: rs.common.optim + own.optim,
			HostCopyBytes: rs.common.device + own.device, Files: cl.files, RemoteBytes: rs.common.remote(node) + own.remote(node)}
	}
	return l.transfer(ranks, st.ReadPerNode, st.ReadAggregate)
}

// transfer fills in times: rank r's storage time at an equal share of its
// node's rate, plus its host copy; the whole transfer takes the slowest
// node's storage time plus the slowest host copy on it.
func (l *Layout) transfer(ranks []RankCost, perNode, aggregate float64) Transfer {
	G := l.GPUsPerNode
	nodes := (len(ranks) + G - 1) / G
	t := Transfer{Ranks: ranks, Nodes: make([]int64, nodes), Rate: nodeRate(perNode, aggregate, nodes)}
	for n := range nodes {
		var copyTime float64
		lo, hi := n*G, min(len(ranks), (n+1)*G)
		for r := lo; r < hi; r++ {
			c := &ranks[r]
			t.Nodes[n] += c.Bytes()
			var h float64
			if l.HostBandwidth > 0 {
				h = float64(c.HostCopyBytes) / l.HostBandwidth
			}
			copyTime = max(copyTime, h)
			c.Time = h + float64(c.Bytes())/(t.Rate/float64(hi-lo))
		}
		t.Time = max(t.Time, copyTime+float64(t.Nodes[n])/t.Rate)
	}
	return t
}
