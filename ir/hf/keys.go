package hf

import (
	"maps"
	"slices"
	"strings"
)

// Every key of a config is accounted for: the importer read it, or it is
// known to change no parameter and no matrix multiply, or the import
// stops naming it. A key the family's config class does not define is
// ignored by transformers too, and said so in the header, unless it is a
// key that shapes the model in another family (num_experts in a config
// relabelled qwen3): then the model transformers would build differs from
// the one the config describes, and the import stops.

// classFields are the fields of each family's transformers 5.12 config
// class (configuration_*.py), which its model may read.
var classFields = map[string][]string{
	"llama":       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "pretraining_tp", "tie_word_embeddings", "rope_parameters", "attention_bias", "attention_dropout", "mlp_bias", "head_dim"},
	"mistral":     {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings", "rope_parameters", "sliding_window", "attention_dropout"},
	"mixtral":     {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings", "sliding_window", "attention_dropout", "num_experts_per_tok", "num_local_experts", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "rope_parameters"}, // attribute_map: {"num_experts": "num_local_experts"}
	"qwen2":       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "tie_word_embeddings", "rope_parameters", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types", "attention_dropout", "pad_token_id", "bos_token_id", "eos_token_id"},
	"gemma":       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "eos_token_id", "bos_token_id", "tie_word_embeddings", "rope_parameters", "attention_bias", "attention_dropout", "use_bidirectional_attention"},
	"gpt2":        {"vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop", "layer_norm_epsilon", "initializer_range", "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "scale_attn_weights", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention", "tie_word_embeddings"}, // attribute_map: { "hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer", }
	"phi3":        {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "resid_pdrop", "embd_pdrop", "attention_dropout", "hidden_act", "max_position_embeddings", "original_max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "tie_word_embeddings", "rope_parameters", "bos_token_id", "eos_token_id", "pad_token_id", "sliding_window"},
	"olmo2":       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings", "rope_parameters", "attention_bias", "attention_dropout", "rms_norm_eps"},
	"qwen3":       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "tie_word_embeddings", "rope_parameters", "attention_bias", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types", "attention_dropout", "pad_token_id", "bos_token_id", "eos_token_id"},
	"gemma2":      {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_activation", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "eos_token_id", "bos_token_id", "tie_word_embeddings", "rope_parameters", "attention_bias", "attention_dropout", "query_pre_attn_scalar", "sliding_window", "layer_types", "final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention"},
	"gemma3_text": {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_activation", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "eos_token_id", "bos_token_id", "tie_word_embeddings", "rope_parameters", "attention_bias", "attention_dropout", "query_pre_attn_scalar", "sliding_window", "layer_types", "final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention"},
	"deepseek_v2": {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "pretraining_tp", "tie_word_embeddings", "rope_parameters", "attention_bias", "attention_dropout", "mlp_bias", "head_dim", "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "n_group", "n_routed_experts", "n_shared_experts", "qk_nope_head_dim", "qk_rope_head_dim", "routed_scaling_factor", "topk_group", "topk_method", "norm_topk_prob", "v_head_dim", "num_experts_per_tok", "moe_intermediate_size"},
	"deepseek_v3": {"vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "n_shared_experts", "n_routed_experts", "routed_scaling_factor", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "n_group", "topk_group", "num_experts_per_tok", "first_k_dense_replace", "norm_topk_prob", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "pretraining_tp", "tie_word_embeddings", "rope_parameters", "rope_interleave", "attention_bias", "attention_dropout"}, // attribute_map: { "num_local_experts": "n_routed_experts", }
	"gpt_oss":     {"num_hidden_layers", "num_local_experts", "vocab_size", "hidden_size", "intermediate_size", "head_dim", "num_attention_heads", "num_key_value_heads", "sliding_window", "tie_word_embeddings", "hidden_act", "initializer_range", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "attention_dropout", "num_experts_per_tok", "router_aux_loss_coef", "output_router_logits", "use_cache", "layer_types", "pad_token_id", "bos_token_id", "eos_token_id", "attention_bias"},                                                                                                                                                                       // attribute_map: { "num_experts": "num_local_experts", }
	"qwen3_moe":   {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "tie_word_embeddings", "rope_parameters", "attention_bias", "use_sliding_window", "sliding_window", "attention_dropout", "decoder_sparse_step", "moe_intermediate_size", "num_experts_per_tok", "num_experts", "norm_topk_prob", "output_router_logits", "router_aux_loss_coef", "mlp_only_layers", "pad_token_id", "bos_token_id", "eos_token_id"},                                                                                             // attribute_map: { "num_experts": "num_local_experts", }
	"llama4_text": {"vocab_size", "hidden_size", "intermediate_size", "intermediate_size_mlp", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings", "attention_dropout", "num_experts_per_tok", "num_local_experts", "moe_layers", "interleave_moe_layer_step", "use_qk_norm", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "rope_parameters", "no_rope_layers", "no_rope_layer_interval", "attention_chunk_size", "layer_types", "attn_temperature_tuning", "floor_scale", "attn_scale", "attention_bias"},
	"smollm3":     {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "rope_parameters", "use_sliding_window", "sliding_window", "no_rope_layers", "no_rope_layer_interval", "layer_types", "attention_bias", "attention_dropout", "mlp_bias", "tie_word_embeddings"},
	"granite":     {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings", "rope_parameters", "attention_bias", "attention_dropout", "mlp_bias", "embedding_multiplier", "logits_scaling", "residual_multiplier", "attention_multiplier"},
	"olmo3":       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings", "rope_parameters", "attention_bias", "attention_dropout", "rms_norm_eps", "sliding_window", "layer_types"},
}

// aliases are the attribute_map entries of the config classes: transformers
// reads the alias as the field it names. The importer reads the fields
// only, so an alias in a config is refused, naming the field to write.
var aliases = map[string]map[string]string{
	"mixtral":     {"num_experts": "num_local_experts"},
	"gpt_oss":     {"num_experts": "num_local_experts"},
	"qwen3_moe":   {"num_local_experts": "num_experts"},
	"deepseek_v3": {"num_local_experts": "n_routed_experts"},
	"gpt2":        {"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer"},
}

// inertKeys change no parameter shape and no matrix multiply: identifiers,
// numerics (eps, initialisation), RoPE's frequencies, dropout rates,
// routing arithmetic, scalar multipliers and soft-caps (element-wise),
// generation defaults, and transformers' bookkeeping.
var inertKeys = set(
	// bookkeeping and identifiers
	"_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "auto_map",
	"use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
	"output_hidden_states", "output_attentions", "return_dict", "torchscript", "use_bfloat16", "id2label", "label2id",
	"num_labels", "problem_type", "tokenizer_class", "task_specific_params", "prefix", "finetuning_task",
	"chunk_size_feed_forward", "pruned_heads", "tie_encoder_decoder", "is_decoder", "cache_implementation",
	"max_length", "min_length", "do_sample", "temperature", "top_p", "top_k", "num_beams", "repetition_penalty",
	"length_penalty", "no_repeat_ngram_size", "early_stopping", "num_return_sequences", "forced_bos_token_id",
	"forced_eos_token_id", "suppress_tokens", "begin_suppress_tokens", "bad_words_ids",
	// numerics and RoPE
	"initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "rope_theta", "rope_scaling",
	"rope_parameters", "rope_type", "original_max_position_embeddings", "rope_interleave", "rope_local_base_freq",
	"pretraining_tp",
	// dropout
	"attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
	// routing arithmetic and losses
	"output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob", "routed_scaling_factor",
	"n_group", "topk_group", "topk_method", "scoring_func", "seq_aux", "aux_loss_alpha",
	// element-wise scales and caps
	"query_pre_attn_scalar", "final_logit_softcapping", "attn_logit_softcapping", "attn_temperature_tuning",
	"floor_scale", "attn_scale", "use_qk_norm",
	// GPT-2's sequence-summary head (not part of the causal LM) and
	// attention arithmetic
	"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
	"scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
)

// elsewhereKeys shape the model in some family: a config whose class does
// not define one is refused when it sets it, because transformers would
// build a model without what the config asks for.
var elsewhereKeys = set(
	"num_experts", "num_local_experts", "n_routed_experts", "n_shared_experts", "moe_intermediate_size",
	"num_experts_per_tok", "decoder_sparse_step", "mlp_only_layers", "moe_layers", "interleave_moe_layer_step",
	"intermediate_size_mlp", "first_k_dense_replace", "moe_layer_freq", "shared_expert_intermediate_size",
	"num_shared_experts", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
	"attention_bias", "mlp_bias", "use_bidirectional_attention", "sliding_window", "use_sliding_window",
	"attention_chunk_size", "n_inner", "add_cross_attention", "head_dim", "num_key_value_heads",
)

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// vetKeys refuses the keys that would change the model without the
// importer modelling them, and notes the ones transformers ignores.
func vetKeys(c *config, m *model) {
	if len(c.errs) > 0 {
		// Keys a failed read left unread are not the user's mistake.
		return
	}
	fields := set(classFields[m.modelType]...)
	class := m.family.class
	quantized := c.has("quantization_config")
	var ignored []string
	for _, k := range slices.Sorted(maps.Keys(c.fields)) {
		if c.read[k] || inertKeys[k] || inert(string(c.fields[k])) {
			continue
		}
		switch {
		case aliases[m.modelType][k] != "":
			c.errorf("%s is %s's other name for %s, which transformers reads in its place; write %s", k, class, aliases[m.modelType][k], aliases[m.modelType][k])
		case fields[k]:
			c.errorf("%s = %s is a field of %s that fsdpc does not model; it may change the model's parameters or compute, so the import stops (please report it)", k, clean(short(strings.Join(strings.Fields(string(c.fields[k])), " "))), class)
		case elsewhereKeys[k]:
			c.errorf("%s = %s is not a field of %s, so transformers' %s model ignores it and would be built without what it asks for; it shapes the model in %s: if the checkpoint is one of those, set model_type to match", k, clean(short(strings.Join(strings.Fields(string(c.fields[k])), " "))), class, m.modelType, strings.Join(familiesWith(k), ", "))
		default:
			ignored = append(ignored, clean(k))
		}
	}
	if len(ignored) > 0 {
		m.assume("ignored, as transformers' %s ignores keys that are not its fields: %s", class, strings.Join(ignored, ", "))
	}
	if quantized {
		m.assume("quantization_config: the checkpoint's quantized weights are for inference; training holds them dequantized, as AutoModelForCausalLM.from_config builds them")
	}
}

// familiesWith lists the model types whose config class defines key.
func familiesWith(key string) []string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(classFields)) {
		if slices.Contains(classFields[t], key) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		out = []string{"other model types"}
	}
	return out
}

// inert is true for values that ask for nothing: null, false, zero, an
// empty array or object or string.
func inert(raw string) bool {
	switch strings.TrimSpace(raw) {
	case "null", "false", "0", "[]", "{}", `""`:
		return true
	}
	return false
}
