package calibrate

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/fsdpc/fsdpc/hardware"
	"github.com/fsdpc/fsdpc/internal/safetext"
)

// run is one measured training run of the calibration CSV, as fsdpc can
// express it.
type run struct {
	id, source, tier string
	// Model shape (Llama-family decoder).
	layers, hidden, heads, kvHeads, ffn, vocab int
	// Cluster.
	gpu                 string // fsdpc GPU preset
	gpuLabel            string
	hbm                 string // the card's memory when the source states one other than the preset's ("95GiB"), else ""
	hbmBandwidth        string // the card's memory bandwidth when it is not the preset's ("2.4TB/s"), else ""
	hbmMemory           string // the card's memory generation when it is not the preset's ("HBM2e"), else ""
	powerLimitW         int    // the GPUs' power limit when the source states one below the TDP, else 0
	world, gpusPerNode  int
	shard, replicate    int
	nodeNetwork         float64 // bytes/s out of a node when the source states it, else 0
	networkPerGPU       bool    // the source gives the figure per GPU
	checkpointing       string  // none, full, selective-op, selective-layer
	checkpointInterval  int     // selective-layer: every k-th block; 0 for the default
	compile             bool
	compileLoss         bool    // torch.compile also compiles the loss (torchtitan since 2025-04)
	lossUpcast          bool    // the trainer upcasts the logits to fp32 for the loss
	bf16Master          bool    // parameters, gradients and AdamW's state are bf16 (no fp32 master copy)
	reduceBF16          bool    // gradients are reduce-scattered in bf16 (reduce_dtype), not fp32
	foreachOptimizer    bool    // AdamW runs PyTorch's foreach implementation, not the fused kernel
	maxGradNorm         float64 // the gradient-norm clipping threshold before every step, 0 for none
	accumulateUnsharded bool    // micro-batches before the last skip the reduce-scatter (set_requires_gradient_sync(False))
	attentionKernel     string
	rope                string // the attention's RoPE form: "complex" (torchtitan's view_as_complex, which Inductor does not fuse), "matrix" (ibm-fms's 2 × 2 rotation), "" real
	fusedNorm           bool   // RMSNorm as a fused kernel (torchtitan's Triton fused_rmsnorm), not eager's upcast
	activation          string // the MLP's: "swiglu" (Llama family) or "gelu" (GPT family)
	expandable          bool   // PYTORCH_ALLOC_CONF=expandable_segments:True
	microBatch, accum   int
	seq                 int
	// Measured.
	tokensPerGPU float64 // 0 when not measured (OOM rows)
	oom          bool
	memGiB       float64 // 0 when not measured
	memReserved  bool    // the memory figure is peak reserved (else peak allocated)
}

// unsupported is a row fsdpc cannot express, with why.
type unsupported struct {
	ID, Why string
}

// columns the harness reads; a file without one of them is refused.
var columns = []string{"row_id", "tier", "source_id", "framework", "n_layers", "hidden", "n_heads", "n_kv_heads", "ffn_hidden", "vocab",
	"gpu", "n_gpus", "gpus_per_node", "interconnect", "dp_shard", "dp_replicate", "tp", "pp", "cp", "precision",
	"activation_checkpointing", "torch_compile", "local_batch_size", "grad_accum", "seq_len", "tps_per_gpu", "tps_total",
	"mem_peak_value", "mem_peak_unit", "mem_peak_metric", "status"}

// readRuns parses a calibration CSV in the format of
// ../shared/calibration/published-runs.csv. Errors name the row (by its
// line and row_id) and the column; a row fsdpc cannot plan is listed in
// the second result with why, and the others still run.
func readRuns(name string, r io.Reader) ([]run, []unsupported, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading the header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, c := range columns {
		if _, ok := col[c]; !ok {
			return nil, nil, fmt.Errorf("%s: the header has no column %q", name, c)
		}
	}
	var runs []run
	var skipped []unsupported
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		row := csvRow{file: name, line: line, col: col, rec: rec}
		// The ID names the row in every message and its model file: it is
		// checked first, as the model format checks a name.
		if id := row.get("row_id"); !safetext.Printable(id) {
			return nil, nil, fmt.Errorf("%s:%d: row_id %s may contain only printable characters (no control characters, line breaks or tabs)", name, line, safetext.Term(id))
		}
		x, why, err := row.run()
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			skipped = append(skipped, unsupported{ID: x.id, Why: why})
			continue
		}
		runs = append(runs, x)
	}
	return runs, skipped, nil
}

// gpuPreset is the fsdpc GPU preset of a row's gpu label and stated
// memory ("40GB" tells the 40 GB A100), or "" where fsdpc has none.
func gpuPreset(label, stated string) string {
	gib := 0.0
	if m := leadingNumber.FindString(strings.TrimSpace(stated)); m != "" {
		gib, _ = strconv.ParseFloat(m, 64)
	}
	return hardware.Recognize(label, gib)
}

// presetHBM is a GPU preset's device memory in bytes, as PyTorch reports
// the card's total, and whether the preset exists.
func presetHBM(preset string) (int64, bool) {
	g, ok := hardware.Preset(preset)
	return g.HBMBytes, ok
}

var (
	leadingNumber = regexp.MustCompile(`^\d+(\.\d+)?`)
	isoDate       = regexp.MustCompile(`\b(\d{4})-(\d{2})(?:-(\d{2}))?\b`)
	memSize       = regexp.MustCompile(`^\s*(\d+(?:\.\d+)?)\s*(GiB|GB|G)\b`)
)

// sourceDate is the first ISO date in a source_date cell, as
// YYYY-MM-DD: "2025-08" (a month) is its first day, so that a change
// dated within that month counts as after it only from the 1st. "" when
// the cell holds no date.
func sourceDate(cell string) string {
	m := isoDate.FindStringSubmatch(cell)
	if m == nil {
		return ""
	}
	day := m[3]
	if day == "" {
		day = "01"
	}
	return m[1] + "-" + m[2] + "-" + day
}

// cardGiB is the run's card memory in GiB: what the source states, else
// the preset's.
func cardGiB(x *run) (float64, error) {
	if x.hbm != "" {
		v, err := strconv.ParseFloat(strings.TrimSuffix(x.hbm, "GiB"), 64)
		if err != nil {
			return 0, fmt.Errorf("card memory %q: %w", x.hbm, err)
		}
		return v, nil
	}
	b, ok := presetHBM(x.gpu)
	if !ok {
		return 0, fmt.Errorf("a share of the device's memory needs the card's size; GPU %q has no preset size", x.gpu)
	}
	return float64(b) / (1 << 30), nil
}

// statedHBM reads a source's stated card memory for the model file's
// gpu table: "95GiB" as is; "96GB", "80G", "141 GB" as the marketed size,
// of which PyTorch reports about 1% less (94.99 GiB for Meta's 96 GB
// H100s in pytorch/torchtitan#1625's log, 79.65 GiB for an 80 GB H100,
// the preset). "" keeps the preset: nothing stated, text without a size,
// or a marketed size within 3% of the preset's.
func statedHBM(field, preset string) (string, error) {
	m := memSize.FindStringSubmatch(field)
	if m == nil {
		if strings.Contains(field, "GB") || strings.Contains(field, "GiB") {
			return "", fmt.Errorf("%q does not start with a memory size (95GiB, 96GB)", field)
		}
		return "", nil
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v <= 0 || v > 1e6 {
		return "", fmt.Errorf("%q is not a memory size", field)
	}
	if m[2] == "GiB" {
		return m[1] + "GiB", nil
	}
	gib := v * 0.99
	if have, ok := presetHBM(preset); ok && math.Abs(gib*(1<<30)-float64(have)) < 0.03*float64(have) {
		return "", nil
	}
	return fmt.Sprintf("%.2fGiB", gib), nil
}

var gbps = regexp.MustCompile(`(\d+)\s*Gb(ps|/s)`)

// parseNetwork reads a stated network figure: "400Gb/s ... per GPU" or a
// node's "800 Gbps". It returns the node's bandwidth out in bytes/s, 0
// when the source states none.
func parseNetwork(s string) (float64, bool) {
	m := gbps.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v * 1e9 / 8, strings.Contains(strings.ToLower(s), "per gpu")
}

// fmsSelective is the fraction p of blocks fms-fsdp's selective
// checkpointing wraps (fms_fsdp/policies/ac_handler.py: p evenly spaced
// blocks; p = 1 is every block) in the training commands of its Llama 2
// runs, by model size: facebookresearch/DynamicTanh, llama/README.md,
// whose baselines are "the same command" as fms-fsdp's (13B and 34B
// --selective_checkpointing=0.5, 70B 1).
var fmsSelective = map[string]float64{"13b": 0.5, "34b": 0.5, "70b": 1}

var modelSize = regexp.MustCompile(`(?i)\b(\d+)\s*b\b`)

// selectiveFraction is how a row that checkpoints "selective" blocks
// without a stated fraction is planned: fms-fsdp's published fraction for
// the model's size (p = 1: full; p = 1/k: every k-th block), else every
// 2nd block, torchtitan's selective_ac_option default.
func selectiveFraction(model string) (mode string, interval int) {
	p := 0.5
	if m := modelSize.FindStringSubmatch(model); m != nil {
		if f, ok := fmsSelective[strings.ToLower(m[1])+"b"]; ok {
			p = f
		}
	}
	if p >= 1 {
		return "full", 0
	}
	return "selective-layer", int(math.Round(1 / p))
}

// halfPrecision says whether a row trains in 16-bit mixed precision,
// bf16 ("bf16 mixed precision", "bfloat16 AMP") or fp16, which run at the
// same tensor-core rate and are planned alike; fp8 recipes, which keep
// bf16 for some layers, are not.
func halfPrecision(p string) bool {
	p = strings.ToLower(p)
	if strings.Contains(p, "fp8") || strings.Contains(p, "float8") {
		return false
	}
	return strings.Contains(p, "bf16") || strings.Contains(p, "bfloat16") || strings.Contains(p, "fp16") || strings.Contains(p, "float16")
}

// memUnits converts a peak-memory figure's unit to GiB.
var memUnits = map[string]float64{"GiB": 1, "GB": 1e9 / (1 << 30), "MiB": 1.0 / 1024, "MB": 1e6 / (1 << 30)}

// gptFamily matches the model names of decoders whose MLP is a plain
// two-matrix GELU one (GPT-2 and GPT-3, GPT-J, GPT-NeoX and Pythia, OPT,
// BLOOM, MPT, Falcon, StarCoder), not Llama's gated SwiGLU with its third
// matrix.
var gptFamily = regexp.MustCompile(`(?i)^\s*(gpt|opt|bloom|mpt|falcon|pythia|starcoder)\b|\bgpt-?(2|3|j|neox)\b`)

// mlpActivation is a row's MLP activation: "gelu" where its architecture
// note says GELU or its model is of the GPT family, otherwise the Llama
// family's "swiglu", which every row of the calibration set is.
func mlpActivation(model, archNote string) string {
	note := strings.ToLower(archNote)
	if strings.Contains(note, "swiglu") || strings.Contains(note, "gated") {
		return "swiglu"
	}
	if strings.Contains(note, "gelu") || gptFamily.MatchString(model) {
		return "gelu"
	}
	return "swiglu"
}
