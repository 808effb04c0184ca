package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsdpc/fsdpc/checkpoint"
	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// Checkpoints (docs/checkpoint.md, "The executor's checkpoints"): after a
// verified run, every rank writes the chunks the checkpoint layout gives it
// (package checkpoint: DCP's layout and deduplication) into one file,
// __<rank>_0.distcp, and metadata.json indexes them. LoadCheckpoint reads
// such a directory under another plan with the reads DCP's load planner
// would perform and rebuilds every rank's sharded parameters and optimizer
// states; Restored.Check compares them with the reference's unsharded
// state byte for byte.

// MetadataName is the index file of an executor checkpoint.
const MetadataName = "metadata.json"

const checkpointFormat = "fsdpc.checkpoint/1"

type ckptMeta struct {
	Format    string      `json:"format"`
	Model     string      `json:"model"`
	Optimizer string      `json:"optimizer"`
	Step      int         `json:"step"`
	Mesh      [3]int      `json:"mesh"` // replicate, shard, GPUs per node
	Entries   []ckptEntry `json:"entries"`
	Files     []ckptFile  `json:"files"`
}

type ckptEntry struct {
	FQN       string      `json:"fqn"`
	Param     string      `json:"param"`
	State     string      `json:"state,omitempty"`
	Shape     []int64     `json:"shape"`
	DType     string      `json:"dtype"`
	ShardDim  int         `json:"shard_dim"`
	ChunkRows int64       `json:"chunk_rows"`
	Chunks    []ckptChunk `json:"chunks"`
}

type ckptChunk struct {
	Index   int     `json:"index"` // the shard index (0 for a replicated entry)
	Rank    int     `json:"rank"`  // the rank that wrote it
	Offsets []int64 `json:"offsets"`
	Lengths []int64 `json:"lengths"`
	File    string  `json:"file"`
	Offset  int64   `json:"offset"` // bytes into the file
	Bytes   int64   `json:"bytes"`
}

type ckptFile struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Final is the reference's unsharded state after a run's last step, per
// checkpoint entry (FQN) in the entry's dtype; Step is the steps taken.
type Final struct {
	Step    int
	Tensors map[string][]byte
}

// paramIndex maps a parameter name to its group and index.
func paramIndex(layouts []*GroupLayout) map[string][2]int {
	m := map[string][2]int{}
	for gi, gl := range layouts {
		for pi := range gl.Params {
			m[gl.Params[pi].Name] = [2]int{gi, pi}
		}
	}
	return m
}

// executorLayout is the checkpoint layout of the (scaled) plan, checked
// against what the executor keeps: its optimizer's fp32 states, in the
// order the layout names them.
func executorLayout(q *schedule.Plan, opt *optimizer) (*checkpoint.Layout, error) {
	l, err := checkpoint.FromPlan(q)
	if err != nil {
		return nil, err
	}
	states := map[string]int{}
	for _, t := range l.Tensors {
		if t.State != "" && t.State != "step" {
			if t.DType != ir.FP32 {
				return nil, fmt.Errorf("checkpoint: %s is %s, but the executor keeps its optimizer states in fp32", t.FQN, t.DType)
			}
			states[t.Param]++
		}
	}
	for p, n := range states {
		if n != opt.states {
			return nil, fmt.Errorf("checkpoint: %s has %d optimizer states, the executor's %s keeps %d", p, n, opt.name, opt.states)
		}
	}
	return l, nil
}

// stateIndex is the position of a state among its parameter's states.
func stateIndex(l *checkpoint.Layout, ti int) int {
	t := &l.Tensors[ti]
	s := 0
	for i := ti - 1; i >= 0 && l.Tensors[i].Param == t.Param && l.Tensors[i].State != ""; i-- {
		if l.Tensors[i].State != "step" {
			s++
		}
	}
	return s
}

// entryRegion is where entry ti of l starts in one rank's buffers of its
// group: in the sharded parameters for a parameter, in the fp32 optimizer
// states for a state (each state of the group is one run of
// GradShardNumel elements).
func entryRegion(l *checkpoint.Layout, ti int, gl *GroupLayout, pl *ParamLayout, params, states []byte) []byte {
	if l.Tensors[ti].State == "" {
		return params[pl.ShardedOffset:]
	}
	return states[(int64(stateIndex(l, ti))*gl.GradShardNumel+pl.GradOffset)*4:]
}

// final is the reference's unsharded state per entry; layouts are the
// reference's groups'.
func (ref *reference) final(l *checkpoint.Layout, layouts []*GroupLayout) *Final {
	f := &Final{Step: ref.steps, Tensors: map[string][]byte{}}
	idx := paramIndex(layouts)
	for ti := range l.Tensors {
		t := &l.Tensors[ti]
		b := make([]byte, t.Bytes())
		switch at := idx[t.Param]; {
		case t.State == "":
			for i, x := range ref.groups[at[0]].full[at[1]] {
				store(t.DType, b, int64(i), x)
			}
		case t.State == "step":
			store(ir.FP32, b, 0, float64(ref.steps))
		default:
			for i, x := range ref.groups[at[0]].states[at[1]][stateIndex(l, ti)] {
				store(ir.FP32, b, int64(i), x)
			}
		}
		f.Tensors[t.FQN] = b
	}
	return f
}

// saveCheckpoint writes every rank's chunks and the metadata as a new
// checkpoint of dir (ckptdir.go) and returns its directory.
func (d *driver) saveCheckpoint(dir string, l *checkpoint.Layout, steps int) (string, error) {
	if len(d.local) != l.World() {
		return "", fmt.Errorf("checkpoint: this process runs %d of %d ranks; a checkpoint needs every rank", len(d.local), l.World())
	}
	idx := paramIndex(d.layouts)
	// Every rank's persistent sharded parameters and optimizer states.
	params := make([][][]byte, l.World())
	states := make([][][]byte, l.World())
	for r := range l.World() {
		params[r] = make([][]byte, len(d.layouts))
		states[r] = make([][]byte, len(d.layouts))
		for bi, b := range d.q.Buffers {
			if !b.Persistent || b.Group < 0 || (b.Kind != schedule.BufShardedParams && b.Kind != schedule.BufOptimizerState) {
				continue
			}
			data, err := d.b.Download(r, d.mems[r][bi])
			if err != nil {
				return "", fmt.Errorf("checkpoint: rank %d, buffer %s: %w", r, b.Name, err)
			}
			if b.Kind == schedule.BufShardedParams {
				params[r][b.Group] = data
			} else {
				states[r][b.Group] = data
			}
		}
	}
	meta := ckptMeta{Format: checkpointFormat, Model: l.Model, Optimizer: l.Optimizer, Step: steps,
		Mesh: [3]int{l.Replicate, l.Shard, l.GPUsPerNode}}
	files := make([][]byte, l.World())
	for ti := range l.Tensors {
		t := &l.Tensors[ti]
		e := ckptEntry{FQN: t.FQN, Param: t.Param, State: t.State, Shape: t.Shape, DType: t.DType.String(), ShardDim: t.ShardDim, ChunkRows: t.ChunkRows}
		at := idx[t.Param]
		gl := d.layouts[at[0]]
		pl := &gl.Params[at[1]]
		es := t.DType.Size()
		for k, r := range l.Writer[ti] {
			if r < 0 {
				continue
			}
			c := t.Chunk(k)
			var data []byte
			if t.State == "step" {
				data = make([]byte, 4)
				store(ir.FP32, data, 0, float64(steps))
			} else {
				// es is 4 for a state (executorLayout: fp32).
				region := entryRegion(l, ti, gl, pl, params[r][at[0]], states[r][at[0]])
				pl.forShard(int64(k), func(so, _, n int64) { data = append(data, region[so*es:(so+n)*es]...) })
			}
			if int64(len(data)) != c.Numel()*es {
				return "", fmt.Errorf("checkpoint: %s chunk %d: %d bytes on rank %d, the layout says %d", t.FQN, k, len(data), r, c.Numel()*es)
			}
			e.Chunks = append(e.Chunks, ckptChunk{Index: k, Rank: r, Offsets: c.Offsets, Lengths: c.Lengths,
				File: checkpoint.FileName(r), Offset: int64(len(files[r])), Bytes: int64(len(data))})
			files[r] = append(files[r], data...)
		}
		meta.Entries = append(meta.Entries, e)
	}
	var out []ckptFileData
	for r, data := range files {
		sum := sha256.Sum256(data)
		name := checkpoint.FileName(r)
		out = append(out, ckptFileData{name, data})
		meta.Files = append(meta.Files, ckptFile{Name: name, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	js, err := json.MarshalIndent(meta, "", " ")
	if err != nil {
		return "", err
	}
	// The metadata last: a directory without it is no checkpoint.
	return commitCheckpoint(dir, steps, append(out, ckptFileData{MetadataName, append(js, '\n')}))
}

// Restored is every rank's state rebuilt from a checkpoint under a plan,
// in the executor's buffer layouts: Params[group][rank] the sharded
// parameters (padded, each parameter in its dtype), States[group][rank]
// the fp32 optimizer states (nil for a group without any).
type Restored struct {
	Plan    *schedule.Plan // the (scaled) plan loaded under
	Step    int
	Params  [][][]byte
	States  [][][]byte
	layouts []*GroupLayout
	layout  *checkpoint.Layout
	opt     *optimizer
	// Reads and Bytes count what the load read.
	Reads int
	Bytes int64
	// Dir is the checkpoint's directory, From its layout as saved, Files
	// and FileBytes its data files.
	Dir       string
	From      *checkpoint.Layout
	Files     int
	FileBytes int64
}

// LoadCheckpoint reads a checkpoint directory under plan p, scaled as a
// run with this scale would be, performing for every rank the reads
// checkpoint.Plan gives (DCP's load planner). Everything is checked before
// any state is built (the metadata, that the plan holds the same state,
// every file's presence, size and SHA-256), and an error names the file
// and the entries concerned; on an error nothing is returned.
func LoadCheckpoint(dir string, p *schedule.Plan, scale int) (*Restored, error) {
	root, dir, err := openCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	metaPath := filepath.Join(dir, MetadataName)
	raw, err := readIn(root, MetadataName, metaPath, "a checkpoint's metadata", metaLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: missing: %s is not a complete checkpoint", metaPath, dir)
	} else if err != nil {
		return nil, err
	}
	var meta ckptMeta
	if int64(len(raw)) > metaLimit {
		return nil, fmt.Errorf("%s: larger than %s, not an fsdpc checkpoint's metadata", metaPath, ir.FormatBytes(metaLimit))
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("%s: %w", metaPath, err)
	}
	if meta.Format != checkpointFormat {
		return nil, fmt.Errorf("%s: format %q, this fsdpc reads %q", metaPath, meta.Format, checkpointFormat)
	}
	old, chunks, err := meta.layout()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", metaPath, err)
	}
	q, _, layouts, opt, err := prepare(p, max(scale, 1))
	if err != nil {
		return nil, err
	}
	nl, err := executorLayout(q, opt)
	if err != nil {
		return nil, err
	}
	rs, err := checkpoint.Plan(old, nl)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	data, err := meta.readFiles(root, dir, old, chunks)
	if err != nil {
		return nil, err
	}
	res := &Restored{Plan: q, Step: meta.Step, layouts: layouts, layout: nl, opt: opt, Dir: dir, From: old, Files: len(data),
		Params: make([][][]byte, len(layouts)), States: make([][][]byte, len(layouts))}
	for gi, gl := range layouts {
		res.Params[gi] = make([][]byte, nl.World())
		res.States[gi] = make([][]byte, nl.World())
		for r := range nl.World() {
			res.Params[gi][r] = make([]byte, gl.ShardedBytes)
			if gl.GradShardNumel > 0 && opt.states > 0 {
				res.States[gi][r] = make([]byte, gl.GradShardNumel*int64(opt.states)*4)
			}
		}
	}
	for _, b := range data {
		res.FileBytes += int64(len(b))
	}
	idx := paramIndex(layouts)
	for r := range nl.World() {
		k := int64(r % nl.Shard)
		for _, rd := range rs.Reads(r) {
			t := &nl.Tensors[rd.Tensor]
			oi := rs.OldTensor(rd.Tensor)
			ch := chunks[oi][rd.OldK]
			src := data[ch.File][ch.Offset : ch.Offset+ch.Bytes]
			res.Reads++
			res.Bytes += rd.Bytes
			if t.State == "step" {
				if v := load(ir.FP32, src, 0); v != float64(meta.Step) {
					return nil, fmt.Errorf("%s: %s holds %v, the metadata says step %d", filepath.Join(dir, ch.File), t.FQN, v, meta.Step)
				}
				continue
			}
			at := idx[t.Param]
			gl := layouts[at[0]]
			pl := &gl.Params[at[1]]
			dst := entryRegion(nl, rd.Tensor, gl, pl, res.Params[at[0]][r], res.States[at[0]][r])
			// The rank's shard is its chunk padded to ChunkRows rows.
			dims := slices.Clone(t.Shape)
			dstOff := make([]int64, len(dims))
			if t.ShardDim >= 0 {
				dims[t.ShardDim] = t.ChunkRows
				dstOff[t.ShardDim] = k * t.ChunkRows
			}
			copyBox(t.DType.Size(), rd.Offsets, rd.Lengths, src, ch.Offsets, ch.Lengths, dst, dstOff, dims)
		}
	}
	return res, nil
}

// copyBox copies the box (global offsets, lengths) from src, row-major
// over the chunk at srcOff with srcLen, into dst, row-major over dims
// starting at global dstOff.
func copyBox(es int64, offs, lens []int64, src []byte, srcOff, srcLen []int64, dst []byte, dstOff, dims []int64) {
	nd := len(offs)
	if nd == 0 {
		copy(dst[:es], src[:es])
		return
	}
	idx := make([]int64, nd)
	for {
		var si, di int64
		for d := range nd {
			g := offs[d] + idx[d]
			si = si*srcLen[d] + g - srcOff[d]
			di = di*dims[d] + g - dstOff[d]
		}
		n := lens[nd-1]
		copy(dst[di*es:(di+n)*es], src[si*es:(si+n)*es])
		d := nd - 2
		for ; d >= 0; d-- {
			if idx[d]++; idx[d] < lens[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// Bounds on what a checkpoint's metadata may describe, checked before
// anything is allocated from it. fsdpc's world sizes stop at 2²⁴ ranks
// (ir: maxWorldSize); a tensor has at most maxCkptDims dimensions and
// 2⁶² bytes; and the writer table (a slot per entry and shard index)
// stays within maxWriterSlots: 10⁴ entries over 1,600 ranks, 128 MiB.
const (
	maxCkptWorld   = 1 << 24
	maxCkptDims    = 16
	maxCkptBytes   = 1 << 62
	maxWriterSlots = 1 << 24
	// The metadata of a model of 10⁵ entries on 10⁴ ranks is far below
	// this bound; a larger file is not fsdpc's.
	metaLimit = 1 << 30
)

// layout rebuilds the saved checkpoint's layout from the metadata, and
// each entry's chunks by shard index, checking that they are the chunks
// the layout rules give and lie inside their files. Every number is
// bounded before it sizes an allocation or an index.
func (m *ckptMeta) layout() (*checkpoint.Layout, [][]ckptChunk, error) {
	R, S, G := m.Mesh[0], m.Mesh[1], m.Mesh[2]
	if R < 1 || S < 1 || G < 1 || R > maxCkptWorld || S > maxCkptWorld || G > maxCkptWorld || R*S > maxCkptWorld {
		return nil, nil, fmt.Errorf("bad mesh %v: each of replicate, shard and GPUs per node from 1 to %d, and replicate × shard at most %d ranks", m.Mesh, maxCkptWorld, maxCkptWorld)
	}
	if len(m.Files) != R*S {
		return nil, nil, fmt.Errorf("%d files listed for a mesh of %d ranks: every rank writes one", len(m.Files), R*S)
	}
	l := &checkpoint.Layout{Model: m.Model, Optimizer: m.Optimizer, Replicate: R, Shard: S, GPUsPerNode: G}
	sizes := map[string]int64{}
	for _, f := range m.Files {
		if _, dup := sizes[f.Name]; dup {
			return nil, nil, fmt.Errorf("file %q listed twice", f.Name)
		}
		if f.Bytes < 0 {
			return nil, nil, fmt.Errorf("file %q of %d bytes", f.Name, f.Bytes)
		}
		sizes[f.Name] = f.Bytes
	}
	var chunks [][]ckptChunk
	slots := 0
	for _, e := range m.Entries {
		dt, ok := ir.ParseDType(e.DType)
		if !ok {
			return nil, nil, fmt.Errorf("%s: unknown dtype %q", e.FQN, e.DType)
		}
		if err := boundShape(e.Shape, dt.Size()); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.FQN, err)
		}
		t := checkpoint.Tensor{FQN: e.FQN, Param: e.Param, State: e.State, Shape: e.Shape, DType: dt, ShardDim: e.ShardDim, ChunkRows: e.ChunkRows}
		if t.ShardDim >= len(t.Shape) || t.ShardDim < -1 || t.ShardDim >= 0 && t.ChunkRows != ceilDiv(t.Shape[t.ShardDim], int64(S)) {
			return nil, nil, fmt.Errorf("%s: shard dimension %d with %d rows per rank does not fit shape %v over %d ranks", e.FQN, e.ShardDim, e.ChunkRows, e.Shape, S)
		}
		n := t.Chunks(S)
		if slots += n; slots > maxWriterSlots {
			return nil, nil, fmt.Errorf("%d entries over %d ranks: more than %d chunks, not a checkpoint fsdpc writes", len(m.Entries), S, maxWriterSlots)
		}
		// The chunks with elements are the first full ones, each of which
		// the metadata must list: only they are kept.
		full := 1
		switch {
		case t.Numel() == 0:
			full = 0
		case t.ShardDim >= 0:
			full = int(ceilDiv(t.Shape[t.ShardDim], t.ChunkRows))
		}
		if len(e.Chunks) < full {
			return nil, nil, fmt.Errorf("%s: %d chunks listed, the layout has %d with elements", e.FQN, len(e.Chunks), full)
		}
		w := make([]int, n)
		cs := make([]ckptChunk, full)
		for k := range w {
			w[k] = -1
		}
		for _, c := range e.Chunks {
			if c.Index < 0 || c.Index >= full || w[c.Index] >= 0 {
				return nil, nil, fmt.Errorf("%s: chunk index %d out of range, empty or repeated", e.FQN, c.Index)
			}
			want := t.Chunk(c.Index)
			if !slices.Equal(c.Offsets, want.Offsets) || !slices.Equal(c.Lengths, want.Lengths) || c.Bytes != want.Numel()*dt.Size() {
				return nil, nil, fmt.Errorf("%s: chunk %d at %v+%v (%d bytes) is not the layout's %v+%v", e.FQN, c.Index, c.Offsets, c.Lengths, c.Bytes, want.Offsets, want.Lengths)
			}
			size, ok := sizes[c.File]
			if !ok || c.Offset < 0 || c.Offset > size-c.Bytes {
				return nil, nil, fmt.Errorf("%s: chunk %d at byte %d, %d bytes, of %s, which the metadata lists with %d bytes", e.FQN, c.Index, c.Offset, c.Bytes, c.File, size)
			}
			if c.Rank < 0 || c.Rank >= R*S {
				return nil, nil, fmt.Errorf("%s: chunk %d written by rank %d of %d", e.FQN, c.Index, c.Rank, R*S)
			}
			w[c.Index], cs[c.Index] = c.Rank, c
		}
		for k := range full {
			if w[k] < 0 {
				return nil, nil, fmt.Errorf("%s: chunk %d is in no file", e.FQN, k)
			}
		}
		l.Tensors = append(l.Tensors, t)
		l.Writer = append(l.Writer, w)
		chunks = append(chunks, cs)
	}
	return l, chunks, nil
}

// boundShape refuses a shape a checkpoint cannot hold: a negative
// dimension, more than maxCkptDims, or more than maxCkptBytes in all
// (checked without overflow).
func boundShape(shape []int64, es int64) error {
	if len(shape) > maxCkptDims {
		return fmt.Errorf("%d dimensions, more than %d", len(shape), maxCkptDims)
	}
	n := es
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d > 0 && n > maxCkptBytes/d {
			return fmt.Errorf("shape %v holds more than 2^62 bytes", shape)
		}
		n *= d
	}
	return nil
}

// readFiles reads every data file, checking its size and SHA-256 against
// the metadata; an error names the file and the entries it holds.
func (m *ckptMeta) readFiles(root *os.Root, dir string, l *checkpoint.Layout, chunks [][]ckptChunk) (map[string][]byte, error) {
	holds := func(file string) string {
		var names []string
		for ti, cs := range chunks {
			for _, c := range cs {
				if c.File == file && c.Bytes > 0 {
					names = append(names, l.Tensors[ti].FQN)
					break
				}
			}
		}
		if len(names) == 0 {
			return "no entries"
		}
		if len(names) > 3 {
			return fmt.Sprintf("%s and %d more entries", strings.Join(names[:3], ", "), len(names)-3)
		}
		return strings.Join(names, ", ")
	}
	// past names the first entry whose chunk lies past a truncated end.
	past := func(file string, end int64) string {
		for ti, cs := range chunks {
			for _, c := range cs {
				if c.File == file && c.Offset > end-c.Bytes {
					return fmt.Sprintf("%s (chunk %d, bytes [%d, %d))", l.Tensors[ti].FQN, c.Index, c.Offset, c.Offset+c.Bytes)
				}
			}
		}
		return "none"
	}
	out := map[string][]byte{}
	for _, f := range m.Files {
		if f.Name != filepath.Base(f.Name) || f.Name == MetadataName || f.Name == "." || f.Name == ".." {
			return nil, fmt.Errorf("%s: bad file name %q", filepath.Join(dir, MetadataName), f.Name)
		}
		path := filepath.Join(dir, f.Name)
		b, err := readIn(root, f.Name, path, "a checkpoint data file", f.Bytes)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: missing; it holds %s", path, holds(f.Name))
		} else if err != nil {
			return nil, err
		}
		if int64(len(b)) > f.Bytes {
			return nil, fmt.Errorf("%s: more than the %d bytes the metadata says (appended to or overwritten); it holds %s", path, f.Bytes, holds(f.Name))
		}
		if int64(len(b)) != f.Bytes {
			return nil, fmt.Errorf("%s: %d bytes, the metadata says %d (truncated or overwritten); the first entry past its end is %s", path, len(b), f.Bytes, past(f.Name, int64(len(b))))
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.SHA256 {
			return nil, fmt.Errorf("%s: its SHA-256 differs from the metadata's (corrupted); it holds %s", path, holds(f.Name))
		}
		out[f.Name] = b
	}
	return out, nil
}

// Check compares the restored state with a reference's final state: every
// rank's shard of every parameter and optimizer state, byte for byte, and
// the step count. The error names the entry, rank and element.
func (res *Restored) Check(f *Final) error {
	if res.Step != f.Step {
		return fmt.Errorf("restored step %d, the reference took %d", res.Step, f.Step)
	}
	idx := paramIndex(res.layouts)
	l := res.layout
	for ti := range l.Tensors {
		t := &l.Tensors[ti]
		if t.State == "step" {
			continue
		}
		want, ok := f.Tensors[t.FQN]
		if !ok {
			return fmt.Errorf("%s: not in the reference", t.FQN)
		}
		at := idx[t.Param]
		gl := res.layouts[at[0]]
		pl := &gl.Params[at[1]]
		es := t.DType.Size()
		for r := range l.World() {
			got := entryRegion(l, ti, gl, pl, res.Params[at[0]][r], res.States[at[0]][r])
			var bad error
			data := make([]bool, pl.ShardNumel)
			pl.forShard(int64(r%l.Shard), func(so, lo, n int64) {
				for e := so; e < so+n; e++ {
					data[e] = true
				}
				for e := int64(0); e < n && bad == nil; e++ {
					g, w := got[(so+e)*es:(so+e+1)*es], want[(lo+e)*es:(lo+e+1)*es]
					if !slices.Equal(g, w) {
						bad = fmt.Errorf("%s on rank %d: element %d is %v, the reference's %v", t.FQN, r, lo+e, load(t.DType, g, 0), load(t.DType, w, 0))
					}
				}
			})
			if bad != nil {
				return bad
			}
			// Padding stays zero.
			for e := int64(0); e < pl.ShardNumel; e++ {
				if !data[e] && math.Float64bits(load(t.DType, got, e)) != 0 {
					return fmt.Errorf("%s on rank %d: padding element %d is %v, not zero", t.FQN, r, e, load(t.DType, got, e))
				}
			}
		}
	}
	return nil
}
