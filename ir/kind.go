package ir

// Kind is what a module is. Kinds with a cost formula are compute modules;
// their children only hold parameters.
type Kind uint8

const (
	// KindContainer groups children and has no computation of its own.
	KindContainer Kind = iota
	// KindCustom is a leaf with explicit parameters and explicit costs.
	KindCustom
	KindLinear
	KindEmbedding
	KindNorm
	KindAttention
	KindMLP
	KindMoE
	KindConv
	// KindLoss is the cross-entropy over the logits, upcast to fp32 as
	// torchtitan does: no parameters, no FLOPs, but the largest
	// activations of a large-vocabulary model.
	KindLoss
	// KindMLA is DeepSeek's multi-head latent attention: queries (through
	// an optional low-rank bottleneck) and keys/values projected through a
	// compressed latent, with a decoupled RoPE part.
	KindMLA
)

var kindNames = [...]string{"container", "custom", "linear", "embedding", "norm", "attention", "mlp", "moe", "conv", "loss", "mla"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(?)"
}

// attrType is the TOML shape of a kind attribute.
type attrType uint8

const (
	attrInt     attrType = iota // a positive integer
	attrCount                   // a non-negative integer
	attrBool                    // true or false
	attrEnum                    // one of attrSpec.enum
	attrInts                    // an integer or an array of positive integers
	attrNames                   // a table from role to child-module name
	attrStrings                 // an array of strings
)

type attrSpec struct {
	key      string
	typ      attrType
	required bool
	enum     []string // attrEnum: allowed values, first is the default
	roles    []string // attrNames, attrStrings: allowed role names
}

// kindSpec declares a module kind: the keys it takes. Parameters and costs
// are in kindparams.go and kindcost.go.
type kindSpec struct {
	kind  Kind
	attrs []attrSpec
}

var activations = []string{"swiglu", "geglu", "gelu", "relu", "silu"}

var loraAttrs = []attrSpec{
	{key: "lora_rank", typ: attrCount},
}

// kindSpecs is the table of module kinds the model format accepts.
var kindSpecs = map[string]kindSpec{
	"linear": {KindLinear, append([]attrSpec{
		{key: "in", typ: attrInt, required: true},
		{key: "out", typ: attrInt, required: true},
		{key: "bias", typ: attrBool},
		{key: "transposed", typ: attrBool},
	}, loraAttrs...)},
	"embedding": {KindEmbedding, []attrSpec{
		{key: "num", typ: attrInt, required: true},
		{key: "dim", typ: attrInt, required: true},
	}},
	"norm": {KindNorm, []attrSpec{
		{key: "dim", typ: attrInt, required: true},
		{key: "norm", typ: attrEnum, enum: []string{"rms", "layer"}},
		{key: "bias", typ: attrBool},
		{key: "affine", typ: attrBool},
		{key: "fused", typ: attrBool},
	}},
	"attention": {KindAttention, append([]attrSpec{
		{key: "dim", typ: attrInt, required: true},
		{key: "heads", typ: attrInt, required: true},
		{key: "kv_heads", typ: attrInt},
		{key: "head_dim", typ: attrInt},
		{key: "causal", typ: attrBool},
		{key: "qkv_bias", typ: attrBool},
		{key: "out_bias", typ: attrBool},
		{key: "fused_qkv", typ: attrBool},
		{key: "out_proj", typ: attrBool},
		{key: "q_last", typ: attrBool},
		{key: "transposed", typ: attrBool},
		{key: "kv_dim", typ: attrInt},
		{key: "kv_seq_len", typ: attrInt},
		{key: "flash", typ: attrBool},
		{key: "qk_norm", typ: attrEnum, enum: []string{"none", "head", "full"}},
		{key: "rope", typ: attrEnum, enum: []string{"real", "complex", "matrix"}},
		{key: "sinks", typ: attrBool},
		{key: "window", typ: attrInt},
		{key: "chunk", typ: attrInt},
		{key: "names", typ: attrNames, roles: []string{"q", "k", "v", "o", "qkv", "q_norm", "k_norm"}},
		{key: "lora_targets", typ: attrStrings, roles: []string{"q", "k", "v", "o", "qkv"}},
	}, loraAttrs...)},
	"mlp": {KindMLP, append([]attrSpec{
		{key: "dim", typ: attrInt, required: true},
		{key: "hidden", typ: attrInt, required: true},
		{key: "activation", typ: attrEnum, enum: activations},
		{key: "bias", typ: attrBool},
		{key: "transposed", typ: attrBool},
		{key: "fused_gate_up", typ: attrBool},
		{key: "names", typ: attrNames, roles: []string{"gate", "up", "down", "gate_up"}},
		{key: "lora_targets", typ: attrStrings, roles: []string{"gate", "up", "down"}},
	}, loraAttrs...)},
	"moe": {KindMoE, []attrSpec{
		{key: "dim", typ: attrInt, required: true},
		{key: "hidden", typ: attrInt, required: true},
		{key: "experts", typ: attrInt, required: true},
		{key: "top_k", typ: attrInt, required: true},
		{key: "activation", typ: attrEnum, enum: activations},
		{key: "bias", typ: attrBool},
		{key: "router_bias", typ: attrBool},
		{key: "shared_experts", typ: attrCount},
		{key: "grouped", typ: attrBool},
		{key: "fused_gate_up", typ: attrBool},
		{key: "transposed", typ: attrBool},
		{key: "experts_first", typ: attrBool},
		{key: "router_score_bias", typ: attrBool},
		{key: "names", typ: attrNames, roles: []string{"router", "experts", "shared", "gate", "up", "down", "gate_up"}},
	}},
	"mla": {KindMLA, []attrSpec{
		{key: "dim", typ: attrInt, required: true},
		{key: "heads", typ: attrInt, required: true},
		{key: "q_lora_rank", typ: attrCount},
		{key: "kv_lora_rank", typ: attrInt, required: true},
		{key: "qk_nope_head_dim", typ: attrInt, required: true},
		{key: "qk_rope_head_dim", typ: attrInt, required: true},
		{key: "v_head_dim", typ: attrInt, required: true},
		{key: "bias", typ: attrBool},
		{key: "causal", typ: attrBool},
		{key: "flash", typ: attrBool},
		{key: "names", typ: attrNames, roles: []string{"q", "q_a", "q_a_norm", "q_b", "kv_a", "kv_a_norm", "kv_b", "o"}},
	}},
	"loss": {KindLoss, []attrSpec{
		{key: "vocab", typ: attrInt, required: true},
		{key: "upcast", typ: attrBool},
		{key: "compiled", typ: attrBool},
	}},
	"conv": {KindConv, []attrSpec{
		{key: "in", typ: attrInt, required: true},
		{key: "out", typ: attrInt, required: true},
		{key: "kernel", typ: attrInts, required: true},
		{key: "stride", typ: attrInts},
		{key: "padding", typ: attrInts},
		{key: "groups", typ: attrInt},
		{key: "bias", typ: attrBool},
		{key: "input_size", typ: attrInts, required: true},
	}},
}

// KindNames lists the kinds a model file may name.
func KindNames() []string { return sortedKeys(kindSpecs) }

// allAttrKeys is every kind attribute, used when a module's kind is unknown
// so its attributes are not reported as unknown keys as well.
func allAttrKeys() []string {
	seen := map[string]bool{}
	var out []string
	for _, name := range KindNames() {
		for _, a := range kindSpecs[name].attrs {
			if !seen[a.key] {
				seen[a.key] = true
				out = append(out, a.key)
			}
		}
	}
	return out
}
