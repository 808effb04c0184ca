package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
)

// Decoding of the [model], [train], [cluster] and [policy] sections.

var optimizerStateBytes = map[string]int64{
	// Per trainable parameter element, states in fp32.
	"adamw":        8, // exp_avg, exp_avg_sq
	"adam":         8,
	"sgd":          0,
	"sgd_momentum": 4, // momentum buffer
	"lion":         4, // exp_avg
	"adafactor":    0, // factored second moment: O(rows+cols), negligible per element
}

func (d *decoder) modelSection(root *tbl, m *Model) (dtype DType) {
	dtype = FP32
	v, ok := root.m["model"]
	if !ok {
		return
	}
	t := d.table("model", v, "[model]", "name", "dtype")
	if s, ok := t.str("name"); ok {
		if s == "" {
			d.errorf(t.at("name"), "model name must not be empty")
		} else if err := ValidLabel(s); err != nil {
			d.errorf(t.at("name"), "model %v", err)
		}
		m.Name = s
	}
	if dt, ok := t.dtype("dtype"); ok {
		dtype = dt
	}
	return
}

func (d *decoder) trainSection(root *tbl, m *Model) {
	tr := &m.Train
	tr.MicroBatch, tr.SeqLen, tr.GradAccum = 1, 0, 1
	tr.Optimizer = "adamw"
	v, ok := root.m["train"]
	if !ok {
		d.keyErrorf("", "missing [train] section: it needs at least seq_len")
		return
	}
	if _, isTable := v.(map[string]any); !isTable {
		d.table("train", v, "[train]") // reports the type, and nothing inside
		return
	}
	t := d.table("train", v, "[train]", "micro_batch", "seq_len", "grad_accum", "accumulate", "checkpointing",
		"optimizer", "optimizer_implementation", "optimizer_state_bytes", "max_grad_norm", "activation_dtype", "compile", "checkpoint_interval", "attention_kernel", "expandable_segments")
	tr.MicroBatch = t.intOr("micro_batch", 1, 1, 1<<20)
	if n, ok := t.integer("seq_len", 1, 1<<30); ok {
		tr.SeqLen = n
	} else if !t.has("seq_len") {
		d.keyErrorf("train", "[train] needs seq_len (tokens per sequence; for a ViT, patches plus class tokens)")
	}
	tr.GradAccum = t.intOr("grad_accum", 1, 1, 1<<20)
	if b, _ := t.boolean("compile"); b != nil {
		tr.Compile = *b
	}
	if b, _ := t.boolean("expandable_segments"); b != nil {
		tr.ExpandableSegments = *b
	}
	tr.AttentionKernel = "flash2"
	if s, ok := t.enum("attention_kernel", hardware.AttentionKernelNames()...); ok {
		tr.AttentionKernel = s
	}
	if s, ok := t.enum("accumulate", "sharded", "unsharded"); ok {
		tr.AccumulateUnsharded = s == "unsharded"
	}
	tr.CheckpointingSet = t.has("checkpointing")
	if s, ok := t.enum("checkpointing", "none", "full", "selective", "selective-op", "selective-layer"); ok {
		if s == "selective" {
			d.warnf(t.at("checkpointing"), "checkpointing \"selective\" is now called \"selective-op\" (torchtitan's name); \"selective-layer\" checkpoints every checkpoint_interval-th block")
			s = "selective-op"
		}
		tr.Checkpointing = CheckpointingModes[s]
	}
	tr.CheckpointInterval = 2 // torchtitan's default selective_ac_option
	if n, ok := t.integer("checkpoint_interval", 1, 1<<20); ok {
		if tr.Checkpointing != CheckpointSelectiveLayer {
			d.errorf(t.at("checkpoint_interval"), "checkpoint_interval applies to checkpointing = \"selective-layer\" only")
		}
		tr.CheckpointInterval = n
	}
	if s, ok := t.enum("optimizer", sortedKeys(optimizerStateBytes)...); ok {
		tr.Optimizer = s
	}
	tr.OptimizerStateBytes = optimizerStateBytes[tr.Optimizer]
	if s, ok := t.enum("optimizer_implementation", "foreach", "fused"); ok {
		if s == "foreach" && tr.Optimizer != "adamw" {
			d.errorf(t.at("optimizer_implementation"), "optimizer_implementation \"foreach\" is modelled for optimizer = \"adamw\" only, not %q", tr.Optimizer)
		}
		tr.OptimizerForeach = s == "foreach"
	}
	if n, ok := t.integer("optimizer_state_bytes", 0, 64); ok {
		tr.OptimizerStateBytes = n
	}
	// max_grad_norm: a finite threshold, 0 for none (number refuses a
	// string, a boolean, a negative or non-finite figure at its place).
	if f, ok := t.number("max_grad_norm", nil); ok {
		tr.MaxGradNorm = f
	}
	if dt, ok := t.dtype("activation_dtype"); ok {
		if !dt.IsFloat() {
			d.errorf(t.at("activation_dtype"), "activation_dtype must be a floating-point type, not %s", dt)
		} else {
			tr.ActivationDType = dt
		}
	}
}

func (d *decoder) clusterSection(root *tbl, m *Model) {
	c := &m.Cluster
	v, ok := root.m["cluster"]
	if !ok {
		d.keyErrorf("", "missing [cluster] section: it needs at least gpu and world_size")
		return
	}
	if _, isTable := v.(map[string]any); !isTable {
		d.table("cluster", v, "[cluster]") // reports the type, and nothing inside
		return
	}
	t := d.table("cluster", v, "[cluster]", "gpu", "gpus_per_node", "world_size", "nodes", "mesh",
		"intra_node", "inter_node", "intra_node_bandwidth", "inter_node_bandwidth", "nics_per_node", "memory_budget", "profile", "sm_clock_mhz", "power_limit_w",
		"host_link", "host_link_bandwidth")

	preset, memory := "", ""
	switch g := t.m["gpu"].(type) {
	case nil:
		d.keyErrorf("cluster", "[cluster] needs gpu: a preset (%s) or a table of figures", strings.Join(hardware.PresetNames(), ", "))
	case string:
		p, ok := presetGPU(g)
		if !ok {
			d.unknownPreset(t.at("gpu"), "GPU", g, hardware.PresetNames())
		} else {
			preset, c.GPU = g, p
		}
	case map[string]any:
		preset, memory = d.gpuTable(t.at("gpu"), g, &c.GPU)
	default:
		d.errorf(t.at("gpu"), "gpu must be a preset name (%s) or a table of figures, not %s", strings.Join(hardware.PresetNames(), ", "), tomlType(g))
	}
	c.GPU.Preset = preset

	c.GPUsPerNode = int(t.intOr("gpus_per_node", 8, 1, 1024))
	gpusPerNode := c.GPUsPerNode
	world, hasWorld := t.integer("world_size", 1, maxWorldSize)
	nodes, hasNodes := t.integer("nodes", 1, maxWorldSize)
	switch {
	case hasWorld && hasNodes && world != nodes*int64(c.GPUsPerNode):
		d.errorf(t.at("world_size"), "world_size %d does not equal nodes × gpus_per_node = %d × %d", world, nodes, c.GPUsPerNode)
	case hasWorld:
		c.WorldSize = int(world)
	case hasNodes:
		if nodes*int64(c.GPUsPerNode) > maxWorldSize {
			d.errorf(t.at("nodes"), "nodes × gpus_per_node exceeds %d ranks", maxWorldSize)
		} else {
			c.WorldSize = int(nodes) * c.GPUsPerNode
		}
	case !t.has("world_size") && !t.has("nodes"):
		d.keyErrorf("cluster", "[cluster] needs world_size (or nodes)")
	}
	if c.WorldSize > 0 && c.WorldSize < c.GPUsPerNode {
		c.GPUsPerNode = c.WorldSize // one partial node
	}

	if mv, ok := t.m["mesh"]; ok {
		c.Mesh = d.mesh(t.at("mesh"), mv, c.WorldSize)
	}

	ref, _ := hardware.Preset(preset)
	intraDefault := ref.IntraNode
	if intraDefault == "" {
		// A GPU given as figures without a preset: PCIe 5 between GPUs
		// (docs/model-format.md), never a link without bandwidth.
		intraDefault = "pcie5"
	}
	c.IntraNodeBandwidth = d.link(t, "intra_node", intraDefault)
	// inter_node is one NIC's line rate; a node has nics_per_node of them
	// (rail-optimised: one per GPU by default). The plan keeps each GPU's
	// share of the node's NICs; the cost model knows that a ring through
	// the node stripes its channels over all of them.
	interDefault := ref.InterNode
	if interDefault == "" {
		interDefault = "ndr400"
	}
	c.InterNodeBandwidth = d.link(t, "inter_node", interDefault)
	if nics, ok := t.integer("nics_per_node", 1, 1024); ok {
		c.InterNodeBandwidth *= float64(nics) / float64(gpusPerNode)
	}
	hostDefault := ref.HostLink
	if hostDefault == "" {
		hostDefault = "pcie4"
	}
	c.HostBandwidth = d.link(t, "host_link", hostDefault)
	c.Profile = d.readProfile(t, preset)
	c.Profile = d.attentionKernelProfile(c.Profile, m.Train.AttentionKernel, preset)
	c.Profile = d.clockProfile(t, c.Profile, preset)
	c.Profile = d.powerProfile(t, c.Profile, preset)
	c.Profile = memoryProfile(c.Profile, memory)
	if c.Nodes() <= 1 && !t.has("inter_node") && !t.has("inter_node_bandwidth") {
		c.InterNodeBandwidth = c.IntraNodeBandwidth
	}

	// By default the caching allocator may reserve the whole card but
	// what the process holds outside it: the CUDA context and NCCL's
	// buffers, one set per communicator (docs/cost-model.md, "Memory").
	communicators := int64(1)
	if c.Mesh != nil && c.Mesh.Replicate > 1 {
		communicators = 2
	}
	c.MemoryBudget = c.GPU.HBMBytes - hardware.CUDAContextBytes - communicators*hardware.NCCLBytesPerCommunicator
	if c.MemoryBudget <= c.GPU.HBMBytes/2 {
		c.MemoryBudget = c.GPU.HBMBytes // a toy GPU of a few bytes
	}
	if b, ok := t.bytes("memory_budget"); ok {
		if b == 0 {
			d.errorf(t.at("memory_budget"), "memory_budget must be positive")
		} else if c.GPU.HBMBytes > 0 && b > c.GPU.HBMBytes {
			d.errorf(t.at("memory_budget"), "memory_budget %s exceeds the GPU's memory %s", FormatBytes(b), FormatBytes(c.GPU.HBMBytes))
		} else {
			c.MemoryBudget = b
		}
	}
}

func (d *decoder) unknownPreset(path, what, name string, names []string) {
	msg := fmt.Sprintf("unknown %s preset %q", what, name)
	if s := suggest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	d.errorf(path, "%s (presets: %s)", msg, strings.Join(names, ", "))
}

// gpuTable reads explicit GPU figures, optionally starting from a preset.
func (d *decoder) gpuTable(path string, v any, g *GPU) (preset, memory string) {
	t := d.table(path, v, "[cluster.gpu]", "preset", "name", "hbm", "hbm_bandwidth", "memory", "flops")
	if s, ok := t.str("preset"); ok {
		if p, ok := presetGPU(s); ok {
			preset, *g = s, p
		} else {
			d.unknownPreset(t.at("preset"), "GPU", s, hardware.PresetNames())
		}
	}
	if s, ok := t.str("name"); ok {
		if err := ValidLabel(s); err != nil {
			d.errorf(t.at("name"), "GPU %v", err)
		}
		g.Name = s
	}
	if s, ok := t.str("memory"); ok {
		if _, known := hardware.ElementwiseShare(s); known {
			memory = s
		} else {
			d.errorf(t.at("memory"), "memory %q: fsdpc knows the element-wise share of %s", s, strings.Join(hardware.MemoryNames(), ", "))
		}
	}
	if b, ok := t.bytes("hbm"); ok {
		d.inRange(t.at("hbm"), "hbm", float64(b), minHBM, maxHBM, "B")
		g.HBMBytes = b
	}
	if f, ok := t.number("hbm_bandwidth", ParseBandwidth); ok {
		d.inRange(t.at("hbm_bandwidth"), "hbm_bandwidth", f, minHBMBandwidth, maxBandwidth, "B/s")
		g.HBMBandwidth = f
	}
	floatRate := false // flops names a bf16, fp16 or fp32 rate, valid or not
	if fv, ok := t.m["flops"]; ok {
		ft := d.table(t.at("flops"), fv, "[cluster.gpu.flops]", DTypeNames()...)
		for _, k := range sortedKeys(ft.m) {
			if dt, ok := ParseDType(k); ok {
				floatRate = floatRate || dt == BF16 || dt == FP16 || dt == FP32
				if f, ok := ft.number(k, ParseFLOPS); ok {
					if f == 0 {
						d.errorf(ft.at(k), "%s must be positive; leave out a dtype the GPU has no rate for", k)
					} else {
						d.inRange(ft.at(k), k, f, minFLOPS, maxFLOPS, "FLOP/s")
					}
					g.PeakFLOPS[dt] = f
				}
			}
		}
	}
	// Without a preset every figure must be given; one given but wrong is
	// reported where it is, not again here.
	if preset == "" && !t.has("preset") {
		if !t.has("hbm") {
			d.keyErrorf(path, "a GPU without a preset needs hbm")
		}
		if !t.has("hbm_bandwidth") {
			d.keyErrorf(path, "a GPU without a preset needs hbm_bandwidth")
		}
		switch {
		case !t.has("flops"):
			d.keyErrorf(path, "a GPU without a preset needs flops, for example flops = { bf16 = \"989TFLOPS\" }")
		case !floatRate:
			d.keyErrorf(t.at("flops"), "flops needs a bf16, fp16 or fp32 rate, for example flops = { bf16 = \"989TFLOPS\" }")
		}
	}
	if preset == "" && g.Name == "" {
		g.Name = "custom"
	}
	return preset, memory
}

func (d *decoder) mesh(path string, v any, world int) *Mesh {
	var r, s int64
	var ok1, ok2 bool
	switch x := v.(type) {
	case map[string]any:
		t := d.table(path, x, "mesh", "replicate", "shard")
		r, ok1 = t.integer("replicate", 1, maxWorldSize)
		s, ok2 = t.integer("shard", 1, maxWorldSize)
		if !t.has("replicate") || !t.has("shard") {
			d.errorf(path, "mesh needs replicate and shard")
		}
	case []any:
		if len(x) != 2 {
			d.errorf(path, "mesh must be [replicate, shard], two integers, not %d values", len(x))
			return nil
		}
		r, ok1 = d.intValue(indexPath(path, 0), "mesh replicate", x[0], 1, maxWorldSize)
		s, ok2 = d.intValue(indexPath(path, 1), "mesh shard", x[1], 1, maxWorldSize)
	default:
		d.errorf(path, "mesh must be { replicate = R, shard = S } or [R, S], not %s", tomlType(v))
		return nil
	}
	if !ok1 || !ok2 {
		return nil
	}
	if world > 0 && r*s != int64(world) {
		d.errorf(path, "mesh %d × %d = %d ranks, but world_size is %d", r, s, r*s, world)
		return nil
	}
	return &Mesh{Replicate: int(r), Shard: int(s)}
}

// link reads a link preset name (key) or an explicit bandwidth (key +
// "_bandwidth"), falling back to def.
func (d *decoder) link(t *tbl, key, def string) float64 {
	if f, ok := t.number(key+"_bandwidth", ParseBandwidth); ok {
		if t.has(key) {
			d.keyErrorf(t.at(key), "give %s or %s_bandwidth, not both", key, key)
		}
		d.inRange(t.at(key+"_bandwidth"), key+"_bandwidth", f, minLinkBandwidth, maxBandwidth, "B/s")
		return f
	}
	name := def
	if s, ok := t.str(key); ok {
		name = s
	}
	bw, ok := hardware.Link(name)
	if !ok && name != "" {
		d.unknownPreset(t.at(key), "link", name, hardware.LinkNames())
	}
	return bw
}

var groupPolicyKeys = []string{"reshard_after_forward", "prefetch_forward", "prefetch_backward",
	"param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs", "offload",
	"gradient_divide_factor", "force_sum_reduction", "shard_dim"}

func (d *decoder) policySection(root *tbl, m *Model) {
	p := &m.Policy
	p.BlocksPerUnit, p.ReduceScatterBuffers = 1, 1
	v, ok := root.m["policy"]
	if !ok {
		return
	}
	t := d.table("policy", v, "[policy]", append([]string{"units", "tied", "override", "blocks_per_unit", "reduce_scatter_buffers"}, groupPolicyKeys...)...)
	p.BlocksPerUnit = int(t.intOr("blocks_per_unit", 1, 1, 1<<20))
	p.ReduceScatterBuffers = int(t.intOr("reduce_scatter_buffers", 1, 1, 64))
	switch u := t.m["units"].(type) {
	case nil:
	case string:
		switch u {
		case "blocks":
			p.UnitsMode = UnitsBlocks
		case "auto":
			p.UnitsMode = UnitsAuto
		case "block-children":
			p.UnitsMode = UnitsBlockChildren
		default:
			d.errorf(t.at("units"), "units must be \"blocks\", \"block-children\", \"auto\" or an array of module-name patterns, not %q", u)
		}
	case []any:
		p.UnitsMode = UnitsPatterns
		for i, e := range u {
			path := indexPath(t.at("units"), i)
			switch e := e.(type) {
			case string:
				if pat, ok := d.pattern(path, e); ok {
					p.Units = append(p.Units, pat)
				}
			case []any:
				// One unit of several modules: fully_shard([a, b]).
				var g UnitGroup
				for j, x := range e {
					s, ok := x.(string)
					if !ok {
						d.errorf(indexPath(path, j), "units[%d][%d] must be a string, not %s", i, j, tomlType(x))
						continue
					}
					if pat, ok := d.pattern(indexPath(path, j), s); ok {
						g.Patterns = append(g.Patterns, pat)
					}
				}
				if len(e) == 0 {
					d.errorf(path, "units[%d] is an empty group; a group lists the modules of one unit", i)
				}
				p.Groups = append(p.Groups, g)
			default:
				d.errorf(path, "units[%d] must be a module-name pattern or an array of them (one unit of several modules), not %s", i, tomlType(e))
			}
		}
	default:
		d.errorf(t.at("units"), "units must be \"blocks\", \"block-children\", \"auto\" or an array of module-name patterns, not %s", tomlType(u))
	}
	if s, ok := t.enum("tied", "error", "merge"); ok && s == "merge" {
		p.Tied = TiedMerge
	}
	p.Default = d.groupPolicy(t, m)
	if overrides, ok := t.tables("override"); ok {
		for i, raw := range overrides {
			path := indexPath(t.at("override"), i)
			ot := d.table(path, raw, "[[policy.override]]", append([]string{"match"}, groupPolicyKeys...)...)
			o := Override{GroupPolicy: d.groupPolicy(ot, m)}
			if s, ok := ot.str("match"); ok {
				o.Match, _ = d.pattern(ot.at("match"), s)
			} else if !ot.has("match") {
				d.keyErrorf(path, "override needs match, a module-name pattern such as \"layers.*\"")
			}
			p.Overrides = append(p.Overrides, o)
		}
	}
}

func (d *decoder) pattern(path, s string) (Pattern, bool) {
	g, err := CompileGlob(s)
	if err != nil {
		d.errorf(path, "%v", err)
		return Pattern{}, false
	}
	return Pattern{Glob: g, Pos: d.locs[path].val}, true
}

func (d *decoder) groupPolicy(t *tbl, m *Model) GroupPolicy {
	var g GroupPolicy
	switch r := t.m["reshard_after_forward"].(type) {
	case nil:
	case bool:
		g.ReshardAfterForward = &Reshard{Bool: r}
	case int64:
		w := int64(m.Cluster.ShardSize())
		switch {
		case r < 1:
			d.errorf(t.at("reshard_after_forward"), "reshard_after_forward must be true, false or a positive number of ranks, not %d", r)
		case w > 0 && w%r != 0:
			d.errorf(t.at("reshard_after_forward"), "reshard_after_forward = %d must divide the shard group size %d", r, w)
		default:
			g.ReshardAfterForward = &Reshard{N: int(r)}
		}
	default:
		d.errorf(t.at("reshard_after_forward"), "reshard_after_forward must be true, false or an integer, not %s", tomlType(r))
	}
	for _, k := range []string{"prefetch_forward", "prefetch_backward"} {
		if n, ok := t.integer(k, 0, 64); ok {
			n := int(n)
			if k == "prefetch_forward" {
				g.PrefetchForward = &n
			} else {
				g.PrefetchBackward = &n
			}
		}
	}
	for _, k := range []string{"param_dtype", "reduce_dtype", "output_dtype"} {
		dt, ok := t.dtype(k)
		if !ok {
			continue
		}
		if !dt.IsFloat() {
			d.errorf(t.at(k), "%s must be a floating-point type, not %s", k, dt)
			continue
		}
		switch k {
		case "param_dtype":
			g.ParamDType = dt
		case "reduce_dtype":
			g.ReduceDType = dt
		default:
			g.OutputDType = dt
		}
	}
	g.CastForwardInputs, _ = t.boolean("cast_forward_inputs")
	g.Offload, _ = t.boolean("offload")
	g.ForceSumReduction, _ = t.boolean("force_sum_reduction")
	if n, ok := t.integer("shard_dim", 0, maxDims-1); ok {
		n := int(n)
		g.ShardDim = &n
	}
	if f, ok := t.number("gradient_divide_factor", nil); ok {
		if f <= 0 || math.IsInf(f, 0) {
			d.errorf(t.at("gradient_divide_factor"), "gradient_divide_factor must be positive")
		} else {
			g.GradientDivideFactor = &f
		}
	}
	return g
}

// Physical ranges for a GPU given as figures. A figure outside them is a
// typo or a unit slip (1e-300 TFLOPS predicted "step NaN µs"); the bounds
// sit orders of magnitude beyond any device fsdpc models, so no real card
// is refused.
const (
	minFLOPS         = 1e9  // 1 GFLOP/s
	maxFLOPS         = 1e17 // 100 PFLOP/s
	minHBMBandwidth  = 1e9  // 1 GB/s
	minLinkBandwidth = 1e6  // 1 MB/s
	maxBandwidth     = 1e14 // 100 TB/s
	minHBM           = 1 << 20
	maxHBM           = 1 << 50 // 1 PiB
)

// inRange reports a figure outside [lo, hi].
func (d *decoder) inRange(at, key string, v, lo, hi float64, unit string) {
	if v < lo || v > hi {
		d.errorf(at, "%s = %s %s is outside the physical range fsdpc accepts, %s to %s %s", key,
			strconv.FormatFloat(v, 'g', 4, 64), unit, strconv.FormatFloat(lo, 'g', -1, 64), strconv.FormatFloat(hi, 'g', -1, 64), unit)
	}
}

// Optimizers are the optimizer names the model format accepts, sorted.
func Optimizers() []string { return sortedKeys(optimizerStateBytes) }
