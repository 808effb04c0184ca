package calibrate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// csvRow is one record of a calibration CSV, read by column name.
type csvRow struct {
	file string
	line int
	col  map[string]int
	rec  []string
}

// get reads a required column, trimmed.
func (r csvRow) get(c string) string { return strings.TrimSpace(r.rec[r.col[c]]) }

// opt reads a column the format does not require, as written; "" where
// the file has no such column.
func (r csvRow) opt(c string) string {
	if i, ok := r.col[c]; ok {
		return r.rec[i]
	}
	return ""
}

// where names a cell for an error.
func (r csvRow) where(c string) string {
	return fmt.Sprintf("%s:%d (row %s), column %s", r.file, r.line, r.get("row_id"), c)
}

// num parses a positive integer; a blank cell is def, or, where def is
// -1, a figure the source does not state (0, false).
func (r csvRow) num(c string, def int) (int, bool, error) {
	s := r.get(c)
	if s == "" {
		return def, def >= 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0, false, fmt.Errorf("%s: %q is not a positive integer", r.where(c), s)
	}
	return v, true, nil
}

// positive parses a positive number; a blank cell is (0, false).
func (r csvRow) positive(c string) (float64, bool, error) {
	v := r.get(c)
	if v == "" {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("%s: %q is not a positive number", r.where(c), v)
	}
	return f, true, nil
}

// run reads the row as a run: its shape and mesh, its hardware, how it
// trained and what was measured. A non-empty why says why fsdpc cannot
// plan it.
func (r csvRow) run() (x run, why string, err error) {
	x.id, x.source, x.tier = r.get("row_id"), r.get("source_id"), r.get("tier")
	for _, part := range []func(*run) (string, error){r.shape, r.hardware, r.training, r.measured} {
		if why, err = part(&x); why != "" || err != nil {
			return x, why, err
		}
	}
	return x, "", nil
}

// shape reads the model's dimensions and the data-parallel mesh.
func (r csvRow) shape(x *run) (string, error) {
	// Tensor, pipeline and context parallel rows first: their dp_shard ×
	// dp_replicate is not n_gpus. A blank degree is 1.
	for _, c := range []string{"tp", "pp", "cp"} {
		if v := r.get(c); v != "" && v != "1" {
			return "tensor, pipeline or context parallelism (fsdpc plans data parallelism only)", nil
		}
	}
	// A run that applies no FSDP at all (KempnerForge's single-GPU
	// baseline: no device mesh, so no fully_shard) pays none of FSDP2's
	// copy-in, copy-out and casts, which fsdpc plans at every world size
	// (148 ms of S6-1's predicted 3.9 s step): predicting it as FSDP2
	// would charge it for work it never did.
	if s := strings.ToLower(strings.TrimSpace(r.opt("sharding_strategy"))); strings.HasPrefix(s, "n/a") || s == "none" || s == "no fsdp" {
		return fmt.Sprintf("the run applies no FSDP (sharding_strategy %q; fsdpc plans FSDP2 only)", strings.TrimSpace(r.opt("sharding_strategy"))), nil
	}
	unstated := ""
	for _, f := range []struct {
		c   string
		def int
		dst *int
	}{
		{"n_layers", -1, &x.layers}, {"hidden", -1, &x.hidden}, {"n_heads", -1, &x.heads}, {"n_kv_heads", 0, &x.kvHeads},
		{"ffn_hidden", -1, &x.ffn}, {"vocab", -1, &x.vocab}, {"n_gpus", -1, &x.world}, {"gpus_per_node", 8, &x.gpusPerNode},
		{"dp_shard", 0, &x.shard}, {"dp_replicate", 1, &x.replicate}, {"local_batch_size", -1, &x.microBatch},
		{"grad_accum", 1, &x.accum}, {"seq_len", -1, &x.seq},
	} {
		v, ok, err := r.num(f.c, f.def)
		if err != nil {
			return "", err
		}
		if !ok && unstated == "" {
			unstated = f.c
		}
		*f.dst = v
	}
	if unstated != "" {
		return fmt.Sprintf("the source states no %s", unstated), nil
	}
	// A blank n_kv_heads is multi-head attention (a key and value head
	// per query head, as in Llama 2 7B and 13B); a blank dp_shard shards
	// over every GPU the replicas leave.
	if x.kvHeads == 0 {
		x.kvHeads = x.heads
	}
	if x.shard == 0 {
		x.shard = x.world / x.replicate
	}
	if x.shard*x.replicate != x.world {
		return "", fmt.Errorf("%s: dp_shard %d × dp_replicate %d is not n_gpus %d", r.where("dp_shard"), x.shard, x.replicate, x.world)
	}
	return "", nil
}

// hardware reads the GPU, its memory, power and bandwidth, and the
// network.
func (r csvRow) hardware(x *run) (string, error) {
	x.gpuLabel = r.get("gpu")
	if x.gpu = gpuPreset(x.gpuLabel, r.opt("gpu_mem_stated")); x.gpu == "" {
		return fmt.Sprintf("GPU %q has no fsdpc preset", x.gpuLabel), nil
	}
	if _, ok := r.col["gpu_mem_stated"]; ok {
		hbm, err := statedHBM(r.opt("gpu_mem_stated"), x.gpu)
		if err != nil {
			return "", fmt.Errorf("%s: %w", r.where("gpu_mem_stated"), err)
		}
		x.hbm = hbm
	}
	// Meta's Grand Teton H100s: "96GB HBM2e with 2.4 TB/sec peak memory
	// bandwidth" and "the default 500W power limit" (torchtitan
	// benchmarks/llama3_h100_202412_torchtitan.md, Hardware). torchtitan
	// logs that card as 95 GiB, which is how torchao's runs on the same
	// fleet name it, and a stated "96GB" reads as 95.04 GiB (statedHBM);
	// no other H100 has it. Its element-wise kernels stream from HBM2e,
	// not the preset's HBM3 (hardware/elementwise.go).
	if x.gpu == "h100-sxm" && (strings.Contains(strings.ToUpper(x.gpuLabel), "GRAND TETON") || strings.HasPrefix(x.hbm, "95")) {
		x.hbmBandwidth, x.hbmMemory, x.powerLimitW = "2.4TB/s", "HBM2e", 500
	}
	x.nodeNetwork, x.networkPerGPU = parseNetwork(r.get("interconnect"))
	return "", nil
}

// training reads the precision, checkpointing, compilation and what the
// run's framework is known to do.
func (r csvRow) training(x *run) (string, error) {
	if !halfPrecision(r.get("precision")) {
		return fmt.Sprintf("precision %q (fsdpc models bf16 mixed precision; fp8 training is not expressible)", r.get("precision")), nil
	}
	titan := strings.HasPrefix(strings.ToLower(r.get("framework")), "torchtitan")
	// date is the source's date, "" where the row gives none: an undated
	// row is older than every change dated below. A date to the month
	// ("2025-08") is read as that month's first day.
	date := sourceDate(r.opt("source_date"))
	dated := func(from string) bool { return date != "" && date >= from }
	ac := strings.ToLower(r.get("activation_checkpointing"))
	switch {
	case ac == "none" || ac == "no" || ac == "off" || strings.HasPrefix(ac, "none "):
		x.checkpointing = "none"
	case ac == "full" || strings.HasPrefix(ac, "full "):
		x.checkpointing = "full"
	case strings.Contains(ac, "per-op") || strings.Contains(ac, "selective op"):
		x.checkpointing = "selective-op"
	case strings.Contains(ac, "per-layer"):
		x.checkpointing = "selective-layer"
	case strings.HasPrefix(ac, "selective") && titan:
		// torchtitan's Llama configs that checkpoint selectively all set
		// selective_ac_option = "op" (train_configs/llama*.toml, 2024-04
		// to 2025-08; only its debug models run every 2nd layer).
		x.checkpointing = "selective-op"
	case strings.HasPrefix(ac, "selective"):
		// A fraction of the blocks, evenly spaced (fms-fsdp's
		// selective_checkpointing), as the model's published training
		// command sets it; never read off the run's measured figures.
		x.checkpointing, x.checkpointInterval = selectiveFraction(r.get("model"))
	default:
		return fmt.Sprintf("checkpointing %q (fsdpc reads none, full, selective per-op, selective per-layer)", r.get("activation_checkpointing")), nil
	}
	// torchtitan compiles the loss with the model since bbb1b616e
	// (2025-04-02; before, train.py left it eager: "compiling loss
	// function causes CUDA errors"). A row may say "yes (blocks and loss)"
	// or "yes (blocks; loss eager)"; a compiled torchtitan run dated from
	// then on that says neither compiles its loss.
	compile := strings.ToLower(r.get("torch_compile"))
	x.compile = strings.HasPrefix(compile, "yes") || strings.HasPrefix(compile, "true") ||
		compile == "on" || compile == "y" || strings.HasPrefix(compile, "torch.compile")
	x.compileLoss = x.compile && !strings.Contains(compile, "loss eager") &&
		(strings.Contains(compile, "loss") || titan && dated("2025-04-02"))
	// torchtitan computes cross_entropy(pred.flatten(0, 1).float(), …);
	// fms-fsdp calls CrossEntropyLoss on the bf16 output; the others do
	// not say, and get the bf16 loss.
	x.lossUpcast = titan
	// torchtitan's launcher, run_train.sh, sets
	// PYTORCH_ALLOC_CONF="expandable_segments:True"; the others run
	// PyTorch's default.
	x.expandable = titan
	fms := strings.EqualFold(r.get("framework"), "fms-fsdp")
	// torchtitan's Llama RoPE multiplies complex numbers (apply_rotary_emb:
	// view_as_complex of the float upcast, models/llama/model.py at 9dec370
	// and models/llama3/model/model.py at 6fc499f). fms-fsdp's model is
	// ibm-fms's LLaMA, whose RotaryEmbedding.adjusted_qk rotates each pair
	// by a 2 × 2 matrix in fp32, broadcast, multiplied and summed
	// (fms/modules/positions.py at 6440fee8 and 1cb412df, the last commits
	// before the rows' 2024-03-21 and 2024-05-09). The others' are real
	// arithmetic, as far as their sources show.
	switch {
	case titan:
		x.rope = "complex"
	case fms:
		x.rope = "matrix"
	}
	// torchtitan's norm_type: its Llama 2 7B and 13B configs
	// (train_configs/llama_7b.toml, llama_13b.toml at 395a52627) and its
	// Llama 3 8B config from df2dcc746 (2024-04-19) until 5e84866e3
	// (2024-05-02) say "fused_rmsnorm", a Triton kernel that keeps x and
	// rstd; its 70B configs, and the 8B one after, say "rmsnorm", the
	// eager upcast (models/norms.py), until 37c4b8181 (2025-02-06)
	// removed the fused one.
	x.fusedNorm = titan && date != "" && !dated("2024-05-02") && !strings.Contains(r.get("model"), "70B")
	// AdamW's implementation. PyTorch picks foreach on CUDA when the
	// caller names neither (torch/optim/optimizer.py
	// _default_to_fused_or_foreach), as fms-fsdp's optim.AdamW(…, betas,
	// weight_decay) does. torchtitan passed foreach=True (train.py at
	// aafe0e870, 2024-05), then foreach = not optimizer.fused with fused
	// off unless asked (config_manager.py at 9dec370), until 6e4988550
	// (pytorch/torchtitan#881, 2025-02-24) made "fused" the default
	// optimizer.implementation. KempnerForge builds a fused torch AdamW;
	// Megatron's distributed optimizer is its own fused Adam.
	x.foreachOptimizer = fms || titan && !dated("2025-02-24")
	// fms-fsdp reduces gradients in bf16: get_policies (fms_fsdp/utils/
	// train_utils.py at 4ffb9bdf and ed74fd5, the rows' commits) hands
	// FSDP1 bfSixteen, MixedPrecision(param_dtype, reduce_dtype and
	// buffer_dtype all bfloat16; fms_fsdp/policies/mixed_precision.py),
	// whenever mixed_precision is on, its default. torchtitan reduces in
	// fp32 (mixed_precision_reduce "float32").
	x.reduceBF16 = fms
	// Gradient-norm clipping before every optimizer step, at 1.0, in every
	// trainer with rows here. torchtitan: train.py calls
	// clip_grad_norm_(…, job_config.training.max_norm, foreach=True) every
	// step, the flag defaulting to 1.0 and its Llama train_configs setting
	// max_norm = 1.0 (395a526, 0809984 and 4d88a8a44 through 6fc499f and
	// 2c8b594, the rows' commits; since 2024-12 through its
	// dist_utils.clip_grad_norm_). fms-fsdp: train_utils.py calls FSDP1's
	// model.clip_grad_norm_(cfg.grad_clip_thresh), 1.0 in config/
	// training.py (4ffb9bdf, ed74fd5). KempnerForge: scripts/train.py calls
	// its clip_grad_norm_ (torch.nn.utils.clip_grad_norm_, foreach, on one
	// mesh) with grad_clip_norm, which must be positive (config/schema.py
	// at 01b461a), and benchmarks/mfu_scaling/mfu_bench.sh passes
	// --train.grad_clip_norm=1.0.
	if titan || fms || strings.EqualFold(r.get("framework"), "KempnerForge") {
		x.maxGradNorm = 1.0
	}
	x.activation = mlpActivation(r.get("model"), r.get("arch_note"))
	// The 2024 sources ran FlashAttention-2 (cuDNN SDPA was not PyTorch's
	// default then: pytorch/pytorch#128539 reverted it). torchtitan asks
	// SDPA for cuDNN first on compute capability 10.0 and above (B200)
	// since 3b85aa31f, 2025-05-14 (pytorch/torchtitan#1196,
	// torchtitan/models/attention.py ScaledDotProductAttention).
	x.attentionKernel = "flash2"
	if titan && x.gpu == "b200" && dated("2025-05-14") {
		x.attentionKernel = "cudnn"
	}
	if strings.EqualFold(r.get("framework"), "KempnerForge") {
		// KempnerForge's own H200 profile (benchmarks/profiling/
		// 13b_24gpu_profiling.md, a7f8346, 2026-04-07) runs
		// aten::_cudnn_attention_backward: its SDPA dispatched to cuDNN.
		// The call is the report's: model/attention.py is the same at
		// 01b461a and a7f8346 (F.scaled_dot_product_attention, is_causal,
		// under no sdpa_kernel context; the sdpa_backend option came with
		// b0311d7, 2026-04-16), and uv.lock pins torch 2.11.0+cu128 with
		// cuDNN 9.19.0 at both.
		x.attentionKernel = "cudnn"
		// KempnerForge keeps no fp32 master weights: at 01b461a (the
		// report's commit) build_parallel_model builds the model
		// .to(dtype=param_dtype), and TrainingConfig.param_dtype resolves
		// mixed_precision "bf16" to bfloat16 ("the master weight dtype");
		// its fused torch AdamW then holds exp_avg and exp_avg_sq like the
		// parameters, in bf16.
		x.bf16Master = true
		// Its gradient accumulation (training/grad.py maybe_no_sync,
		// scripts/train.py at 01b461a) calls FSDP2's
		// set_requires_gradient_sync(False) on every micro-batch but the
		// last: unsharded gradients accumulate meanwhile.
		x.accumulateUnsharded = x.accum > 1
	}
	return "", nil
}

// measured reads what the source measured: out of memory, throughput,
// peak memory.
func (r csvRow) measured(x *run) (string, error) {
	status := strings.ToLower(r.get("status"))
	x.oom = strings.Contains(status, "oom") || strings.Contains(status, "out of memory")
	if !x.oom {
		// A row that states no throughput is checked for memory alone.
		tps, ok, err := r.positive("tps_per_gpu")
		if err != nil {
			return "", err
		}
		if !ok {
			total, okTotal, err := r.positive("tps_total")
			if err != nil {
				return "", err
			}
			if okTotal {
				tps = total / float64(x.world)
			}
		}
		x.tokensPerGPU = tps
	}
	m, ok, err := r.positive("mem_peak_value")
	if err != nil {
		return "", err
	}
	if ok {
		// The unit is the cell's first word ("GiB (labelled GB)": the
		// curator's GiB, whatever the source printed).
		unit := ""
		if f := strings.Fields(r.get("mem_peak_unit")); len(f) > 0 {
			unit = f[0]
		}
		scale, known := memUnits[unit]
		if unit == "%" || strings.HasPrefix(unit, "%") {
			// A share of the card's memory ("% of device"): of the
			// memory the source states, else the preset's.
			gib, err := cardGiB(x)
			if err != nil {
				return "", fmt.Errorf("%s: %w", r.where("mem_peak_unit"), err)
			}
			scale, known = gib/100, true
		}
		if !known {
			return "", fmt.Errorf("%s: unknown unit %q (GiB, GB, MiB, MB, %% of the device)", r.where("mem_peak_unit"), r.get("mem_peak_unit"))
		}
		// A figure whose metric is neither peak reserved nor peak
		// allocated cannot be set against either prediction: the row is
		// checked for throughput alone.
		metric := strings.ToLower(r.get("mem_peak_metric"))
		switch {
		case strings.Contains(metric, "reserved"):
			x.memReserved, x.memGiB = true, m*scale
		case strings.Contains(metric, "allocated"):
			x.memGiB = m * scale
		}
	}
	if x.tokensPerGPU == 0 && x.memGiB == 0 && !x.oom {
		return "the source states neither throughput nor a peak-memory figure fsdpc predicts", nil
	}
	return "", nil
}
