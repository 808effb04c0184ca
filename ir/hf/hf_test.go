package hf

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the importer's output")

// Published parameter counts; each is also derived by hand in the comment
// beside it, from the config, so a wrong fixture and a wrong importer
// cannot agree by accident.
var published = []struct {
	fixture string
	params  int64
	// shapes are a few parameters that must exist with these shapes.
	shapes map[string][]int64
	// absent are names that must not be parameters.
	absent []string
	tied   string // the tied parameter, if any
	// rounded is the total as the model's publisher states it, to the
	// precision stated (2.4e9 ± 0.05e9 for "2.4B"); where publishers give
	// rounded totals only, the exact count is derived by hand beside it.
	rounded, precision float64
}{
	// Llama 1 7B: 2·32000·4096 + 32·(4·4096² + 3·4096·11008 + 2·4096) + 4096.
	{fixture: "llama-7b", params: 6_738_415_616,
		shapes: map[string][]int64{"model.layers.0.self_attn.k_proj.weight": {4096, 4096}, "lm_head.weight": {32000, 4096}}},
	// Llama 2 7B: the same architecture as Llama 1 7B.
	{fixture: "llama-2-7b-hf", params: 6_738_415_616,
		shapes: map[string][]int64{"model.layers.31.mlp.down_proj.weight": {4096, 11008}}},
	// Llama 3 8B: 2·128256·4096 + 32·(2·4096² + 2·4096·1024 + 3·4096·14336 + 2·4096) + 4096.
	{fixture: "meta-llama-3-8b", params: 8_030_261_248,
		shapes: map[string][]int64{
			"model.embed_tokens.weight":                      {128256, 4096},
			"model.layers.0.self_attn.q_proj.weight":         {4096, 4096},
			"model.layers.0.self_attn.k_proj.weight":         {1024, 4096},
			"model.layers.0.self_attn.v_proj.weight":         {1024, 4096},
			"model.layers.0.self_attn.o_proj.weight":         {4096, 4096},
			"model.layers.0.mlp.gate_proj.weight":            {14336, 4096},
			"model.layers.0.mlp.up_proj.weight":              {14336, 4096},
			"model.layers.0.mlp.down_proj.weight":            {4096, 14336},
			"model.layers.0.input_layernorm.weight":          {4096},
			"model.layers.0.post_attention_layernorm.weight": {4096},
			"model.layers.31.self_attn.k_proj.weight":        {1024, 4096},
			"model.norm.weight":                              {4096},
			"lm_head.weight":                                 {128256, 4096},
		},
		absent: []string{"model.layers.0.self_attn.q_proj.bias", "model.layers.32.self_attn.q_proj.weight"}},
	// Llama 3.1 8B: the same shapes as Llama 3 8B; only RoPE scaling changed.
	{fixture: "llama-3.1-8b", params: 8_030_261_248,
		shapes: map[string][]int64{"model.layers.0.self_attn.k_proj.weight": {1024, 4096}}},
	// Llama 3.1 70B: 2·128256·8192 + 80·(2·8192² + 2·8192·1024 + 3·8192·28672 + 2·8192) + 8192.
	{fixture: "llama-3.1-70b", params: 70_553_706_496,
		shapes: map[string][]int64{"model.layers.79.self_attn.v_proj.weight": {1024, 8192}}},
	// Llama 3.1 405B: 2·128256·16384 + 126·(2·16384² + 2·16384·1024 + 3·16384·53248 + 2·16384) + 16384.
	{fixture: "llama-3.1-405b", params: 405_853_388_800,
		shapes: map[string][]int64{"model.layers.125.mlp.gate_proj.weight": {53248, 16384}}},
	// Llama 3.2 1B: 128256·2048 (tied) + 16·(2·2048² + 2·2048·512 + 3·2048·8192 + 2·2048) + 2048.
	{fixture: "llama-3.2-1b", params: 1_235_814_400, tied: "lm_head.weight",
		shapes: map[string][]int64{"model.layers.0.self_attn.k_proj.weight": {512, 2048}, "lm_head.weight": {128256, 2048}}},
	// Llama 3.2 3B: 128256·3072 (tied) + 28·(2·3072² + 2·3072·1024 + 3·3072·8192 + 2·3072) + 3072.
	{fixture: "llama-3.2-3b", params: 3_212_749_824, tied: "lm_head.weight",
		shapes: map[string][]int64{"model.layers.0.self_attn.q_proj.weight": {3072, 3072}}},
	// Mistral 7B: 2·32000·4096 + 32·(2·4096² + 2·4096·1024 + 3·4096·14336 + 2·4096) + 4096.
	{fixture: "mistral-7b-v0.1", params: 7_241_732_096,
		shapes: map[string][]int64{"model.layers.0.self_attn.k_proj.weight": {1024, 4096}}},
	// Qwen2.5 0.5B: 151936·896 (tied) + 24·(2·896² + 2·896·128 + 896 + 2·128 + 3·896·4864 + 2·896) + 896.
	{fixture: "qwen2.5-0.5b", params: 494_032_768, tied: "lm_head.weight",
		shapes: map[string][]int64{
			"model.layers.0.self_attn.q_proj.bias":   {896},
			"model.layers.0.self_attn.k_proj.weight": {128, 896},
			"model.layers.0.self_attn.k_proj.bias":   {128},
			"model.layers.0.self_attn.v_proj.bias":   {128},
		},
		absent: []string{"model.layers.0.self_attn.o_proj.bias"}},
	// Qwen2.5 7B: 2·152064·3584 + 28·(2·3584² + 2·3584·512 + 3584 + 2·512 + 3·3584·18944 + 2·3584) + 3584.
	{fixture: "qwen2.5-7b", params: 7_615_616_512,
		shapes: map[string][]int64{"model.layers.0.self_attn.v_proj.weight": {512, 3584}, "model.layers.0.self_attn.v_proj.bias": {512}}},
	// Mixtral 8x7B: 2·32000·4096 + 32·(2·4096² + 2·4096·1024 + 8·3·4096·14336 + 8·4096 + 2·4096) + 4096;
	// transformers 5 fuses the experts (the checkpoint's
	// block_sparse_moe.experts.E.w1/w2/w3 are converted on load).
	{fixture: "mixtral-8x7b-v0.1", params: 46_702_792_704,
		shapes: map[string][]int64{
			"model.layers.0.mlp.gate.weight":          {8, 4096},
			"model.layers.0.mlp.experts.gate_up_proj": {8, 28672, 4096},
			"model.layers.31.mlp.experts.down_proj":   {8, 4096, 14336},
		},
		absent: []string{"model.layers.0.mlp.gate_proj.weight", "model.layers.0.block_sparse_moe.experts.0.w1.weight", "model.layers.0.mlp.experts.0.w1.weight"}},
	// GPT-2: 50257·768 (tied) + 1024·768 + 12·(4·768 + 768·2304 + 2304 + 768² + 768 + 2·768·3072 + 3072 + 768) + 2·768.
	{fixture: "gpt2", params: 124_439_808, tied: "lm_head.weight",
		shapes: map[string][]int64{
			"transformer.wte.weight":             {50257, 768},
			"transformer.wpe.weight":             {1024, 768},
			"transformer.h.0.ln_1.weight":        {768},
			"transformer.h.0.ln_1.bias":          {768},
			"transformer.h.0.attn.c_attn.weight": {768, 2304},
			"transformer.h.0.attn.c_attn.bias":   {2304},
			"transformer.h.0.attn.c_proj.weight": {768, 768},
			"transformer.h.0.mlp.c_fc.weight":    {768, 3072},
			"transformer.h.0.mlp.c_proj.weight":  {3072, 768},
			"transformer.h.11.ln_2.bias":         {768},
			"transformer.ln_f.bias":              {768},
		},
		// The attention-mask buffers of the checkpoint are not parameters.
		absent: []string{"transformer.h.0.attn.bias", "transformer.h.0.attn.masked_bias", "wte.weight"}},
	// Gemma 2B: 256000·2048 (tied) + 18·(2·2048² + 2·2048·256 + 3·2048·16384 + 2·2048) + 2048.
	{fixture: "gemma-2b", params: 2_506_172_416, tied: "lm_head.weight",
		shapes: map[string][]int64{"model.layers.0.self_attn.k_proj.weight": {256, 2048}, "model.layers.0.mlp.gate_proj.weight": {16384, 2048}}},
	// Gemma 7B: 256000·3072 (tied) + 28·(4·3072·4096 + 3·3072·24576 + 2·3072) + 3072; 16 heads of 256 make q 4096 wide.
	{fixture: "gemma-7b", params: 8_537_680_896, tied: "lm_head.weight",
		shapes: map[string][]int64{"model.layers.0.self_attn.q_proj.weight": {4096, 3072}, "model.layers.0.self_attn.o_proj.weight": {3072, 4096}}},

	// Phi-3-mini: 2·32064·3072 + 32·(3072·9216 + 3072² + 3072·16384 + 8192·3072 + 2·3072) + 3072;
	// "3.8B parameters" (Phi-3 technical report, arXiv:2404.14219; the
	// model card of microsoft/Phi-3-mini-4k-instruct).
	{fixture: "phi-3-mini-4k-instruct", params: 3_821_079_552, rounded: 3.8e9, precision: 0.05e9,
		shapes: map[string][]int64{
			"model.layers.0.self_attn.qkv_proj.weight": {9216, 3072},
			"model.layers.0.self_attn.o_proj.weight":   {3072, 3072},
			"model.layers.0.mlp.gate_up_proj.weight":   {16384, 3072},
			"model.layers.0.mlp.down_proj.weight":      {3072, 8192},
		},
		absent: []string{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.gate_proj.weight"}},
	// OLMo-2 7B: 2·100352·4096 + 32·(4·4096² + 2·4096 (q/k norms) + 3·4096·11008 + 2·4096) + 4096;
	// "7B", 7.30B on allenai/OLMo-2-1124-7B's model card (OLMo 2 paper, arXiv:2501.00656).
	{fixture: "olmo-2-1124-7b", params: 7_298_617_344, rounded: 7.3e9, precision: 0.05e9,
		shapes: map[string][]int64{
			"model.layers.0.self_attn.q_norm.weight":           {4096},
			"model.layers.0.self_attn.k_norm.weight":           {4096},
			"model.layers.0.post_attention_layernorm.weight":   {4096},
			"model.layers.0.post_feedforward_layernorm.weight": {4096},
		},
		absent: []string{"model.layers.0.input_layernorm.weight"}},
	// Qwen3-0.6B: 151936·1024 (tied) + 28·(1024·2048 + 2·1024·1024 + 2048·1024 + 2·128 + 3·1024·3072 + 2·1024) + 1024;
	// Qwen/Qwen3-0.6B's model card: "Number of Parameters: 0.6B,
	// Non-Embedding: 0.44B" (440,467,456 here).
	{fixture: "qwen3-0.6b", params: 596_049_920, tied: "lm_head.weight", rounded: 0.6e9, precision: 0.05e9,
		shapes: map[string][]int64{"model.layers.0.self_attn.q_norm.weight": {128}, "model.layers.0.self_attn.k_norm.weight": {128},
			"model.layers.0.self_attn.q_proj.weight": {2048, 1024}}},
	// Qwen3-8B: 2·151936·4096 + 36·(2·4096² + 2·4096·1024 + 2·128 + 3·4096·12288 + 2·4096) + 4096;
	// the model card: "Number of Parameters: 8.2B, Non-Embedding: 6.95B".
	{fixture: "qwen3-8b", params: 8_190_735_360, rounded: 8.2e9, precision: 0.05e9,
		shapes: map[string][]int64{"model.layers.35.self_attn.k_norm.weight": {128}}},
	// Gemma 2 2B: 256000·2304 (tied) + 26·(2·2304·2048 + 2·2304·1024 + 3·2304·9216 + 4·2304) + 2304;
	// "2.6B" (Gemma 2 report, arXiv:2408.00118, Table 1: 2,614,341,888 with embeddings).
	{fixture: "gemma-2-2b", params: 2_614_341_888, tied: "lm_head.weight", rounded: 2.6e9, precision: 0.05e9,
		shapes: map[string][]int64{"model.layers.0.pre_feedforward_layernorm.weight": {2304}, "model.layers.0.post_feedforward_layernorm.weight": {2304},
			"model.layers.0.self_attn.q_proj.weight": {2048, 2304}}},
	// Gemma 2 9B: 256000·3584 (tied) + 42·(2·3584·4096 + 2·3584·2048 + 3·3584·14336 + 4·3584) + 3584;
	// "9B", 9.24B on google/gemma-2-9b.
	{fixture: "gemma-2-9b", params: 9_241_705_984, tied: "lm_head.weight", rounded: 9.24e9, precision: 0.005e9,
		shapes: map[string][]int64{"model.layers.41.mlp.down_proj.weight": {3584, 14336}}},
	// Gemma 3 1B: 262144·1152 (tied) + 26·(2·1152·1024 + 2·1152·256 + 2·256 + 3·1152·6912 + 4·1152) + 1152;
	// "1B" (Gemma 3 report, arXiv:2503.19786, Table 1: 302M embedding + 698M non-embedding).
	{fixture: "gemma-3-1b-pt", params: 999_885_952, tied: "lm_head.weight", rounded: 1.0e9, precision: 0.005e9,
		shapes: map[string][]int64{"model.layers.0.self_attn.q_norm.weight": {256}, "model.layers.0.self_attn.k_proj.weight": {256, 1152}}},
	// DeepSeek-V2-Lite: 2·102400·2048 + 27·(2048·3072 + 2048·576 + 512 + 512·4096 + 2048·2048 + 2·2048)
	// + 3·2048·10944 (layer 0) + 26·(64·3·2048·1408 + 64·2048 + 3·2048·2816) + 2048;
	// "15.7B total parameters" (deepseek-ai/DeepSeek-V2-Lite's model card).
	{fixture: "deepseek-v2-lite", params: 15_706_484_224, rounded: 15.7e9, precision: 0.05e9,
		shapes: map[string][]int64{
			"model.layers.0.self_attn.q_proj.weight":             {3072, 2048},
			"model.layers.0.self_attn.kv_a_proj_with_mqa.weight": {576, 2048},
			"model.layers.0.self_attn.kv_a_layernorm.weight":     {512},
			"model.layers.0.self_attn.kv_b_proj.weight":          {4096, 512},
			"model.layers.0.self_attn.o_proj.weight":             {2048, 2048},
			"model.layers.0.mlp.gate_proj.weight":                {10944, 2048},
			"model.layers.1.mlp.gate.weight":                     {64, 2048},
			"model.layers.1.mlp.experts.down_proj":               {64, 2048, 1408},
			"model.layers.26.mlp.shared_experts.up_proj.weight":  {2816, 2048},
		},
		absent: []string{"model.layers.0.self_attn.q_a_proj.weight", "model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.0.gate_proj.weight", "model.layers.1.mlp.gate.e_score_correction_bias"}},
	// DeepSeek-V2: 2·102400·5120 + 60·(attention 149,227,520 + 2·5120) + 3·5120·12288 (layer 0)
	// + 59·(160·3·5120·1536 + 160·5120 + 3·5120·3072) + 5120; "236B total parameters"
	// (DeepSeek-V2 paper, arXiv:2405.04434).
	{fixture: "deepseek-v2", params: 235_741_434_880, rounded: 236e9, precision: 0.5e9,
		shapes: map[string][]int64{
			"model.layers.0.self_attn.q_a_proj.weight":      {1536, 5120},
			"model.layers.0.self_attn.q_a_layernorm.weight": {1536},
			"model.layers.0.self_attn.q_b_proj.weight":      {24576, 1536},
			"model.layers.59.mlp.experts.gate_up_proj":      {160, 3072, 5120},
		}},
	// DeepSeek-V3: 2·129280·7168 + 61·(attention 187,107,328 + 2·7168) + 3·3·7168·18432 (dense layers 0-2)
	// + 58·(256·3·7168·2048 + 256·7168 + 3·7168·2048) + 7168; "671B total parameters",
	// the 685B on the Hub adding the 14B multi-token-prediction module
	// (DeepSeek-V3 report, arXiv:2412.19437; deepseek-ai/DeepSeek-V3's README).
	// The checkpoint's 58·256 gate.e_score_correction_bias elements are a
	// buffer in transformers 5's DeepseekV3TopkRouter, not a parameter.
	{fixture: "deepseek-v3", params: 671_026_404_352, rounded: 671e9, precision: 0.5e9,
		shapes: map[string][]int64{
			"model.layers.2.mlp.down_proj.weight":                {7168, 18432},
			"model.layers.3.mlp.shared_experts.gate_proj.weight": {2048, 7168},
			"model.layers.60.mlp.experts.gate_up_proj":           {256, 4096, 7168},
			"model.layers.3.mlp.gate.weight":                     {256, 7168},
		},
		absent: []string{"model.layers.3.mlp.gate_proj.weight", "model.layers.61.self_attn.o_proj.weight", "model.layers.3.mlp.gate.e_score_correction_bias"}},
	// gpt-oss-20b: 2·201088·2880 + 24·(attention 2880·4096 + 4096 + 2·(2880·512 + 512) + 4096·2880 + 2880
	// + 64 sinks; router 32·2880 + 32; experts 32·(2880·5760 + 5760 + 2880·2880 + 2880); 2·2880) + 2880;
	// "21B parameters", 20.91B total in OpenAI's gpt-oss model card (arXiv:2508.10925, Table 1).
	{fixture: "gpt-oss-20b", params: 20_914_757_184, rounded: 20.91e9, precision: 0.005e9,
		shapes: map[string][]int64{
			"model.layers.0.self_attn.sinks":               {64},
			"model.layers.0.self_attn.q_proj.bias":         {4096},
			"model.layers.0.self_attn.o_proj.bias":         {2880},
			"model.layers.0.mlp.router.weight":             {32, 2880},
			"model.layers.0.mlp.router.bias":               {32},
			"model.layers.0.mlp.experts.gate_up_proj":      {32, 2880, 5760},
			"model.layers.0.mlp.experts.gate_up_proj_bias": {32, 5760},
			"model.layers.23.mlp.experts.down_proj":        {32, 2880, 2880},
			"model.layers.23.mlp.experts.down_proj_bias":   {32, 2880},
		},
		absent: []string{"model.layers.0.mlp.gate.weight", "model.layers.0.mlp.experts.0.gate_proj.weight"}},
	// gpt-oss-120b: the same with 36 layers of 128 experts; 116.83B total (the model card).
	{fixture: "gpt-oss-120b", params: 116_829_156_672, rounded: 116.83e9, precision: 0.005e9,
		shapes: map[string][]int64{"model.layers.35.mlp.experts.gate_up_proj": {128, 2880, 5760}}},
	// Qwen3-30B-A3B: 2·151936·2048 + 48·(2048·4096 + 2·2048·512 + 4096·2048 + 2·128 + 128·2048
	// + 128·3·2048·768 + 2·2048) + 2048; "30.5B in total" (Qwen/Qwen3-30B-A3B's model card).
	{fixture: "qwen3-30b-a3b", params: 30_532_122_624, rounded: 30.5e9, precision: 0.05e9,
		shapes: map[string][]int64{
			"model.layers.0.self_attn.q_proj.weight":  {4096, 2048},
			"model.layers.0.self_attn.q_norm.weight":  {128},
			"model.layers.0.mlp.gate.weight":          {128, 2048},
			"model.layers.0.mlp.experts.gate_up_proj": {128, 1536, 2048},
			"model.layers.47.mlp.experts.down_proj":   {128, 2048, 768},
		},
		absent: []string{"model.layers.0.mlp.gate_proj.weight"}},
	// Llama 4 Scout, text model: 2·202048·5120 + 48·(5120·5120 + 2·5120·1024 + 5120·5120 + 16·3·5120·8192
	// + 16·5120 + 3·5120·8192 + 2·5120) + 5120; the published "109B total" adds the vision encoder.
	{fixture: "llama-4-scout-17b-16e-text", params: 107_769_861_120,
		shapes: map[string][]int64{
			"model.layers.0.feed_forward.router.weight":                   {16, 5120},
			"model.layers.0.feed_forward.experts.gate_up_proj":            {16, 5120, 16384},
			"model.layers.0.feed_forward.experts.down_proj":               {16, 8192, 5120},
			"model.layers.47.feed_forward.shared_expert.down_proj.weight": {5120, 8192},
		},
		absent: []string{"model.layers.0.feed_forward.gate_proj.weight", "model.layers.3.self_attn.qk_norm.weight"}},
	// Llama 4 Maverick, text model: MoE on the odd layers (interleave_moe_layer_step 2, 128 experts),
	// dense MLPs 16384 wide on the even ones: 2·202048·5120 + 24·(attention + 128·3·5120·8192 + 128·5120
	// + 3·5120·8192 + 2·5120) + 24·(attention + 3·5120·16384 + 2·5120) + 5120; "400B total parameters".
	{fixture: "llama-4-maverick-17b-128e-text", params: 400_711_848_960, rounded: 400e9, precision: 1e9,
		shapes: map[string][]int64{
			"model.layers.0.feed_forward.gate_proj.weight":     {16384, 5120},
			"model.layers.1.feed_forward.experts.gate_up_proj": {128, 5120, 16384},
			"model.layers.46.feed_forward.down_proj.weight":    {5120, 16384},
			"model.layers.47.feed_forward.router.weight":       {128, 5120},
		},
		absent: []string{"model.layers.0.feed_forward.router.weight", "model.layers.1.feed_forward.gate_proj.weight"}},
	// SmolLM3-3B: 128256·2048 (tied) + 36·(2·2048² + 2·2048·512 + 3·2048·11008 + 2·2048) + 2048;
	// "3B", 3.08B on HuggingFaceTB/SmolLM3-3B.
	{fixture: "smollm3-3b", params: 3_075_098_624, tied: "lm_head.weight", rounded: 3.08e9, precision: 0.005e9,
		shapes: map[string][]int64{"model.layers.0.self_attn.k_proj.weight": {512, 2048}}},
	// Granite 3.3 8B: 49159·4096 (tied) + 40·(2·4096² + 2·4096·1024 + 3·4096·12800 + 2·4096) + 4096;
	// "8B", 8.17B on ibm-granite/granite-3.3-8b-instruct. The multipliers scale activations only.
	{fixture: "granite-3.3-8b-instruct", params: 8_170_864_640, tied: "lm_head.weight", rounded: 8.17e9, precision: 0.005e9,
		shapes: map[string][]int64{"model.layers.39.mlp.up_proj.weight": {12800, 4096}}},
	// Olmo 3 7B: 2·100278·4096 + 32·(4·4096² + 2·4096 (q/k norms) + 3·4096·11008 + 2·4096) + 4096;
	// "7B", 7.30B (allenai/Olmo-3-1025-7B).
	{fixture: "olmo-3-7b", params: 7_298_011_136, rounded: 7.3e9, precision: 0.05e9,
		shapes: map[string][]int64{"model.layers.0.self_attn.q_norm.weight": {4096}, "model.layers.0.post_feedforward_layernorm.weight": {4096}},
		absent: []string{"model.layers.0.input_layernorm.weight"}},
}

func convertFixture(t *testing.T, fixture string) ([]byte, *ir.Model) {
	t.Helper()
	path := filepath.Join("testdata", fixture+".json")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Convert(path, src)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	m, err := ir.Load(fixture+".toml", out)
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, out)
	}
	for _, w := range m.Warnings {
		t.Errorf("warning: %v", w)
	}
	return out, m
}

func TestPublishedModels(t *testing.T) {
	for _, tc := range published {
		t.Run(tc.fixture, func(t *testing.T) {
			out, m := convertFixture(t, tc.fixture)
			if got := m.Stats().Params; got != tc.params {
				t.Errorf("params = %d, want %d (off by %d)", got, tc.params, got-tc.params)
			}
			if tc.rounded > 0 && math.Abs(float64(tc.params)-tc.rounded) > tc.precision {
				t.Errorf("the exact count %d does not round to the published %g", tc.params, tc.rounded)
			}
			byName := map[string]*ir.Param{}
			for i := range m.Params {
				byName[m.Params[i].Name] = &m.Params[i]
			}
			for name, shape := range tc.shapes {
				p, ok := byName[name]
				if !ok {
					t.Errorf("no parameter %s", name)
					continue
				}
				if !slices.Equal(p.Shape, shape) {
					t.Errorf("%s has shape %v, want %v", name, p.Shape, shape)
				}
			}
			for _, name := range tc.absent {
				if _, ok := byName[name]; ok {
					t.Errorf("%s should not be a parameter", name)
				}
			}
			// A tied lm_head is an alias: counted once, under the embedding.
			var tied []string
			for i := range m.Params {
				if m.Params[i].TiedTo != ir.NoParam {
					tied = append(tied, m.Params[i].Name)
				}
			}
			if tc.tied == "" && len(tied) > 0 || tc.tied != "" && !slices.Equal(tied, []string{tc.tied}) {
				t.Errorf("tied parameters %v, want [%s]", tied, tc.tied)
			}
			if tc.tied != "" {
				var total int64
				for i := range m.Params {
					total += m.Params[i].Numel
				}
				if want := tc.params + byName[tc.tied].Numel; total != want {
					t.Errorf("all tensors sum to %d; want params + the tied alias = %d", total, want)
				}
			}
			if n := bytes.Count(out, []byte("\n")); n >= 200 {
				t.Errorf("the model file has %d lines; a readable import stays under 200", n)
			}
			again, err := Convert(filepath.Join("testdata", tc.fixture+".json"), mustRead(t, tc.fixture))
			if err != nil || !bytes.Equal(out, again) {
				t.Errorf("a second conversion differs (err %v)", err)
			}
			if m.Train.SeqLen > DefaultMaxSeqLen {
				t.Errorf("seq_len %d exceeds the default cap %d", m.Train.SeqLen, DefaultMaxSeqLen)
			}
		})
	}
}

func mustRead(t *testing.T, fixture string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", fixture+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGolden(t *testing.T) {
	// A dense model, and the MoE layout with every feature: gpt-oss's
	// sinks, biases and transposed fused experts; DeepSeek's blocks.
	for _, fixture := range []string{"llama-3.1-8b", "gpt-oss-20b", "deepseek-v2-lite"} {
		out, _ := convertFixture(t, fixture)
		golden := filepath.Join("testdata", fixture+".toml.golden")
		if *update {
			if err := os.WriteFile(golden, out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(out, want) {
			t.Errorf("output differs from %s (run go test -update and review the diff):\n%s", golden, out)
		}
	}
}

func TestTrainingSetup(t *testing.T) {
	tests := []struct {
		fixture   string
		opt       Options
		seqLen    int64
		gpu       string
		worldSize int
		note      string // in the seq_len line
	}{
		{"llama-3.1-8b", Options{}, 8192, "NVIDIA H100 SXM5 80GB", 8, "min(max_position_embeddings = 131072, 8192)"},
		{"gpt2", Options{}, 1024, "NVIDIA H100 SXM5 80GB", 8, "min(n_positions = 1024, 8192)"},
		{"llama-7b", Options{}, 2048, "NVIDIA H100 SXM5 80GB", 8, ""},
		{"llama-3.1-70b", Options{SeqLen: 4096, GPU: "h200", WorldSize: 64}, 4096, "NVIDIA H200 SXM 141GB", 64, "from --seq-len"},
		{"mistral-7b-v0.1", Options{SeqLen: 65536}, 65536, "NVIDIA H100 SXM5 80GB", 8, "longer than the model was trained for"},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			out, err := ConvertWith(tc.fixture+".json", mustRead(t, tc.fixture), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ir.Load("x.toml", out)
			if err != nil {
				t.Fatal(err)
			}
			if m.Train.SeqLen != tc.seqLen || m.Cluster.GPU.Name != tc.gpu || m.Cluster.WorldSize != tc.worldSize {
				t.Errorf("seq_len %d, gpu %s, world %d; want %d, %s, %d",
					m.Train.SeqLen, m.Cluster.GPU.Name, m.Cluster.WorldSize, tc.seqLen, tc.gpu, tc.worldSize)
			}
			if m.Train.MicroBatch != 1 || m.Train.Checkpointing != ir.CheckpointFull || m.Policy.UnitsMode != ir.UnitsBlocks ||
				m.Policy.Default.ParamDType != ir.BF16 || m.Policy.Default.ReduceDType != ir.FP32 || m.Cluster.GPUsPerNode != min(8, tc.worldSize) {
				t.Errorf("unexpected defaults: %+v %+v", m.Train, m.Policy)
			}
			var line string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "seq_len =") {
					line = l
				}
			}
			if !strings.Contains(line, tc.note) {
				t.Errorf("seq_len line %q does not say %q", line, tc.note)
			}
		})
	}
}

func TestHeaderNotes(t *testing.T) {
	tests := []struct {
		fixture string
		want    []string
	}{
		{"llama-7b", []string{"imported by `fsdpc import hf` from llama-7b.json", "num_key_value_heads is not set", "the checkpoint holds float16"}},
		{"gpt2", []string{"n_inner is not set: the MLP is 4 × n_embd = 3072 wide", "causal masks attn.bias and attn.masked_bias"}},
		{"gemma-7b", []string{"tie_word_embeddings is not set: GemmaConfig's default, true"}},
		{"mistral-7b-v0.1", []string{"window = 4096 # sliding_window: each token attends to the last 4096", "block = \"decoder_sliding\""}},
		{"llama-2-7b-hf", []string{"saved from meta-llama/Llama-2-7b-hf", `name = "Llama-2-7b-hf"`}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			out, _ := convertFixture(t, tc.fixture)
			for _, w := range tc.want {
				if !strings.Contains(prose(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	// Qwen2 turns its sliding window off, so nothing is said about it.
	if out, _ := convertFixture(t, "qwen2.5-7b"); strings.Contains(string(out), "sliding_window") {
		t.Errorf("qwen2.5-7b: sliding window mentioned although use_sliding_window is false")
	}
}

// prose joins the header's wrapped comment lines so tests can look for
// phrases regardless of where lines break.
func prose(out []byte) string {
	var words []string
	for _, l := range strings.Split(string(out), "\n") {
		words = append(words, strings.Fields(strings.TrimPrefix(l, "#"))...)
	}
	return strings.Join(words, " ")
}

func TestErrors(t *testing.T) {
	llama := string(mustRead(t, "meta-llama-3-8b"))
	tests := []struct {
		name string
		src  string
		opt  Options
		want []string
	}{
		{"unsupported model_type", `{"model_type": "bert", "hidden_size": 768}`, Options{},
			[]string{`cfg.json: model_type "bert" is not supported`, "deepseek_v2, deepseek_v3, gemma, gemma2, gemma3_text, gpt2, gpt_oss, granite, llama, llama4_text, mistral, mixtral, olmo2, olmo3, phi3, qwen2, qwen3, qwen3_moe, smollm3"}},
		{"qwen3_moe relabelled qwen3", strings.Replace(string(mustRead(t, "qwen3-30b-a3b")), `"model_type": "qwen3_moe"`, `"model_type": "qwen3"`, 1), Options{},
			[]string{"num_experts = 128 is not a field of Qwen3Config, so transformers' qwen3 model ignores it", "it shapes the model in qwen3_moe: if the checkpoint is one of those, set model_type to match",
				"moe_intermediate_size = 768 is not a field of Qwen3Config", "decoder_sparse_step = 1 is not a field"}},
		{"experts in a llama", strings.Replace(llama, `"model_type": "llama"`, `"model_type": "llama", "num_local_experts": 8`, 1), Options{},
			[]string{"num_local_experts = 8 is not a field of LlamaConfig", "gpt_oss, llama4_text, mixtral"}},
		{"gpt2 alias", strings.Replace(string(mustRead(t, "gpt2")), `"n_embd": 768,`, `"n_embd": 768, "hidden_size": 1024,`, 1), Options{},
			[]string{"hidden_size is GPT2Config's other name for n_embd, which transformers reads in its place; write n_embd"}},
		{"mixtral alias", strings.Replace(string(mustRead(t, "mixtral-8x7b-v0.1")), `"num_local_experts": 8,`, `"num_experts": 8,`, 1), Options{},
			[]string{"num_local_experts is missing"}},
		{"deepseek without experts", strings.Replace(string(mustRead(t, "deepseek-v2-lite")), `"n_routed_experts": 64,`, "", 1), Options{},
			[]string{"n_routed_experts is missing; transformers' DeepseekV2Config would build 64 experts"}},
		{"deepseek_v2 mlp_bias", strings.Replace(string(mustRead(t, "deepseek-v2-lite")), `"model_type"`, `"mlp_bias": true, "model_type"`, 1), Options{},
			[]string{"mlp_bias = true is not supported for deepseek_v2"}},
		{"deepseek kv heads", strings.Replace(string(mustRead(t, "deepseek-v2-lite")), `"num_key_value_heads": 16`, `"num_key_value_heads": 4`, 1), Options{},
			[]string{"num_key_value_heads = 4 differs from num_attention_heads (16)"}},
		{"llama4 moe_layers past the layers", strings.Replace(string(mustRead(t, "llama-4-maverick-17b-128e-text")), `"moe_layers": [`, `"moe_layers": [48, `, 1), Options{},
			[]string{"moe_layers holds 48, which is not a layer index (0 to 47)"}},
		{"layer_types of the wrong length", strings.Replace(string(mustRead(t, "olmo-3-7b")), `"layer_types": [`, `"layer_types": ["full_attention", `, 1), Options{},
			[]string{"layer_types has 33 entries; it needs one per layer (32)"}},
		{"a size at the bound", strings.Replace(string(mustRead(t, "gemma-2-2b")), `"head_dim": 256`, `"head_dim": 16777216`, 1), Options{},
			[]string{"the model is beyond fsdpc's limits", "its largest sizes are head_dim = 16777216 and vocab_size = 256000"}},
		{"multimodal gemma3", `{"model_type": "gemma3", "text_config": {}}`, Options{},
			[]string{"multimodal Gemma 3", `model_type "gemma3_text"`, "supported: deepseek_v2"}},
		{"deepseek moe_layer_freq", `{"model_type": "deepseek_v3", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 2,
			"num_attention_heads": 2, "kv_lora_rank": 4, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 2,
			"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 4, "moe_layer_freq": 2}`, Options{},
			[]string{"moe_layer_freq = 2 is not supported"}},
		{"missing model_type", `{"hidden_size": 768}`, Options{}, []string{"model_type is missing", "supported: deepseek_v2"}},
		{"model_type not a string", `{"model_type": 7}`, Options{}, []string{"model_type must be a string, not 7"}},
		{"malformed JSON", "{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 4096\n  \"vocab_size\": 32000\n}", Options{},
			[]string{"cfg.json:4:3: JSON syntax: invalid character '\"' after object key:value pair"}},
		{"truncated JSON", "{\n  \"model_type\": \"llama\",", Options{}, []string{"cfg.json:2:24: JSON syntax: unexpected end of JSON input"}},
		{"column counts characters", "{\"_name_or_path\": \"é\", x}", Options{}, []string{"cfg.json:1:24: JSON syntax"}},
		{"not an object", `[1, 2]`, Options{}, []string{"cfg.json:1:1: a config.json holds one JSON object, not array"}},
		{"null", `null`, Options{}, []string{"not null"}},
		{"empty", ``, Options{}, []string{"cfg.json:1:1: JSON syntax: unexpected end of JSON input"}},
		{"missing hidden_size", strings.Replace(llama, `"hidden_size": 4096,`, "", 1), Options{},
			[]string{"cfg.json: hidden_size is missing; it is required"}},
		{"every problem at once", strings.NewReplacer(`"hidden_size": 4096,`, "", `"num_hidden_layers": 32`, `"num_hidden_layers": "32"`).Replace(llama), Options{},
			[]string{"hidden_size is missing", `num_hidden_layers must be an integer, not a string ("32")`}},
		{"null hidden_size", strings.Replace(llama, `"hidden_size": 4096`, `"hidden_size": null`, 1), Options{},
			[]string{"hidden_size is null; it is required"}},
		{"fractional", strings.Replace(llama, `"hidden_size": 4096`, `"hidden_size": 4096.5`, 1), Options{},
			[]string{"hidden_size must be an integer, not 4096.5"}},
		{"negative", strings.Replace(llama, `"num_hidden_layers": 32`, `"num_hidden_layers": -1`, 1), Options{},
			[]string{"num_hidden_layers = -1 is out of range"}},
		{"huge", strings.Replace(llama, `"vocab_size": 128256`, `"vocab_size": 99999999999999999999`, 1), Options{},
			[]string{"vocab_size must be an integer, not 99999999999999999999"}},
		{"bool typed", strings.Replace(llama, `"tie_word_embeddings": false`, `"tie_word_embeddings": "no"`, 1), Options{},
			[]string{`tie_word_embeddings must be true or false, not a string ("no")`}},
		{"heads and kv heads", strings.Replace(llama, `"num_key_value_heads": 8`, `"num_key_value_heads": 5`, 1), Options{},
			[]string{"num_attention_heads (32) is not a multiple of num_key_value_heads (5)"}},
		{"activation", strings.Replace(llama, `"hidden_act": "silu"`, `"hidden_act": "relu"`, 1), Options{},
			[]string{`hidden_act "relu" is not supported for llama`}},
		{"every size at its maximum", strings.NewReplacer(`"hidden_size": 4096`, `"hidden_size": 16777216`, `"intermediate_size": 14336`, `"intermediate_size": 16777216`,
			`"vocab_size": 128256`, `"vocab_size": 16777216`, `"num_attention_heads": 32`, `"num_attention_heads": 16777216`,
			`"num_key_value_heads": 8`, `"num_key_value_heads": 16777216`).Replace(llama), Options{},
			[]string{"the model is beyond fsdpc's limits", `parameter "model.embed_tokens.weight" takes the model past 17592186044416 parameter elements`}},
		{"empty activation", strings.Replace(llama, `"hidden_act": "silu"`, `"hidden_act": ""`, 1), Options{},
			[]string{`hidden_act is empty: name the activation, for example "silu"`}},
		{"gemma activation", strings.Replace(string(mustRead(t, "gemma-2b")), `"hidden_act": "gelu"`, `"hidden_act": "relu"`, 1), Options{},
			[]string{`hidden_act "relu" is not supported for gemma`}},
		{"mistral needs kv heads", `{"model_type": "mistral", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32}`, Options{},
			[]string{"num_key_value_heads is missing"}},
		{"gemma needs head_dim", strings.Replace(string(mustRead(t, "gemma-2b")), `"head_dim": 256,`, "", 1), Options{},
			[]string{"head_dim is missing"}},
		{"mixtral needs experts", strings.Replace(string(mustRead(t, "mixtral-8x7b-v0.1")), `"num_local_experts": 8,`, "", 1), Options{},
			[]string{"num_local_experts is missing"}},
		{"gpt2 sequence past n_positions", string(mustRead(t, "gpt2")), Options{SeqLen: 2048},
			[]string{"seq-len 2048 exceeds n_positions 1024"}},
		{"unknown gpu", llama, Options{GPU: "v100"}, []string{`unknown GPU preset "v100"`, "h100-sxm"}},
		{"newline in model_type", `{"model_type": "x\ny"}`, Options{}, []string{`model_type "x?y" is not supported`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ConvertWith("cfg.json", []byte(tc.src), tc.opt)
			if err == nil {
				t.Fatalf("no error; output:\n%s", out)
			}
			if strings.Contains(err.Error(), "internal error") {
				t.Errorf("a config the user wrote gave an internal error: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestByteOrderMarkAndLongContext(t *testing.T) {
	src := "\xef\xbb\xbf" + strings.Replace(string(mustRead(t, "llama-3.1-8b")), "131072", "1073741824", 1)
	out, err := Convert("cfg.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "seq_len = 8192            # min(max_position_embeddings = 1073741824, 8192)") {
		t.Errorf("seq_len line wrong:\n%s", out)
	}
}

// TestHostileStrings checks that text copied from the config into names
// and comments cannot break out into TOML of its own.
func TestHostileStrings(t *testing.T) {
	src := strings.Replace(string(mustRead(t, "llama-3.2-1b")), `"architectures": [`,
		`"_name_or_path": "evil\"\n[cluster]\nworld_size = 1\n#",
  "torch_dtype": "bf16\n[[module]]",
  "architectures": ["X\nY", `, 1)
	out, err := Convert("a\nb.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ir.Load("x.toml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if m.Cluster.WorldSize != 8 || m.Stats().Params != 1_235_814_400 {
		t.Errorf("the config's strings changed the model:\n%s", out)
	}
}

// TestReadyToPlan: one import with the flags gives the training setup
// asked for, and the model plans without edits.
func TestReadyToPlan(t *testing.T) {
	opt := Options{SeqLen: 4096, GPU: "h200", WorldSize: 32, GPUsPerNode: 4, MicroBatch: 2, Checkpointing: "selective-op"}
	out, err := ConvertWith("qwen3-8b.json", mustRead(t, "qwen3-8b"), opt)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ir.Load("x.toml", out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Train.SeqLen != 4096 || m.Train.MicroBatch != 2 || m.Train.Checkpointing != ir.CheckpointingModes["selective-op"] ||
		m.Cluster.WorldSize != 32 || m.Cluster.GPUsPerNode != 4 || m.Cluster.GPU.Name != "NVIDIA H200 SXM 141GB" {
		t.Errorf("train %+v, cluster world %d × %d per node, %s", m.Train, m.Cluster.WorldSize, m.Cluster.GPUsPerNode, m.Cluster.GPU.Name)
	}
	for _, bad := range []Options{{Checkpointing: "most"}, {MicroBatch: -1}, {WorldSize: 12, GPUsPerNode: 8}, {GPUsPerNode: -2}} {
		if _, err := ConvertWith("qwen3-8b.json", mustRead(t, "qwen3-8b"), bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestModelName: the Hub id, else the file's stem without ".config".
func TestModelName(t *testing.T) {
	src := mustRead(t, "llama-3.1-8b")
	for file, want := range map[string]string{
		"Llama-3.1-8B.config.json": "Llama-3.1-8B",
		"dir/Qwen3-8B.json":        "Qwen3-8B",
		"config.json":              "imported",
	} {
		out, err := ConvertWith(file, bytes.Replace(src, []byte(`"_name_or_path"`), []byte(`"_unused"`), 1), Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := ir.Load("x.toml", out)
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != want {
			t.Errorf("%s: named %q, want %q", file, m.Name, want)
		}
	}
	out, err := ConvertWith("phi3.config.json", mustRead(t, "phi-3-mini-4k-instruct"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ir.Load("x.toml", out); err != nil || m.Name != "Phi-3-mini-4k-instruct" {
		t.Errorf("named from _name_or_path: %v %v", m.Name, err)
	}
}

// TestRegistrationOrder: the new kinds register their children as the
// Hugging Face implementations do (FSDP2's parameter order).
func TestRegistrationOrder(t *testing.T) {
	for fixture, want := range map[string][]string{
		"phi-3-mini-4k-instruct": {"model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.qkv_proj.weight", "model.layers.0.mlp.gate_up_proj.weight", "model.layers.0.mlp.down_proj.weight"},
		"qwen3-0.6b":             {"model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight", "model.layers.0.mlp.gate_proj.weight"},
		"deepseek-v2":            {"model.layers.1.self_attn.q_a_proj.weight", "model.layers.1.self_attn.q_a_layernorm.weight", "model.layers.1.self_attn.q_b_proj.weight", "model.layers.1.self_attn.kv_a_proj_with_mqa.weight", "model.layers.1.self_attn.kv_a_layernorm.weight", "model.layers.1.self_attn.kv_b_proj.weight", "model.layers.1.self_attn.o_proj.weight", "model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj", "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.shared_experts.gate_proj.weight"},
		"deepseek-v3":            {"model.layers.3.mlp.experts.down_proj", "model.layers.3.mlp.gate.weight", "model.layers.3.mlp.shared_experts.gate_proj.weight"},
	} {
		_, m := convertFixture(t, fixture)
		pos := map[string]int{}
		for i, p := range m.Params {
			pos[p.Name] = i
		}
		last := -1
		for _, name := range want {
			i, ok := pos[name]
			if !ok {
				t.Errorf("%s: no parameter %s", fixture, name)
				continue
			}
			if i < last {
				t.Errorf("%s: %s comes before the parameter listed before it", fixture, name)
			}
			last = i
		}
	}
}

// TestEveryClassFieldHandled: each field of each family's config class,
// set to a value that asks for something, is read, known to change
// nothing, or refused naming it for another reason: never "does not
// model", which would mean the importer forgot it.
func TestEveryClassFieldHandled(t *testing.T) {
	fixture := map[string]string{"llama": "llama-3.1-8b", "mistral": "mistral-7b-v0.1", "mixtral": "mixtral-8x7b-v0.1",
		"qwen2": "qwen2.5-7b", "gemma": "gemma-7b", "gpt2": "gpt2", "phi3": "phi-3-mini-4k-instruct", "olmo2": "olmo-2-1124-7b",
		"qwen3": "qwen3-8b", "gemma2": "gemma-2-9b", "gemma3_text": "gemma-3-1b-pt", "deepseek_v2": "deepseek-v2-lite",
		"deepseek_v3": "deepseek-v3", "gpt_oss": "gpt-oss-20b", "qwen3_moe": "qwen3-30b-a3b", "llama4_text": "llama-4-scout-17b-16e-text",
		"smollm3": "smollm3-3b", "granite": "granite-3.3-8b-instruct", "olmo3": "olmo-3-7b"}
	for typ, fields := range classFields {
		if _, ok := families[typ]; !ok {
			t.Errorf("classFields lists %s, which is not a family", typ)
		}
		src := mustRead(t, fixture[typ])
		for _, k := range fields {
			for _, v := range []string{"7", "true"} {
				var cfg map[string]any
				if err := json.Unmarshal(src, &cfg); err != nil {
					t.Fatal(err)
				}
				cfg[k] = json.RawMessage(v)
				b, err := json.Marshal(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Convert("cfg.json", b); err != nil && strings.Contains(err.Error(), "does not model") {
					t.Errorf("%s with %s = %s: %v", typ, k, v, err)
				}
			}
		}
	}
	for typ := range families {
		if _, ok := classFields[typ]; !ok {
			t.Errorf("family %s has no classFields", typ)
		}
	}
}

// TestIgnoredKeysNoted: a key the family's class does not define, and no
// family models, is named in the header as ignored, not silently dropped.
func TestIgnoredKeysNoted(t *testing.T) {
	src := strings.Replace(string(mustRead(t, "meta-llama-3-8b")), `"model_type": "llama"`, `"model_type": "llama", "my_flag": 3`, 1)
	out, err := Convert("cfg.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(out)), " "), "ignored, as transformers' LlamaConfig ignores keys that are not its # fields: my_flag") {
		t.Errorf("my_flag not noted:\n%s", out)
	}
	// A field no family models would stop the import: the check is live.
	delete(inertKeys, "initializer_range")
	defer func() { inertKeys["initializer_range"] = true }()
	if _, err := Convert("cfg.json", mustRead(t, "meta-llama-3-8b")); err == nil || !strings.Contains(err.Error(), "initializer_range = 0.02 is a field of LlamaConfig that fsdpc does not model") {
		t.Errorf("an unmodelled field: %v", err)
	}
}

// TestQwen3MoESparseLayers: decoder_sparse_step and mlp_only_layers make
// dense layers among the MoE ones, as Qwen3MoeDecoderLayer decides.
func TestQwen3MoESparseLayers(t *testing.T) {
	src := strings.NewReplacer(`"decoder_sparse_step": 1`, `"decoder_sparse_step": 2`, `"mlp_only_layers": []`, `"mlp_only_layers": [1, 2]`).
		Replace(string(mustRead(t, "qwen3-30b-a3b")))
	out, err := Convert("cfg.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ir.Load("x.toml", out)
	if err != nil {
		t.Fatal(err)
	}
	// MoE where (i+1) is even and i is not 1: layers 3, 5, … 47 (23);
	// the other 25 are dense MLPs intermediate_size wide.
	const h, v = 2048, 151936
	attn := int64(h*4096 + 2*h*512 + 4096*h + 2*128 + 2*h)
	want := int64(2*v*h+h) + 23*(attn+128*h+128*3*h*768) + 25*(attn+3*h*6144)
	if got := m.Stats().Params; got != want {
		t.Errorf("params = %d, want %d", got, want)
	}
	kinds := map[string]ir.Kind{}
	for _, mod := range m.Modules {
		kinds[mod.Name] = mod.Kind
	}
	for name, want := range map[string]ir.Kind{"model.layers.0.mlp": ir.KindMLP, "model.layers.1.mlp": ir.KindMLP, "model.layers.3.mlp": ir.KindMoE, "model.layers.4.mlp": ir.KindMLP, "model.layers.47.mlp": ir.KindMoE} {
		if kinds[name] != want {
			t.Errorf("%s is %v, want %v", name, kinds[name], want)
		}
	}
}

// TestBidirectionalGemma: use_bidirectional_attention makes Gemma's
// attention non-causal, which changes its cost, not its parameters.
func TestBidirectionalGemma(t *testing.T) {
	src := mustRead(t, "gemma-2b")
	causal, err := Convert("cfg.json", src)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := Convert("cfg.json", bytes.Replace(src, []byte(`"model_type"`), []byte(`"use_bidirectional_attention": true, "model_type"`), 1))
	if err != nil {
		t.Fatal(err)
	}
	a, err := ir.Load("a.toml", causal)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ir.Load("b.toml", bi)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(bi, []byte("causal = false")) || a.Stats().Params != b.Stats().Params || b.Modules[0].Cost.FlopsFwd <= a.Modules[0].Cost.FlopsFwd {
		t.Errorf("bidirectional: params %d vs %d, forward FLOPs %g vs %g", b.Stats().Params, a.Stats().Params, b.Modules[0].Cost.FlopsFwd, a.Modules[0].Cost.FlopsFwd)
	}
}

// TestAttentionWindows: the layers whose attention is sliding or chunked
// are the ones transformers 5.12's configs mark in layer_types (counted in
// the torch root with AutoConfig.for_model on each fixture), and their
// attention core costs less than a full layer's, by the mask's pairs.
func TestAttentionWindows(t *testing.T) {
	for _, tc := range []struct {
		fixture  string
		windowed int // layers
		layers   int
	}{
		{"mistral-7b-v0.1", 32, 32},
		{"phi-3-mini-4k-instruct", 32, 32},
		{"gemma-2-2b", 13, 26},
		{"gemma-2-9b", 21, 42},
		{"gemma-3-1b-pt", 22, 26},
		{"gpt-oss-20b", 12, 24},
		{"gpt-oss-120b", 18, 36},
		{"olmo-3-7b", 24, 32},
		{"llama-4-scout-17b-16e-text", 36, 48},
		{"llama-4-maverick-17b-128e-text", 36, 48},
		{"qwen2.5-7b", 0, 28},
		{"qwen3-8b", 0, 36},
		{"smollm3-3b", 0, 36},
		{"mixtral-8x7b-v0.1", 0, 32},
		{"meta-llama-3-8b", 0, 32},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			path := filepath.Join("testdata", tc.fixture+".json")
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Longer than every window and chunk, so each one shows; the
			// same config without its window or chunk is the reference.
			attnFLOPs := func(src []byte) []float64 {
				out, err := ConvertWith(path, src, Options{SeqLen: 32768})
				if err != nil {
					t.Fatal(err)
				}
				// An unfused core (gpt-oss's eager one, flash = false)
				// computes every pair whatever its mask keeps: the windows
				// written show in the FLOPs of a fused kernel's core.
				out = bytes.ReplaceAll(out, []byte("flash = false"), []byte("flash = true "))
				m, err := ir.Load(tc.fixture+".toml", out)
				if err != nil {
					t.Fatal(err)
				}
				var attn []float64
				for _, mod := range m.Modules {
					if mod.Kind == ir.KindAttention {
						attn = append(attn, mod.Cost.AttnFlopsFwd)
					}
				}
				return attn
			}
			var cfg map[string]any
			if err := json.Unmarshal(src, &cfg); err != nil {
				t.Fatal(err)
			}
			for _, sub := range []map[string]any{cfg, asMap(cfg["text_config"])} {
				delete(sub, "sliding_window")
				delete(sub, "attention_chunk_size")
			}
			plain, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			attn, ref := attnFLOPs(src), attnFLOPs(plain)
			windowed := 0
			for i, f := range attn {
				if f < ref[i] {
					windowed++
				}
			}
			if len(attn) != tc.layers || windowed != tc.windowed {
				t.Errorf("%d of %d attention layers windowed, want %d of %d", windowed, len(attn), tc.windowed, tc.layers)
			}
		})
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
