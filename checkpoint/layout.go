package checkpoint

import (
	"fmt"
	"sort"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Layout is the checkpoint of one plan as DCP sees it: every state tensor
// with its global shape and dtype, how it is chunked over the shard group,
// and which rank writes each chunk.
type Layout struct {
	Model     string
	Optimizer string
	// The mesh: rank = r·Shard + k (executor.Topology); with Replicate > 1
	// the replicate groups hold identical chunks.
	Replicate, Shard int
	GPUsPerNode      int
	// HostBandwidth is the plan's device↔host copy rate per GPU, bytes/s:
	// what staging a save and placing a load's bytes cost.
	HostBandwidth float64
	Tensors       []Tensor
	// Writer[t][k] is the rank that writes chunk k of tensor t (k = 0 for
	// a replicated tensor). Only the chunks with elements, which are the
	// first ones, are listed: a k past the end of Writer[t] is a chunk
	// without elements, which nobody writes (dedup.go).
	Writer [][]int
}

// World is the number of ranks.
func (l *Layout) World() int { return l.Replicate * l.Shard }

// Tensor is one entry of the state dict DCP saves.
type Tensor struct {
	// FQN is the flattened state-dict key: "model.<param>" or
	// "optim.state.<param>.<state>".
	FQN   string
	Param string // the parameter's name
	State string // "" for the parameter itself, else the optimizer state
	Group int    // the plan's group
	Shape []int64
	DType ir.DType
	// ShardDim is the dimension chunked over the shard group, with
	// ChunkRows rows per rank; -1 for a tensor every rank holds whole
	// (the optimizer's step count).
	ShardDim  int
	ChunkRows int64
	// Offload: the sharded tensor lives in host memory (CPU offload), so
	// saving it needs no device-to-host copy.
	Offload bool
	// Aliases are the tied parameter's other names (on the owner's model
	// entry); each is an entry of its own too, with the owner as Param.
	Aliases []string
}

// Chunk is a box in a tensor's global index space: per dimension, where it
// starts and how many elements it spans. A 0-d tensor's chunk has no
// dimensions and one element.
type Chunk struct {
	Offsets, Lengths []int64
}

// Numel is the number of elements in the chunk.
func (c Chunk) Numel() int64 {
	n := int64(1)
	for _, l := range c.Lengths {
		n *= l
	}
	return n
}

// Numel is the tensor's number of elements.
func (t *Tensor) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the tensor's size without padding.
func (t *Tensor) Bytes() int64 { return t.Numel() * t.DType.Size() }

// Chunks is how many chunks the tensor is cut into.
func (t *Tensor) Chunks(shard int) int {
	if t.ShardDim < 0 {
		return 1
	}
	return shard
}

// chunkNumel is Chunk(k).Numel() without building the chunk.
func (t *Tensor) chunkNumel(k int) int64 {
	n := int64(1)
	for d, l := range t.Shape {
		if d == t.ShardDim {
			start := min(int64(k)*t.ChunkRows, l)
			l = min(t.ChunkRows, l-start)
		}
		n *= l
	}
	return n
}

// Chunk is the part of the tensor shard index k holds: rows
// [k·c, min((k+1)·c, d)) of the shard dimension (torch.chunk, padding
// excluded), possibly none; a replicated tensor is one whole chunk.
func (t *Tensor) Chunk(k int) Chunk {
	c := Chunk{Offsets: make([]int64, len(t.Shape)), Lengths: append([]int64(nil), t.Shape...)}
	if t.ShardDim < 0 {
		return c
	}
	d := t.Shape[t.ShardDim]
	start := min(int64(k)*t.ChunkRows, d)
	c.Offsets[t.ShardDim] = start
	c.Lengths[t.ShardDim] = min(t.ChunkRows, d-start)
	return c
}

// optimizerStates names the per-element states torch.optim keeps for each
// optimizer fsdpc knows (ir's optimizer table), in the order the optimizer
// creates them, and whether it keeps a scalar step count: torch.optim.Adam
// and AdamW (_init_group: state["step"], "exp_avg", "exp_avg_sq"), SGD with
// momentum ("momentum_buffer"), Lion (lion-pytorch: "exp_avg"). Plain SGD
// keeps nothing; Adafactor's factored rows and columns are O(rows+cols)
// and, like the plan's memory accounting, not modelled.
var optimizerStates = map[string]struct {
	names []string
	step  bool
}{
	"adamw":        {[]string{"exp_avg", "exp_avg_sq"}, true},
	"adam":         {[]string{"exp_avg", "exp_avg_sq"}, true},
	"sgd_momentum": {[]string{"momentum_buffer"}, false},
	"lion":         {[]string{"exp_avg"}, false},
	"sgd":          {nil, false},
	"adafactor":    {nil, false},
}

// stateDTypes maps bytes per element to the dtype of a state: the plan
// records the optimizer's bytes per trainable element (fp32 states: 4 per
// state), not the dtype.
var stateDTypes = map[int64]ir.DType{8: ir.FP64, 4: ir.FP32, 2: ir.BF16, 1: ir.UINT8}

// FromPlan derives the checkpoint layout of a plan. The plan holds all it
// needs: the groups' parameters with their shapes, dtypes, shard
// dimensions and rows per rank, the mesh, and the optimizer with its bytes
// per trainable element.
func FromPlan(p *schedule.Plan) (*Layout, error) {
	c := p.Cluster
	if c.Replicate < 1 || c.Shard < 1 || c.Replicate*c.Shard != c.WorldSize {
		return nil, fmt.Errorf("the plan's mesh is inconsistent: world size %d is not replicate %d × shard %d", c.WorldSize, c.Replicate, c.Shard)
	}
	l := &Layout{Model: p.Header.Model, Optimizer: p.Train.Optimizer, Replicate: c.Replicate, Shard: c.Shard,
		GPUsPerNode: max(1, min(c.GPUsPerNode, c.WorldSize)), HostBandwidth: c.HostBandwidth}
	names, step, opaque, stateType, err := stateSpec(p.Train.Optimizer, p.Train.OptimizerStateBytes)
	if err != nil {
		return nil, err
	}
	W := int64(c.Shard)
	var optim, aliases []Tensor
	for _, at := range stateDictOrder(p) {
		gi := at[0]
		g := &p.Groups[gi]
		gp := g.Params[at[1]]
		if gp.ShardDim < 0 || gp.ShardDim >= len(gp.Shape) {
			return nil, fmt.Errorf("parameter %s: shard dimension %d outside its %d dimensions", gp.Name, gp.ShardDim, len(gp.Shape))
		}
		d := gp.Shape[gp.ShardDim]
		if d < 1 || gp.ChunkRows != (d+W-1)/W {
			return nil, fmt.Errorf("parameter %s: %d rows per rank for %d rows over %d ranks; want ceil(%d/%d)", gp.Name, gp.ChunkRows, d, W, d, W)
		}
		base := Tensor{Param: gp.Name, Group: gi, ShardDim: gp.ShardDim, ChunkRows: gp.ChunkRows, Offload: g.Policy.Offload}
		t := base
		t.FQN, t.Shape, t.DType, t.Aliases = "model."+gp.Name, append([]int64(nil), gp.Shape...), gp.DType, gp.Aliases
		l.Tensors = append(l.Tensors, t)
		for _, a := range gp.Aliases {
			at := t
			at.FQN, at.Aliases = "model."+a, nil
			aliases = append(aliases, at)
		}
		if !gp.RequiresGrad {
			continue
		}
		prefix := "optim.state." + gp.Name + "."
		if step {
			s := base
			s.FQN, s.State, s.DType, s.ShardDim, s.ChunkRows = prefix+"step", "step", ir.FP32, -1, 0
			optim = append(optim, s)
		}
		for _, name := range names {
			s := base
			s.FQN, s.State, s.Shape, s.DType = prefix+name, name, append([]int64(nil), gp.Shape...), stateType
			if opaque > 0 {
				s.Shape = append(s.Shape, opaque)
			}
			optim = append(optim, s)
		}
	}
	// A tied parameter is in the model's state dict under every name
	// (nn.Module.state_dict keeps duplicates), so DCP writes it once per
	// name. The plan does not record where an alias is registered; it is
	// taken as after every other parameter, as for the usual tied output
	// projection (docs/checkpoint.md). The optimizer keeps the tensor's
	// state once, under the owner. DCP flattens {"model": …, "optim": …} in
	// that order.
	l.Tensors = append(l.Tensors, aliases...)
	l.Tensors = append(l.Tensors, optim...)
	l.Writer = writers(l)
	return l, nil
}

// stateDictOrder lists the plan's parameters (group, index) in the model's
// state-dict order when the plan records it (StateOrder, format 5: a
// distinct position for every parameter), else in the plan's group order.
// DCP's save plans list entries in this order, and its deduplication
// (dedup.go) depends on it.
func stateDictOrder(p *schedule.Plan) [][2]int {
	var at [][2]int
	seen := map[int]bool{}
	known := true
	for gi := range p.Groups {
		for pi, gp := range p.Groups[gi].Params {
			at = append(at, [2]int{gi, pi})
			if gp.StateOrder < 0 || seen[gp.StateOrder] {
				known = false
			}
			seen[gp.StateOrder] = true
		}
	}
	if known {
		sort.SliceStable(at, func(a, b int) bool {
			return p.Groups[at[a][0]].Params[at[a][1]].StateOrder < p.Groups[at[b][0]].Params[at[b][1]].StateOrder
		})
	}
	return at
}

// stateSpec resolves the optimizer's per-element states: their names and
// dtype, and whether a step count is kept. When the plan's bytes per
// element do not divide into the named states as a dtype (a custom
// optimizer_state_bytes), the state is one opaque uint8 tensor "state"
// with the bytes as an extra trailing dimension, chunked like the
// parameter.
func stateSpec(optimizer string, bytes int64) (names []string, step bool, opaque int64, dt ir.DType, err error) {
	spec, ok := optimizerStates[optimizer]
	if !ok {
		return nil, false, 0, 0, fmt.Errorf("optimizer %q: its checkpoint state is not known", optimizer)
	}
	if bytes < 0 {
		return nil, false, 0, 0, fmt.Errorf("optimizer %q: negative state bytes %d", optimizer, bytes)
	}
	if bytes == 0 {
		return nil, spec.step, 0, 0, nil
	}
	if n := int64(len(spec.names)); n > 0 && bytes%n == 0 {
		if dt, ok := stateDTypes[bytes/n]; ok {
			return spec.names, spec.step, 0, dt, nil
		}
	}
	return []string{"state"}, spec.step, bytes, ir.UINT8, nil
}

// written is what one rank writes: its model and optimizer bytes, and
// the part of them held in device memory (not offloaded).
type written struct {
	model, optim, device int64
}

// add counts b bytes of t: as model or optimizer state, and as device
// memory unless t is offloaded. A reshard class's reads sum the same way.
func (w *written) add(t *Tensor, b int64) {
	if t.State == "" {
		w.model += b
	} else {
		w.optim += b
	}
	if !t.Offload {
		w.device += b
	}
}

// rankWrites is what every rank writes, in one pass over the chunks (a
// pass per rank would visit world × chunks entries).
func (l *Layout) rankWrites() []written {
	out := make([]written, l.World())
	for ti := range l.Tensors {
		t := &l.Tensors[ti]
		for k, r := range l.Writer[ti] {
			if r < 0 {
				continue
			}
			out[r].add(t, t.chunkNumel(k)*t.DType.Size())
		}
	}
	return out
}

// Totals is the whole checkpoint: model and optimizer bytes, each chunk
// counted once.
func (l *Layout) Totals() (model, optim int64) {
	for ti := range l.Tensors {
		if l.Tensors[ti].State == "" {
			model += l.Tensors[ti].Bytes()
		} else {
			optim += l.Tensors[ti].Bytes()
		}
	}
	return model, optim
}

// FileName is the data file rank r writes: DCP's FileSystemWriter with its
// default single thread names it "__<rank>_0.distcp"; rank 0 also writes
// ".metadata".
func FileName(r int) string { return fmt.Sprintf("__%d_0.distcp", r) }

// MetadataFile is the name of DCP's global metadata file.
const MetadataFile = ".metadata"
