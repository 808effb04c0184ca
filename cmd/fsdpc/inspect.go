package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

func runInspect(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fl.SetOutput(stderr)
	asJSON := fl.Bool("json", false, "print JSON (every module) instead of the table")
	depth := fl.Int("depth", 4, "show modules down to this depth; repeated blocks show one instance")
	all := fl.Bool("all", false, "show every module, every instance of every repeated block")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: fsdpc inspect [-json] [-depth N] [-all] model.toml|zoo-name")
		fmt.Fprintln(stderr, "\nPrints parameter totals, bytes by dtype, FLOPs per step and a per-module table.")
		fl.PrintDefaults()
	}
	if code, ok := parseOperands(fl, args, 1); !ok {
		return code
	}
	m, err := loadModel(fl.Arg(0))
	if err != nil {
		return reportErr(stderr, err)
	}
	for _, w := range m.Warnings {
		fmt.Fprintln(stderr, w)
	}
	if *all {
		*depth = 1 << 30
	}
	render := func(w io.Writer, m *ir.Model) error { printInspect(w, m, *depth, *all); return nil }
	if *asJSON {
		render = renderInspectJSON
	}
	if err := render(stdout, m); err != nil {
		return reportErr(stderr, err)
	}
	return 0
}

// renderInspectJSON prints inspect's document (docs/json.md).
func renderInspectJSON(w io.Writer, m *ir.Model) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(inspectJSON(m))
}

func printInspect(w io.Writer, m *ir.Model, depth int, all bool) {
	s := m.Stats()
	t, c := m.Train, m.Cluster
	fmt.Fprintf(w, "model        %s (%s)\n", m.Name, m.File)
	fmt.Fprintf(w, "parameters   %s total, %s trainable, %s frozen (%d tensors)\n", ir.FormatCount(s.Params), ir.FormatCount(s.Trainable), ir.FormatCount(s.Frozen), s.Tensors)
	var byType []string
	for _, dt := range sortedDTypes(s.BytesByDType) {
		byType = append(byType, fmt.Sprintf("%s %s", dt, ir.FormatBytes(s.BytesByDType[dt])))
	}
	fmt.Fprintf(w, "bytes        %s\n", strings.Join(byType, ", "))
	optimizer := ir.OptimizerLabel(t.Optimizer, t.OptimizerImplementation(), t.MaxGradNorm)
	fmt.Fprintf(w, "train        micro_batch %d × seq_len %d, grad_accum %d, checkpointing %s, %s (%d B/param), activations in %s\n",
		t.MicroBatch, t.SeqLen, t.GradAccum, t.Checkpointing, optimizer, t.OptimizerStateBytes, t.ActivationDType)
	mesh := fmt.Sprintf("FSDP over %d", c.WorldSize)
	if c.Mesh != nil {
		mesh = fmt.Sprintf("HSDP %d replicas × %d shards", c.Mesh.Replicate, c.Mesh.Shard)
	}
	fmt.Fprintf(w, "cluster      %d × %s (%d node(s) × %d GPUs), %s, budget %s per rank\n",
		c.WorldSize, c.GPU.Name, c.Nodes(), c.GPUsPerNode, mesh, ir.FormatBytes(c.MemoryBudget))
	fmt.Fprintf(w, "FLOPs        per micro-batch per rank: forward %s, backward %s\n", ir.FormatFLOP(s.FlopsFwd), ir.FormatFLOP(s.FlopsBwd))
	fmt.Fprintf(w, "             per step: %s per rank, %s across %d ranks\n", ir.FormatFLOP(s.FlopsPerStep), ir.FormatFLOP(s.FlopsPerStep*float64(c.WorldSize)), c.WorldSize)
	if per := m.FLOPsPerToken(); per > 0 {
		tokens := float64(t.MicroBatch) * float64(t.SeqLen)
		fmt.Fprintf(w, "             for MFU: %s per token = 6 × %s parameters (embeddings excluded) + attention %s\n",
			ir.FormatFLOP(per), ir.FormatCount(int64(m.MFU.Params)), ir.FormatFLOP(3*m.MFU.AttnFlopsDense/tokens))
	}
	fmt.Fprintf(w, "activations  %s saved per micro-batch per rank\n", ir.FormatBytes(s.ActivationBytes))
	fmt.Fprintln(w)

	params := m.SubtreeParams()
	var rows [][]string
	row := func(cells ...string) { rows = append(rows, cells) }
	row("MODULE", "KIND", "PARAMS", "FWD", "BWD", "ACTIVATIONS")
	var walk func(id ir.ModuleID, name string, level int)
	walk = func(id ir.ModuleID, name string, level int) {
		mod := &m.Modules[id]
		kind := mod.Kind.String()
		if mod.Repeat > 0 {
			kind = fmt.Sprintf("×%d", mod.Repeat)
		}
		row(strings.Repeat("  ", level)+name, kind, ir.FormatCount(params[id]),
			ir.FormatFLOP(mod.Cost.FlopsFwd), ir.FormatFLOP(mod.Cost.FlopsBwd), ir.FormatBytes(mod.Cost.ActivationBytes))
		if level+1 >= depth {
			return
		}
		if mod.Repeat > 0 && !mod.Varied && !all {
			// One instance stands for all: they are identical.
			first := mod.Children[0]
			walk(first, fmt.Sprintf("%s.{0..%d}", localName(mod.Name), mod.Repeat-1)+" (each)", level+1)
			return
		}
		for _, ch := range mod.Children {
			walk(ch, localName(m.Modules[ch].Name), level+1)
		}
	}
	walk(0, "(model)", 0)
	printTable(w, rows, 2)
}

// printTable prints rows with the first leftAligned columns aligned left
// and the rest (numbers) aligned right.
func printTable(w io.Writer, rows [][]string, leftAligned int) {
	widths := map[int]int{}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < leftAligned {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func localName(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

func sortedDTypes(m map[ir.DType]int64) []ir.DType {
	var out []ir.DType
	for dt := ir.DType(0); dt < 64; dt++ {
		if _, ok := m[dt]; ok {
			out = append(out, dt)
		}
	}
	return out
}

// The JSON form of inspect. Field names are part of fsdpc's interface:
// add fields, never rename or remove them.
type inspectDoc struct {
	Schema          string      `json:"schema"`
	Command         string      `json:"command"`
	Model           string      `json:"model"`
	File            string      `json:"file"`
	SourceSHA256    string      `json:"source_sha256"`
	Params          paramsDoc   `json:"params"`
	Train           trainDoc    `json:"train"`
	Cluster         clusterDoc  `json:"cluster"`
	FLOPs           flopsDoc    `json:"flops"`
	ActivationBytes int64       `json:"activation_bytes"`
	Modules         []moduleDoc `json:"modules"`
	Warnings        []string    `json:"warnings"`
	Diagnostics     []diagDoc   `json:"diagnostics"`
}

type paramsDoc struct {
	Total        int64            `json:"total"`
	Trainable    int64            `json:"trainable"`
	Frozen       int64            `json:"frozen"`
	Tensors      int              `json:"tensors"`
	Bytes        int64            `json:"bytes"`
	BytesByDType map[string]int64 `json:"bytes_by_dtype"`
}

type trainDoc struct {
	MicroBatch    int64  `json:"micro_batch"`
	SeqLen        int64  `json:"seq_len"`
	GradAccum     int64  `json:"grad_accum"`
	Checkpointing string `json:"checkpointing"`
	Optimizer     string `json:"optimizer"`
	// OptimizerImplementation: AdamW's "fused" or "foreach", what its step
	// is priced as; absent for the other optimizers.
	OptimizerImplementation string  `json:"optimizer_implementation,omitempty"`
	OptimizerStateBytes     int64   `json:"optimizer_state_bytes"`
	MaxGradNorm             float64 `json:"max_grad_norm"`
	ActivationDType         string  `json:"activation_dtype"`
}

type clusterDoc struct {
	GPU          string `json:"gpu"`
	WorldSize    int    `json:"world_size"`
	GPUsPerNode  int    `json:"gpus_per_node"`
	Replicate    int    `json:"replicate"`
	Shard        int    `json:"shard"`
	MemoryBudget int64  `json:"memory_budget"`
}

type flopsDoc struct {
	ForwardPerMicroBatch  float64 `json:"forward_per_microbatch"`
	BackwardPerMicroBatch float64 `json:"backward_per_microbatch"`
	PerStepPerRank        float64 `json:"per_step_per_rank"`
	PerStepTotal          float64 `json:"per_step_total"`
	// MFUPerToken is the FLOPs per token MFU counts (docs/units.md), of
	// MFUParams parameters (embeddings excluded, MoE experts at top_k/experts).
	MFUPerToken float64 `json:"mfu_flops_per_token"`
	MFUParams   float64 `json:"mfu_params"`
}

type moduleDoc struct {
	Name              string   `json:"name"`
	Kind              string   `json:"kind"`
	Compute           bool     `json:"compute"`
	Params            int64    `json:"params"`
	FlopsFwd          float64  `json:"flops_fwd"`
	FlopsBwd          float64  `json:"flops_bwd"`
	FlopsRecompute    float64  `json:"flops_recompute"`
	ActivationBytes   int64    `json:"activation_bytes"`
	RecomputeBytes    int64    `json:"recompute_bytes,omitempty"`
	Inputs            []string `json:"inputs,omitempty"`
	InputsRequireGrad bool     `json:"inputs_require_grad"`
	Checkpoint        bool     `json:"checkpoint,omitempty"`
}

func inspectJSON(m *ir.Model) inspectDoc {
	s := m.Stats()
	d := inspectDoc{
		Schema: diff.Schema, Command: "inspect",
		Model: m.Name, File: m.File, SourceSHA256: m.SourceHash,
		Params: paramsDoc{Total: s.Params, Trainable: s.Trainable, Frozen: s.Frozen, Tensors: s.Tensors,
			Bytes: s.ParamBytes, BytesByDType: map[string]int64{}},
		Train: trainDoc{MicroBatch: m.Train.MicroBatch, SeqLen: m.Train.SeqLen, GradAccum: m.Train.GradAccum,
			Checkpointing: m.Train.Checkpointing.String(), Optimizer: m.Train.Optimizer,
			OptimizerImplementation: m.Train.OptimizerImplementation(), OptimizerStateBytes: m.Train.OptimizerStateBytes,
			MaxGradNorm: m.Train.MaxGradNorm, ActivationDType: m.Train.ActivationDType.String()},
		Cluster: clusterDoc{GPU: m.Cluster.GPU.Name, WorldSize: m.Cluster.WorldSize, GPUsPerNode: m.Cluster.GPUsPerNode,
			Replicate: 1, Shard: m.Cluster.WorldSize, MemoryBudget: m.Cluster.MemoryBudget},
		FLOPs: flopsDoc{ForwardPerMicroBatch: s.FlopsFwd, BackwardPerMicroBatch: s.FlopsBwd,
			PerStepPerRank: s.FlopsPerStep, PerStepTotal: s.FlopsPerStep * float64(m.Cluster.WorldSize),
			MFUPerToken: m.FLOPsPerToken(), MFUParams: m.MFU.Params},
		ActivationBytes: s.ActivationBytes,
		Warnings:        []string{},
	}
	if mesh := m.Cluster.Mesh; mesh != nil {
		d.Cluster.Replicate, d.Cluster.Shard = mesh.Replicate, mesh.Shard
	}
	for dt, b := range s.BytesByDType {
		d.Params.BytesByDType[dt.String()] = b
	}
	params := m.SubtreeParams()
	for i := range m.Modules {
		mod := &m.Modules[i]
		md := moduleDoc{Name: mod.Name, Kind: mod.Kind.String(), Compute: mod.Compute, Params: params[i],
			FlopsFwd: mod.Cost.FlopsFwd, FlopsBwd: mod.Cost.FlopsBwd, FlopsRecompute: mod.Cost.FlopsRecompute,
			ActivationBytes: mod.Cost.ActivationBytes, RecomputeBytes: mod.Cost.RecomputeBytes,
			InputsRequireGrad: mod.InputsRequireGrad, Checkpoint: mod.Checkpoint}
		for _, in := range mod.Inputs {
			md.Inputs = append(md.Inputs, m.Modules[in].Name)
		}
		d.Modules = append(d.Modules, md)
	}
	for _, w := range m.Warnings {
		d.Warnings = append(d.Warnings, w.String())
	}
	d.Diagnostics = newDiagDocs(m.Warnings)
	return d
}
