package calibrate

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReadCalibrationSet: the committed calibration set parses; what fsdpc
// cannot express is listed with why, not dropped.
func TestReadCalibrationSet(t *testing.T) {
	f, err := os.Open("published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, skipped, err := readRuns("published-runs.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs)+len(skipped) != 35 || len(skipped) != 6 {
		t.Errorf("%d runs and %d skipped, want 29 and 6", len(runs), len(skipped))
	}
	oom := 0
	for _, r := range runs {
		if r.oom {
			oom++
		}
		if !r.oom && r.tokensPerGPU <= 0 {
			t.Errorf("%s: no throughput", r.id)
		}
	}
	if oom != 2 {
		t.Errorf("%d OOM rows, want 2", oom)
	}
}

// TestReadErrors: bad input names the row and the column.
func TestReadErrors(t *testing.T) {
	f, err := os.Open("published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := recs[0]
	col := func(name string) int { return slices.Index(header, name) }
	edit := func(changes map[string]string) string {
		row := slices.Clone(recs[1])
		for k, v := range changes {
			row[col(k)] = v
		}
		var b strings.Builder
		w := csv.NewWriter(&b)
		w.Write(header)
		w.Write(row)
		w.Flush()
		return b.String()
	}
	dropped := slices.Delete(slices.Clone(header), col("seq_len"), col("seq_len")+1)
	for _, c := range []struct {
		name, text, want string
	}{
		{"missing column", strings.Join(dropped, ",") + "\n", `no column "seq_len"`},
		{"bad number", edit(map[string]string{"seq_len": "lots"}), "x.csv:2 (row S3-L3-8B-a), column seq_len"},
		{"unknown unit", edit(map[string]string{"mem_peak_value": "40", "mem_peak_unit": "TB", "mem_peak_metric": "peak reserved"}), "x.csv:2 (row S3-L3-8B-a), column mem_peak_unit"},
	} {
		_, _, err := readRuns("x.csv", strings.NewReader(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestSelectiveNotFromMeasurement: a row that checkpoints "selective"
// with no fraction gets fms-fsdp's published fraction for its model size
// (13B, 34B: every 2nd block; 70B: every block), whatever HFU and MFU it
// states: no input is read off a row's measured result.
func TestSelectiveNotFromMeasurement(t *testing.T) {
	for _, tc := range []struct {
		model    string
		mode     string
		interval int
	}{
		{"Llama 2 13B", "selective-layer", 2},
		{"Llama 2 34B (Code-Llama-34B shape)", "selective-layer", 2},
		{"Llama 2 70B", "full", 0},
		{"Some 9B model", "selective-layer", 2},
		{"unnamed", "selective-layer", 2},
	} {
		for _, hfu := range []string{"46.0", "74.0", ""} {
			r := editedRun(t, "published-runs.csv", 1, map[string]string{"framework": "fms-fsdp", "model": tc.model,
				"activation_checkpointing": "selective (fraction not stated)", "mfu_pct": "43.0", "hfu_pct": hfu})
			if r.checkpointing != tc.mode || r.checkpointInterval != tc.interval {
				t.Errorf("%s, HFU %q: %s every %d, want %s every %d", tc.model, hfu, r.checkpointing, r.checkpointInterval, tc.mode, tc.interval)
			}
		}
	}
}

func TestSourceDate(t *testing.T) {
	for _, tc := range []struct{ cell, want string }{
		{"2025-04-02", "2025-04-02"},
		{"2025-08", "2025-08-01"},
		{"2024-04-24 (table), doc version 2024-08-23", "2024-04-24"},
		{"June 2025", ""},
		{"", ""},
		{"20250-08", ""},
	} {
		if got := sourceDate(tc.cell); got != tc.want {
			t.Errorf("sourceDate(%q) = %q, want %q", tc.cell, got, tc.want)
		}
	}
}

// TestReadMemorySet: the memory validation set parses, every row that ran
// has a peak-memory figure, one ran out of memory, every row cites a source, and a card's stated memory
// reaches the model file.
func TestReadMemorySet(t *testing.T) {
	src, err := os.ReadFile("memory-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	runs, skipped, err := readRuns("memory-runs.csv", strings.NewReader(string(src)))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 11 || len(skipped) != 0 {
		t.Errorf("%d runs and %d skipped, want 11 and 0", len(runs), len(skipped))
	}
	recs, err := csv.NewReader(strings.NewReader(string(src))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	ref := slices.Index(recs[0], "source_ref")
	oom := 0
	for i, r := range runs {
		if r.oom {
			oom++
		} else if r.memGiB <= 0 || !r.memReserved {
			t.Errorf("%s: memory %v GiB reserved=%v, want a peak-reserved figure", r.id, r.memGiB, r.memReserved)
		}
		if !strings.Contains(recs[i+1][ref], "https://") {
			t.Errorf("%s: source_ref %q cites no address", r.id, recs[i+1][ref])
		}
	}
	if oom != 1 {
		t.Errorf("%d OOM rows, want 1", oom)
	}
	// Grand Teton's card: 95 GiB of HBM2e at 2.4 TB/s, capped at 500 W.
	if m := modelFile(runs[0]); !strings.Contains(m, `gpu = { preset = "h100-sxm", hbm = "95GiB", hbm_bandwidth = "2.4TB/s", memory = "HBM2e" }`) || !strings.Contains(m, "\npower_limit_w = 500\n") {
		t.Errorf("M1's model file does not carry the 95 GiB, 2.4 TB/s, 500 W card:\n%s", m)
	}
	bad := strings.Replace(string(src), ",95GiB,", ",lots GiB,", 1)
	if _, _, err := readRuns("x.csv", strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "x.csv:2 (row M1-TT-8g-eager), column gpu_mem_stated") {
		t.Errorf("a bad gpu_mem_stated: %v", err)
	}
}

// TestKempnerForgeState: KempnerForge's runs keep bf16 parameters and
// AdamW state (no fp32 master copy) and accumulate unsharded gradients,
// as its code at the report's commit does; torchtitan's keep fp32 master
// weights and accumulate sharded.
func TestKempnerForgeState(t *testing.T) {
	f, err := os.Open("published-runs.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, _, err := readRuns("published-runs.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		m := modelFile(r)
		kf := r.source == "S6"
		for _, s := range []string{"\ndtype = \"bf16\"", "optimizer_state_bytes = 4", `accumulate = "unsharded"`} {
			if strings.Contains(m, s) != kf {
				t.Errorf("%s: model file has %q: %v, want %v", r.id, s, strings.Contains(m, s), kf)
			}
		}
	}
}

// TestForeachOptimizer: AdamW runs foreach where the run's code left
// PyTorch to choose (fms-fsdp) or asked for it (torchtitan before
// 6e4988550, 2025-02-24), fused elsewhere.
func TestForeachOptimizer(t *testing.T) {
	want := map[string]bool{
		"S3-L3-8B-a": true, "S7-eager-7b-A100": true, "S6-8": false, // published-runs.csv
		"M1-TT-8g-eager": true, "M3-TT-128g-eager": true, "M5-AO-H100-compile": true, "M8-AO-f8nc-noac": true,
		"M6-AO-B200-compile": false, "M7-AO-MI300X-compile": false, // memory-runs.csv
	}
	forWantedRows(t, want, func(r run, w bool) {
		if got := strings.Contains(modelFile(r), `optimizer_implementation = "foreach"`); got != w {
			t.Errorf("%s: foreach %v, want %v", r.id, got, w)
		}
	})
}

// TestReduceDtype: fms-fsdp's rows reduce gradients in bf16 (its
// bfSixteen policy), the others in fp32.
func TestReduceDtype(t *testing.T) {
	want := map[string]string{
		"S7-eager-7b-A100": "bf16", "S7-compile-70b-H100": "bf16", "S3-L3-8B-a": "fp32", "S6-8": "fp32", // published-runs.csv
		"M1-TT-8g-eager": "fp32", "M6-AO-B200-compile": "fp32", // memory-runs.csv
	}
	forWantedRows(t, want, func(r run, w string) {
		if line := fmt.Sprintf("reduce_dtype = %q", w); !strings.Contains(modelFile(r), line) {
			t.Errorf("%s: model file lacks %s", r.id, line)
		}
	})
}

// TestRoPEForm: fms-fsdp's rows rotate by ibm-fms's 2 × 2 matrix,
// torchtitan's multiply complex numbers, the others write no rope (real).
func TestRoPEForm(t *testing.T) {
	want := map[string]string{"S7-eager-7b-A100": "matrix", "S7-compile-70b-H100": "matrix", "S3-L3-8B-a": "complex", "S6-8": ""}
	forWantedRows(t, want, func(r run, w string) {
		src := modelFile(r)
		if w == "" {
			if strings.Contains(src, "rope =") {
				t.Errorf("%s: model file names a rope form, want none", r.id)
			}
		} else if line := fmt.Sprintf("rope = %q", w); !strings.Contains(src, line) {
			t.Errorf("%s: model file lacks %s", r.id, line)
		}
	})
}

// TestStatedHBM: a stated card size replaces the preset's only when it
// differs; a marketed size in GB is what PyTorch reports less about 1%.
func TestStatedHBM(t *testing.T) {
	for _, c := range []struct {
		field, preset, want string
		bad                 bool
	}{
		{"95GiB", "h100-sxm", "95GiB", false},
		{"96GB", "h100-sxm", "95.04GiB", false},
		{"94 GB", "h100-sxm", "93.06GiB", false},
		{"80GB", "h100-sxm", "", false},
		{"80G per MFU header", "a100-80gb", "", false},
		{"141 GB", "h200", "", false},
		{"", "h100-sxm", "", false},
		{"not stated", "h100-sxm", "", false},
		{"lots GiB", "h100-sxm", "", true},
	} {
		got, err := statedHBM(c.field, c.preset)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%q on %s: %q, %v; want %q (error %v)", c.field, c.preset, got, err, c.want, c.bad)
		}
	}
}

// editedRun reads row index of a calibration CSV (1 is the first row after
// the header) back through readRuns after setting the given columns.
func editedRun(t *testing.T, file string, index int, set map[string]string) run {
	t.Helper()
	runs, skipped := readEdited(t, file, rowEdit{index, set})
	if len(runs) != 1 {
		t.Fatalf("%s row %d with %v: skipped (%v)", file, index, set, skipped)
	}
	return runs[0]
}

// rowEdit is a row of a CSV, by its index among the records (1 is the
// first after the header), with some cells replaced.
type rowEdit struct {
	index int
	set   map[string]string
}

// readEdited reads file's header and the edited rows, in order, as
// readRuns reads a file.
func readEdited(t *testing.T, file string, rows ...rowEdit) ([]run, []unsupported) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(src))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := recs[0]
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write(header)
	for _, e := range rows {
		row := slices.Clone(recs[e.index])
		for name, v := range e.set {
			i := slices.Index(header, name)
			if i < 0 {
				t.Fatalf("%s has no column %q", file, name)
			}
			row[i] = v
		}
		w.Write(row)
	}
	w.Flush()
	runs, skipped, err := readRuns("x.csv", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return runs, skipped
}

// TestCompiledLossByDate: a compiled torchtitan run compiles its loss
// from 2025-04-02 on, unless the row says the loss ran eager.
func TestCompiledLossByDate(t *testing.T) {
	for _, c := range []struct {
		compile, date string
		want          bool
	}{
		{"yes", "2025-08-15", true},
		{"yes", "2025-01-27", false},
		{"yes (blocks; loss eager)", "2025-08-15", false},
		{"yes (blocks and loss)", "2025-01-27", true},
		{"no", "2025-08-15", false},
		{"yes", "", false},
	} {
		r := editedRun(t, "memory-runs.csv", 5, map[string]string{"torch_compile": c.compile, "source_date": c.date}) // M5, torchtitan
		if r.compileLoss != c.want {
			t.Errorf("compile %q dated %q: compiled loss %v, want %v", c.compile, c.date, r.compileLoss, c.want)
		}
	}
}

// TestGPUPresetOfRow: the 40 GB A100 and the PCIe H100 get their own
// presets, by the gpu label or the stated memory.
func TestGPUPresetOfRow(t *testing.T) {
	for _, c := range []struct{ gpu, mem, want string }{
		{"A100 80GB", "80GB", "a100-80gb"},
		{"A100-SXM4-40GB", "", "a100-40gb"},
		{"A100", "40GB", "a100-40gb"},
		{"H100 PCIe", "", "h100-pcie"},
		{"H100 SXM5", "80GB", "h100-sxm"},
		{"NVIDIA A100-SXM4-80GB", "", "a100-80gb"},
		{"NVIDIA H100 80GB HBM3", "", "h100-sxm"},
		{"AMD Instinct MI300X", "", "mi300x"},
	} {
		r := editedRun(t, "published-runs.csv", 1, map[string]string{"gpu": c.gpu, "gpu_mem_stated": c.mem})
		if r.gpu != c.want {
			t.Errorf("gpu %q, memory %q: preset %s, want %s", c.gpu, c.mem, r.gpu, c.want)
		}
	}
}

// TestTorchtitanSelective: a torchtitan row that says only "selective"
// checkpoints per op, as every torchtitan Llama config that checkpoints
// selectively does; another framework's "selective" stays per-layer.
func TestTorchtitanSelective(t *testing.T) {
	for framework, want := range map[string]string{"torchtitan": "selective-op", "fms-fsdp": "selective-layer"} {
		r := editedRun(t, "memory-runs.csv", 1, map[string]string{"activation_checkpointing": "selective", "framework": framework})
		if r.checkpointing != want {
			t.Errorf("%s, \"selective\": %s, want %s", framework, r.checkpointing, want)
		}
	}
}

// TestTorchtitanB200CuDNN: a torchtitan run on B200 dated from
// 2025-05-14 (pytorch/torchtitan#1196) runs cuDNN attention; an earlier
// one, another GPU or another framework FlashAttention-2.
func TestTorchtitanB200CuDNN(t *testing.T) {
	for _, c := range []struct{ framework, gpu, date, want string }{
		{"torchtitan", "B200 (power limited)", "2025-08-15", "cudnn"},
		{"torchtitan", "B200", "2025-05-14", "cudnn"},
		{"torchtitan", "B200", "2025-05-13", "flash2"},
		{"torchtitan", "B200", "", "flash2"},
		{"torchtitan", "MI300X", "2025-08-11", "flash2"},
		{"torchtitan", "H100 SXM5", "2025-08-15", "flash2"},
		{"fms-fsdp", "B200", "2025-08-15", "flash2"},
	} {
		r := editedRun(t, "memory-runs.csv", 7, map[string]string{"framework": c.framework, "gpu": c.gpu, "source_date": c.date}) // M6, torchtitan on B200
		if r.attentionKernel != c.want {
			t.Errorf("%s on %s dated %q: attention %s, want %s", c.framework, c.gpu, c.date, r.attentionKernel, c.want)
		}
	}
}

func TestMLPActivation(t *testing.T) {
	for _, c := range []struct{ model, note, want string }{
		{"Llama 3 8B", "Llama 3/3.1 8B; ffn 14336 derived", "swiglu"},
		{"Llama 2 13B", "", "swiglu"},
		{"GPT-3 175B", "", "gelu"},
		{"GPT 175B", "96 layers, MHA", "gelu"},
		{"OPT-30B", "", "gelu"},
		{"BLOOM 176B", "", "gelu"},
		{"MPT-7B", "", "gelu"},
		{"Falcon 40B", "", "gelu"},
		{"Pythia 12B", "", "gelu"},
		{"Mistral 7B", "", "swiglu"},
		{"Custom 7B", "GELU MLP, 4h", "gelu"},
		{"GPT-style 7B", "SwiGLU MLP", "swiglu"},
	} {
		if got := mlpActivation(c.model, c.note); got != c.want {
			t.Errorf("mlpActivation(%q, %q) = %s, want %s", c.model, c.note, got, c.want)
		}
	}
}

// TestIncompleteRows: a row the harness cannot plan is listed with why,
// not an error that stops the rest: a 2D row whose data-parallel degrees
// do not multiply to its GPUs, a row without a vocabulary. A blank
// n_kv_heads is multi-head attention and a blank dp_shard shards over
// every GPU.
func TestIncompleteRows(t *testing.T) {
	runs, skipped := readEdited(t, "published-runs.csv",
		rowEdit{1, map[string]string{"row_id": "tp", "n_gpus": "256", "dp_shard": "32", "tp": "8"}},
		rowEdit{2, map[string]string{"row_id": "novocab", "vocab": ""}},
		rowEdit{3, map[string]string{"row_id": "mha", "n_kv_heads": "", "dp_shard": ""}})
	why := map[string]string{}
	for _, s := range skipped {
		why[s.ID] = s.Why
	}
	if !strings.Contains(why["tp"], "tensor, pipeline or context parallelism") {
		t.Errorf("the 2D row: %q, want it skipped for tensor parallelism", why["tp"])
	}
	if why["novocab"] != "the source states no vocab" {
		t.Errorf("the row without a vocabulary: %q", why["novocab"])
	}
	if len(runs) != 1 || runs[0].id != "mha" {
		t.Fatalf("runs %+v, want the mha row alone", runs)
	}
	if r := runs[0]; r.kvHeads != r.heads || r.shard != r.world/r.replicate {
		t.Errorf("blank n_kv_heads and dp_shard read as %d kv heads of %d, dp_shard %d of %d GPUs", r.kvHeads, r.heads, r.shard, r.world)
	}
}

// TestUnshardedRunListed: a run that applies no FSDP (KempnerForge's
// single-GPU baseline) is listed as one fsdpc cannot express, not
// predicted as FSDP2 with copies and casts the run never did; a run that
// states a sharding strategy, or none, is read.
func TestUnshardedRunListed(t *testing.T) {
	runs, skipped := readEdited(t, "published-runs.csv",
		rowEdit{1, map[string]string{"row_id": "single", "sharding_strategy": "n/a (single GPU)"}},
		rowEdit{2, map[string]string{"row_id": "nofsdp", "sharding_strategy": " None "}},
		rowEdit{3, map[string]string{"row_id": "fsdp2", "sharding_strategy": "FSDP2 default"}},
		rowEdit{4, map[string]string{"row_id": "blank", "sharding_strategy": ""}})
	why := map[string]string{}
	for _, s := range skipped {
		why[s.ID] = s.Why
	}
	for _, id := range []string{"single", "nofsdp"} {
		if !strings.Contains(why[id], "applies no FSDP") {
			t.Errorf("%s: %q, want it listed as applying no FSDP", id, why[id])
		}
	}
	var read []string
	for _, r := range runs {
		read = append(read, r.id)
	}
	if !slices.Equal(read, []string{"fsdp2", "blank"}) {
		t.Errorf("read %v, want [fsdp2 blank]", read)
	}
}

// TestMemoryOnlyAndUnits: a row without throughput is checked for memory
// alone, decimal and binary units convert to GiB, and a figure of another
// metric is left out rather than compared with the wrong prediction.
func TestMemoryOnlyAndUnits(t *testing.T) {
	runs, skipped := readEdited(t, "published-runs.csv",
		rowEdit{1, map[string]string{"row_id": "memonly", "tps_per_gpu": "", "tps_total": "", "mem_peak_value": "80", "mem_peak_unit": "GB", "mem_peak_metric": "peak reserved"}},
		rowEdit{1, map[string]string{"row_id": "mib", "mem_peak_value": "40960", "mem_peak_unit": "MiB", "mem_peak_metric": "peak allocated"}},
		rowEdit{1, map[string]string{"row_id": "othermetric", "mem_peak_value": "70", "mem_peak_unit": "GiB", "mem_peak_metric": "nvidia-smi"}},
		rowEdit{1, map[string]string{"row_id": "share", "mem_peak_value": "50", "mem_peak_unit": "% of device", "mem_peak_metric": "peak reserved"}},
		rowEdit{1, map[string]string{"row_id": "nothing", "tps_per_gpu": "", "tps_total": "", "mem_peak_value": ""}})
	got := map[string]run{}
	for _, r := range runs {
		got[r.id] = r
	}
	if r := got["memonly"]; r.tokensPerGPU != 0 || math.Abs(r.memGiB-80e9/(1<<30)) > 1e-9 || !r.memReserved {
		t.Errorf("memory-only row: %v tok/s, %v GiB reserved %v", r.tokensPerGPU, r.memGiB, r.memReserved)
	}
	if r := got["mib"]; r.memGiB != 40 || r.memReserved {
		t.Errorf("MiB row: %v GiB reserved %v, want 40 allocated", r.memGiB, r.memReserved)
	}
	if have, _ := presetHBM("a100-80gb"); got["share"].memGiB != float64(have)/(1<<30)/2 {
		t.Errorf("%% of device row: %v GiB, want half of the A100's %v GiB", got["share"].memGiB, float64(have)/(1<<30))
	}
	if r := got["othermetric"]; r.memGiB != 0 || r.tokensPerGPU == 0 {
		t.Errorf("another metric's row: %v GiB, %v tok/s; want no memory figure and its throughput", r.memGiB, r.tokensPerGPU)
	}
	if len(skipped) != 1 || skipped[0].ID != "nothing" {
		t.Errorf("skipped %+v, want the row with neither figure", skipped)
	}
}

func TestHalfPrecision(t *testing.T) {
	for p, want := range map[string]bool{
		"bf16 mixed precision (torchtitan default: bf16 params, fp32 reduce)": true,
		"bfloat16 AMP":                           true,
		"BF16":                                   true,
		"fp16 mixed precision":                   true,
		"FP8-CS (current scaling)":               false,
		"fp8 (torchao float8 tensorwise) + bf16": false,
		"float8 rowwise":                         false,
		"fp32":                                   false,
	} {
		if got := halfPrecision(p); got != want {
			t.Errorf("halfPrecision(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestUnknownCheckpointingListed: a checkpointing fsdpc cannot read lists
// the row as not modelled, naming the label, and the other rows still run.
func TestUnknownCheckpointingListed(t *testing.T) {
	runs, skipped := readEdited(t, "published-runs.csv",
		rowEdit{1, map[string]string{"activation_checkpointing": "sometimes"}}, rowEdit{2, nil})
	if len(runs) != 1 || len(skipped) != 1 || !strings.Contains(skipped[0].Why, `checkpointing "sometimes"`) {
		t.Errorf("runs %d, skipped %+v", len(runs), skipped)
	}
}

func TestOOMStatus(t *testing.T) {
	for status, want := range map[string]bool{"OOM": true, "oom at step 1": true, "CUDA out of memory": true, "ok": false} {
		if r := editedRun(t, "published-runs.csv", 1, map[string]string{"status": status}); r.oom != want {
			t.Errorf("status %q: oom %v, want %v", status, r.oom, want)
		}
	}
}

// TestFusedNorm: torchtitan's April 2024 Llama 2 13B and Llama 3 8B
// configs ran fused_rmsnorm (three norms a model file), its 70B configs
// and every later row the eager RMSNorm, and no other framework says so.
func TestFusedNorm(t *testing.T) {
	want := map[string]int{
		"S3-L2-13B-a": 3, "S3-L3-8B-b": 3, "S3-L2-70B-a": 0, "S3-L3-70B": 0, "S6-8": 0, "S7-eager-7b-A100": 0, // published-runs.csv
		"M1-TT-8g-eager": 0, "M8-AO-f8nc-noac": 0, // memory-runs.csv
	}
	forWantedRows(t, want, func(r run, w int) {
		if got := strings.Count(modelFile(r), "fused = true"); got != w {
			t.Errorf("%s: %d fused norms, want %d", r.id, got, w)
		}
	})
}

// TestClipGradNorm: torchtitan's, fms-fsdp's and KempnerForge's rows clip
// the gradients' norm to 1.0 before every step, as their trainers do at
// the rows' commits (row.go names them); the model file says so, and
// its plan prices the clipping passes in the optimizer step.
func TestClipGradNorm(t *testing.T) {
	want := map[string]bool{
		"S3-L3-8B-a": true, "S3-L2-70B-a": true, "S6-8": true, "S7-eager-7b-A100": true, "S7-compile-70b-H100": true, // published-runs.csv
		"M1-TT-8g-eager": true, "M6-AO-B200-compile": true, "M8-AO-f8nc-noac": true, // memory-runs.csv
	}
	forWantedRows(t, want, func(r run, w bool) {
		if got := strings.Contains(modelFile(r), "max_grad_norm = 1\n"); got != w {
			t.Errorf("%s: clips %v, want %v", r.id, got, w)
		}
	})
}

// forWantedRows calls check on every row of the two calibration sets that
// want names, with what want holds for it, and fails the test unless it
// found every one.
func forWantedRows[T any](t *testing.T, want map[string]T, check func(r run, w T)) {
	t.Helper()
	seen := 0
	for _, name := range []string{"published-runs.csv", "memory-runs.csv"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		runs, _, err := readRuns(name, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if w, ok := want[r.id]; ok {
				seen++
				check(r, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d rows", seen, len(want))
	}
}
