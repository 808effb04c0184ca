package accelerate

import (
	"os"
	"strings"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
)

// cfg is an FSDP2 config of two processes with top-level lines top and
// fsdp_config lines fsdp.
func cfg(top, fsdp string) string {
	s := "distributed_type: FSDP\nnum_processes: 2\n" + top
	s += "fsdp_config:\n  fsdp_version: 2\n"
	for _, l := range strings.Split(strings.TrimSpace(fsdp), "\n") {
		if l != "" {
			s += "  " + l + "\n"
		}
	}
	return s
}

// TestConfigKeys reads every key accelerate's launcher and FSDP2 plugin
// read, with their defaults, as accelerate 1.14 resolves them.
func TestConfigKeys(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		check     func(c *Config) bool
	}{
		{"defaults", cfg("", ""), func(c *Config) bool {
			return c.WrapPolicy == NoWrap && c.Reshard && !c.Offload && !c.ActivationCheckpointing && c.CPURAMEfficientLoading &&
				c.StateDictType == "SHARDED_STATE_DICT" && c.MixedPrecision == "no" && c.NumProcesses == 2 && c.NumMachines == 1 &&
				c.MinNumParams == 100_000_000 && c.LayerClasses == nil && !c.FromFSDP1
		}},
		{"reshard false", cfg("", "fsdp_reshard_after_forward: false"), func(c *Config) bool { return !c.Reshard }},
		{"reshard str_to_bool", cfg("", "fsdp_reshard_after_forward: 'off'"), func(c *Config) bool { return !c.Reshard }},
		{"offload", cfg("", "fsdp_offload_params: true"), func(c *Config) bool { return c.Offload }},
		{"offload 1", cfg("", "fsdp_offload_params: 1"), func(c *Config) bool { return c.Offload }},
		{"ac", cfg("", "fsdp_activation_checkpointing: yes"), func(c *Config) bool { return c.ActivationCheckpointing }},
		{"ram", cfg("", "fsdp_cpu_ram_efficient_loading: false"), func(c *Config) bool { return !c.CPURAMEfficientLoading }},
		{"state dict full", cfg("", "fsdp_state_dict_type: full_state_dict"), func(c *Config) bool { return c.StateDictType == "FULL_STATE_DICT" }},
		{"state dict digit", cfg("", "fsdp_state_dict_type: 3"), func(c *Config) bool { return c.StateDictType == "SHARDED_STATE_DICT" }},
		{"transformer", cfg("", "fsdp_auto_wrap_policy: transformer_based_wrap\nfsdp_transformer_layer_cls_to_wrap: A,B"), func(c *Config) bool {
			return c.WrapPolicy == TransformerBasedWrap && len(c.LayerClasses) == 2 && c.LayerClasses[1] == "B"
		}},
		{"classes not trimmed", cfg("", "fsdp_transformer_layer_cls_to_wrap: A, B"), func(c *Config) bool { return c.LayerClasses[1] == " B" }},
		{"size", cfg("", "fsdp_auto_wrap_policy: SIZE_BASED_WRAP\nfsdp_min_num_params: 2000"), func(c *Config) bool {
			return c.WrapPolicy == SizeBasedWrap && c.MinNumParams == 2000
		}},
		{"no prefix", cfg("", "auto_wrap_policy: NO_WRAP\nreshard_after_forward: false"), func(c *Config) bool { return !c.Reshard }},
		{"bf16", cfg("mixed_precision: bf16\n", ""), func(c *Config) bool { return c.MixedPrecision == "bf16" }},
		{"fp16 old key", cfg("fp16: true\n", ""), func(c *Config) bool { return c.MixedPrecision == "fp16" }},
		{"machines", strings.Replace(cfg("num_machines: 2\n", ""), "num_processes: 2", "num_processes: 16", 1), func(c *Config) bool {
			return c.NumProcesses == 16 && c.NumMachines == 2
		}},
		{"compile", cfg("dynamo_config:\n  dynamo_backend: INDUCTOR\n  dynamo_mode: default\n", ""), func(c *Config) bool { return c.Compile && len(c.Notes) == 1 }},
		{"compile old", cfg("dynamo_backend: 'NO'\n", ""), func(c *Config) bool { return !c.Compile }},
		{"no effect", cfg("debug: false\nmachine_rank: 0\ngpu_ids: all\nmain_process_ip: 10.0.0.1\nmain_process_port: 29500\nrdzv_backend: static\nsame_network: true\nmain_training_function: main\nenable_cpu_affinity: false\ndowncast_bf16: 'no'\ntpu_env: []\ntpu_use_cluster: false\ntpu_use_sudo: false\ntpu_name: null\ntpu_zone: null\ncommand_file: null\ncommands: null\ntpu_vm: null\nmpirun_config: {}\nfp8_config: {}\nparallelism_config: {}\n", ""), func(c *Config) bool {
			return len(c.Notes) == 0
		}},
		{"deepspeed ignored", cfg("deepspeed_config:\n  zero_stage: 3\n", ""), func(c *Config) bool { return len(c.Notes) == 1 && c.Notes[0].Key == "deepspeed_config" }},
		{"fsdp2 ignores fsdp1 keys", cfg("", "fsdp_sharding_strategy: SHARD_GRAD_OP\nfsdp_backward_prefetch: BACKWARD_PRE\nfsdp_forward_prefetch: true\nfsdp_use_orig_params: true\nfsdp_sync_module_states: true"), func(c *Config) bool {
			return c.Reshard && len(c.Notes) == 5
		}},
		{"fsdp1 mapping", "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_backward_prefetch: BACKWARD_PRE\n  fsdp_forward_prefetch: false\n  fsdp_use_orig_params: true\n  fsdp_sync_module_states: false\n  fsdp_offload_params: true\n", func(c *Config) bool {
			// sync false with RAM-efficient loading is no error: to-fsdp2 drops the key first.
			return c.FromFSDP1 && !c.Reshard && c.Offload && len(c.Notes) == 7
		}},
		{"fsdp1 strategies", "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 1\n  fsdp_sharding_strategy: HYBRID_SHARD\n", func(c *Config) bool {
			return c.FromFSDP1 && c.Reshard && strings.Contains(c.Notes[0].Msg, "replication across nodes is lost")
		}},
		{"fsdp1 no_shard", "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_reshard_after_forward: NO_SHARD\n", func(c *Config) bool {
			return !c.Reshard && strings.Contains(c.Notes[0].Msg, "no NO_SHARD")
		}},
	} {
		c, err := Parse("a.yaml", []byte(tc.src))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !tc.check(c) {
			t.Errorf("%s: got %+v", tc.name, *c)
		}
	}
}

// TestConfigErrors: every refusal names the file, the place and the key.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"", "a.yaml: the config is empty"},
		{"- a\n", "a.yaml:1:1: an accelerate config is a mapping"},
		{cfg("bogus_key: 1\n", ""), "a.yaml:3:1: bogus_key: not a key of accelerate 1.14's config"},
		{cfg("num_procesess: 1\n", ""), "did you mean num_processes?"},
		{cfg("", "fsdp_bogus: 1"), "a.yaml:5:3: fsdp_bogus: not an FSDP key"},
		{cfg("", "fsdp_auto_wrap_polcy: NO_WRAP"), "did you mean fsdp_auto_wrap_policy?"},
		{cfg("", "auto_wrap_policy: NO_WRAP\nfsdp_auto_wrap_policy: NO_WRAP"), "fsdp_auto_wrap_policy: given twice"},
		{"num_processes: 2\n", "distributed_type: missing"},
		{"distributed_type: MULTI_GPU\nnum_processes: 2\n", "a.yaml:1:19: distributed_type: \"MULTI_GPU\": not an FSDP config"},
		{"distributed_type: FSDP\n", "num_processes: missing"},
		{"distributed_type: FSDP\nnum_processes: 0\n", "a.yaml:2:16: num_processes: must be a positive integer"},
		{"distributed_type: FSDP\nnum_processes: two\n", "num_processes: must be a positive integer"},
		{cfg("num_machines: 3\n", ""), "num_machines: must be a positive integer no larger than num_processes"},
		{strings.Replace(cfg("num_machines: 3\n", ""), "num_processes: 2", "num_processes: 4", 1), "3 machines cannot share 4 processes"},
		{cfg("compute_environment: AMAZON_SAGEMAKER\n", ""), "compute_environment: \"AMAZON_SAGEMAKER\": fsdpc reads LOCAL_MACHINE"},
		{cfg("use_cpu: true\n", ""), "use_cpu: true: accelerate 1.14 never enables FSDP on CPU"},
		{cfg("mixed_precision: fp8\n", ""), "mixed_precision: fp8: fsdpc does not model fp8"},
		{cfg("mixed_precision: fp64\n", ""), "mixed_precision: \"fp64\": accelerate accepts no, fp16, bf16 or fp8"},
		{cfg("dynamo_config:\n  dynamo_backend: EAGER\n", ""), "dynamo_config.dynamo_backend: \"EAGER\""},
		{cfg("dynamo_config:\n  dynamo_bogus: 1\n", ""), "dynamo_config.dynamo_bogus: not a key"},
		{cfg("dynamo_backend: AOT_EAGER\n", ""), "dynamo_backend: \"AOT_EAGER\""},
		{cfg("parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n", ""), "parallelism_config: fsdpc does not read"},
		{cfg("fsdp_config: 3\n", ""), "key fsdp_config again"},
		{"distributed_type: FSDP\nnum_processes: 2\nfsdp_config: [1]\n", "fsdp_config: must be a mapping"},
		{strings.Replace(cfg("", ""), "fsdp_version: 2", "fsdp_version: 3", 1), "a.yaml:4:17: fsdp_version: 3: accelerate's FSDP versions are 1 and 2"},
		{cfg("", "fsdp_reshard_after_forward: FULL_SHARD"), "fsdp_reshard_after_forward: FULL_SHARD: FSDP2 takes true or false"},
		{cfg("", "fsdp_offload_params: maybe"), "fsdp_offload_params: maybe: not true or false"},
		{cfg("", "fsdp_activation_checkpointing: [true]"), "fsdp_activation_checkpointing: a sequence: not true or false"},
		{cfg("", "fsdp_cpu_ram_efficient_loading: 2"), "fsdp_cpu_ram_efficient_loading: 2: not true or false"},
		{cfg("", "fsdp_sync_module_states: false"), "fsdp_sync_module_states: False with fsdp_cpu_ram_efficient_loading"},
		{cfg("", "fsdp_auto_wrap_policy: LAYER_WRAP"), "fsdp_auto_wrap_policy: LAYER_WRAP: accelerate accepts"},
		{cfg("", "fsdp_transformer_layer_cls_to_wrap: [A, B]"), "fsdp_transformer_layer_cls_to_wrap: a sequence: accelerate reads one string"},
		{cfg("", "fsdp_min_num_params: 1e8"), "fsdp_min_num_params: 1e8: must be an integer"},
		{cfg("", "fsdp_state_dict_type: LOCAL_STATE_DICT"), "FSDP2 does not support LOCAL_STATE_DICT"},
		{cfg("", "fsdp_state_dict_type: NONE_STATE_DICT"), "fsdp_state_dict_type: NONE_STATE_DICT: accelerate accepts"},
		{cfg("", "fsdp_ignored_modules: lm_head"), "fsdp_ignored_modules: fsdpc does not model"},
		{cfg("", "fsdp_version: 2"), "key fsdp_version again"},
		{"a: &x 1\n", "anchors and aliases are not supported"},
		{"a: |\n  x\n", "block scalars"},
		{"a: 'x\n", "does not end on its line"},
		{"a:\n\t- 1\n", "a tab in indentation"},
		{"a: 1\n---\nb: 2\n", "one document only"},
	} {
		_, err := Parse("a.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.src, err, tc.want)
		}
	}
}

// TestDecideErrors: what accelerate 1.14 with torch 2.14 refuses or fails
// on for a model, and what fsdpc cannot plan, named by key.
func TestDecideErrors(t *testing.T) {
	hfSrc, err := os.ReadFile("testdata/tiny-llama.json")
	if err != nil {
		t.Fatal(err)
	}
	tied := strings.Replace(string(hfSrc), `"tie_word_embeddings": false`, `"tie_word_embeddings": true`, 1)
	for _, tc := range []struct {
		name, config, model, want string
	}{
		{"unknown class", cfg("", "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nfsdp_transformer_layer_cls_to_wrap: LlamaBlock"), "", `a.yaml:6:39: fsdp_transformer_layer_cls_to_wrap: accelerate cannot find the transformer layer class "LlamaBlock"`},
		{"spaced class", cfg("", "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nfsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer, LlamaMLP"), "", `class " LlamaMLP"`},
		{"paramless class", cfg("", "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nfsdp_transformer_layer_cls_to_wrap: LlamaRotaryEmbedding"), "", "modules without parameters that fsdpc does not model"},
		{"part of a kind", cfg("", "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nfsdp_transformer_layer_cls_to_wrap: Linear"), "", "which fsdpc models as one computation"},
		{"whole model", cfg("", "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nfsdp_transformer_layer_cls_to_wrap: LlamaModel"), "", `the wrap policy shards "model", which holds the input embedding "model.embed_tokens"`},
		{"size ModuleList", cfg("", "fsdp_auto_wrap_policy: SIZE_BASED_WRAP\nfsdp_min_num_params: 1000"), "", `fsdp_min_num_params: the wrap policy matches "model.layers", a ModuleList`},
		{"ac no wrap", cfg("", "fsdp_activation_checkpointing: true"), "", "fsdp_activation_checkpointing: true with no wrap policy (fsdp_auto_wrap_policy NO_WRAP)"},
		{"ac size 0", cfg("", "fsdp_activation_checkpointing: true\nfsdp_auto_wrap_policy: SIZE_BASED_WRAP\nfsdp_min_num_params: 0"), "", "with fsdp_min_num_params 0, which accelerate drops"},
		{"ac inside a kind", cfg("", "fsdp_activation_checkpointing: true\nfsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nfsdp_transformer_layer_cls_to_wrap: LlamaAttention"), "", "cannot recompute part of it"},
		{"tied", cfg("", ""), tied, "the model ties its input and output embeddings"},
	} {
		model := tc.model
		if model == "" {
			model = string(hfSrc)
		}
		_, _, err := Import(Input{ConfigFile: "a.yaml", Config: []byte(tc.config), ModelArg: "m.json", HFFile: "m.json", HF: []byte(model)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	// gemma3_text's _no_split_modules names Siglip classes its text model
	// lacks: accelerate fails on them without a class list.
	mm := &Model{IR: &ir.Model{Modules: []ir.Module{{Name: "", Parent: ir.NoModule}}}, Class: []string{"Gemma3ForCausalLM"},
		NoSplit: []string{"SiglipVisionEmbeddings"}, InputEmbed: ir.NoModule, OutputEmbed: ir.NoModule, FinalNorm: ir.NoModule, Unmodelled: map[string][]string{}}
	c, err := Parse("a.yaml", []byte(cfg("", "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decide(c, mm); err == nil || !strings.Contains(err.Error(), `accelerate wraps the model's _no_split_modules, ["SiglipVisionEmbeddings"]`) {
		t.Errorf("no_split: got %v", err)
	}
}

// TestModelFileClasses: a model file's classes are its blocks' names and
// its kinds; accelerate finds no embeddings in a plain nn.Module, and the
// final norm among the root's children.
func TestModelFileClasses(t *testing.T) {
	src, file, ok := plans.Source("llama3-8b")
	if !ok {
		t.Skip("no llama3-8b in the zoo")
	}
	c, err := Parse("a.yaml", []byte(cfg("mixed_precision: bf16\n", "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nfsdp_transformer_layer_cls_to_wrap: decoder")))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ir.Load(file, src)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decide(c, FromModelFile(m))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, call := range d.Calls {
		got = append(got, moduleLabel(m, call))
	}
	if len(got) != 34 || got[0] != "layers.0" || got[32] != "norm" || got[33] != "(root)" {
		t.Errorf("calls %q", got)
	}
	text, _, err := Import(Input{ConfigFile: "a.yaml", Config: []byte(cfg("", "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nfsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer")), ModelArg: "llama3-8b", ModelFile: file, ModelText: src})
	if err == nil || !strings.Contains(err.Error(), "the model's classes with parameters: ") {
		t.Errorf("a transformers class in a model file: got %v %s", err, text)
	}
}

// FuzzConfig: any config is read or refused with an error, never a panic.
func FuzzConfig(f *testing.F) {
	for _, name := range []string{"fsdp1.yaml", "fsdp2-transformer.yaml", "fsdp2-ac-nosplit.yaml"} {
		src, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src))
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse("a.yaml", []byte(s))
		if err == nil && (c.NumProcesses < 1 || c.NumMachines < 1 || c.NumProcesses%c.NumMachines != 0) {
			t.Errorf("accepted a world of %d processes on %d machines", c.NumProcesses, c.NumMachines)
		}
	})
}
